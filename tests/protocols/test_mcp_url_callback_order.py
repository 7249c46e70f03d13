"""A live 2025-11-25 URL authorization: the callback's notification goes out before the result.

The result ends the call's response stream, so a notification sent after it is never seen (the
flaky end-to-end failure of test_legacy_url_elicitation_completes_through_the_callback). These
tests hold the notification in a session whose sending the test controls, on a real SQLite
runtime, and check the order without any timing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context
from mcp_types import (
    ClientCapabilities,
    ElicitationCapability,
    ElicitCompleteNotification,
    ElicitRequest,
    ElicitResult,
    UrlElicitationCapability,
)

from pausemesh.bootstrap import open_runtime
from pausemesh.core.model import Continuation
from pausemesh.core.resume import Resume, TrustedHost
from pausemesh.core.service import ContinuationService
from pausemesh.mcp.elicitation import McpProjectionPolicy
from pausemesh.mcp.sdk_bridge import McpAnswer, PauseBridge, Question
from pausemesh.mcp.url_authorization import UrlAuthorizations
from pausemesh.settings import Settings

LINK = "https://auth.example.com/connect?state="


class HeldSession:
    """The one stand-in: a client session that accepts the link and sends the completion
    notification only when the test releases it, recording what reached the client."""

    def __init__(self) -> None:
        self.client_capabilities = ClientCapabilities(
            elicitation=ElicitationCapability(url=UrlElicitationCapability())
        )
        self.asked: asyncio.Queue[str] = asyncio.Queue()
        self.release = asyncio.Event()
        self.sent: list[str] = []

    async def send_request(self, request: ElicitRequest, *_: Any, **__: Any) -> ElicitResult:
        elicitation_id = getattr(request.params, "elicitation_id", None)
        assert isinstance(elicitation_id, str)
        self.asked.put_nowait(elicitation_id)
        return ElicitResult(action="accept")

    async def send_notification(self, notification: Any, _related: Any = None) -> None:
        await self.release.wait()
        assert isinstance(notification, ElicitCompleteNotification)
        self.sent.append("notification:" + notification.params.elicitation_id)


class ResumedSeen:
    """The real service; notes when a read first finds a pause resumed (only the held call
    reads it then), so the test knows without a timer that the call has looked."""

    def __init__(self, service: ContinuationService) -> None:
        self._service = service
        self.resumed = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._service, name)

    async def get(self, continuation_id: str, *, principal: str | None = None) -> Continuation:
        current = await self._service.get(continuation_id, principal=principal)
        if current.status == "resumed":
            self.resumed.set()
        return current


@dataclass
class Live:
    urls: UrlAuthorizations
    service: ContinuationService
    reads: ResumedSeen
    session: HeldSession
    call: asyncio.Task[Any]
    cid: str


@pytest.fixture(name="live")
async def live_fixture(tmp_path: Path) -> AsyncIterator[Live]:
    settings = Settings(database_path=str(tmp_path / "urls.db"), data_dir=str(tmp_path))
    async with open_runtime(settings, sweeper=False) as runtime:
        reads = ResumedSeen(runtime.service)
        urls = UrlAuthorizations(
            PauseBridge(lambda: cast("ContinuationService", reads)),
            lambda: McpProjectionPolicy(validate_authorization_url=lambda u: u.startswith(LINK)),
        )
        session = HeldSession()
        ctx: Context[Any, Any] = Context(
            request_context=ServerRequestContext(
                session=cast("Any", session),
                lifespan_context=None,
                protocol_version="2025-11-25",
                method="tools/call",
                request_id=7,
            )
        )
        question = Question(
            tool="sign_in",
            arguments={},
            message="Sign in to the airline",
            schema=None,
            key="authorization",
            expires_in=timedelta(minutes=10),
        )
        call = asyncio.create_task(
            urls.authorize(ctx, question, lambda c: LINK + c.continuation_id)
        )
        call.add_done_callback(lambda _: session.sent.append("result"))
        cid = await session.asked.get()
        yield Live(urls, runtime.service, reads, session, call, cid)
        session.release.set()
        call.cancel()
        await asyncio.gather(call, return_exceptions=True)


async def test_the_held_call_answers_only_after_the_callbacks_notification_was_sent(
    live: Live,
) -> None:
    callback = asyncio.create_task(
        live.urls.complete(live.cid, result={"airline": "PauseMesh Air"}, principal=None)
    )
    await live.reads.resumed.wait()

    # The call has seen the pause resumed, but the notification is still being sent.
    assert not live.call.done()
    assert live.session.sent == []

    live.session.release.set()
    answer = await live.call
    resumed = await callback

    assert live.session.sent == ["notification:" + live.cid, "result"]
    assert isinstance(answer, McpAnswer)
    assert (answer.action, answer.content) == ("accept", {"airline": "PauseMesh Air"})
    assert resumed.status == "resumed"


async def test_a_resume_made_elsewhere_answers_the_held_call_without_a_notification(
    live: Live,
) -> None:
    # Another replica's callback, say: no notification from this process to wait for.
    await live.service.resume(
        Resume(
            continuation_id=live.cid,
            idempotency_key="elsewhere",
            payload={"airline": "PauseMesh Air"},
            by=TrustedHost(None),
        )
    )

    answer = await live.call

    assert isinstance(answer, McpAnswer)
    assert answer.action == "accept"
    assert live.session.sent == ["result"]
