"""``A2aPauses`` in a host's own executor (nothing from the demo), driven by the official client.

The host app is ``PauseMeshPlugin`` + ``A2APlugin`` on a real SQLite file, served in process
(``asgi-lifespan`` + httpx's ASGI transport) to the ``a2a-sdk`` client. The executor only says
what to ask and what to do with an answer; ``A2aPauses`` does the rest.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, create_client
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, CancelTaskRequest, GetTaskRequest, TaskState
from a2a.utils.errors import A2AError, InvalidParamsError
from asgi_lifespan import LifespanManager
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
from litestar import Litestar

from pausemesh.a2a.pauses import A2aPauses, continuation_id_of
from pausemesh.core.resume import Resume, TrustedHost
from pausemesh.core.service import ContinuationService
from pausemesh.settings import Settings
from pausemesh.web.a2a_mount import A2APlugin
from pausemesh.web.config import PauseMeshConfig
from pausemesh.web.plugin import PauseMeshPlugin
from tests.support.asgi import asgi
from tests.support.protocol_clients import send_for_task, user_message

BASE = "http://localhost"
APPROVAL: dict[str, Any] = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}},
    "required": ["approved"],
    "additionalProperties": False,
}


class RefundExecutor(AgentExecutor):
    """A host's executor: asks for approval (or a sign-in), records each answer it acts on."""

    def __init__(self, pausemesh: PauseMeshPlugin) -> None:
        self.pauses = A2aPauses(lambda: pausemesh.runtime.service)
        self.acted_on: list[tuple[Any, Any]] = []

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        answer = await self.pauses.follow_up(context, event_queue)
        if answer is None:
            if context.get_user_input().startswith("sign in"):
                await self.pauses.authorize(
                    context,
                    event_queue,
                    message_for=lambda cid: f"Sign in at https://bank.test/connect?state={cid}",
                )
            else:
                await self.pauses.ask(
                    context,
                    event_queue,
                    message="Approve the refund of 40 EUR?",
                    schema=APPROVAL,
                    metadata={"order": "1234"},
                )
            return
        if answer.action == "accept":
            self.acted_on.append((answer.continuation.metadata, answer.content))
            await TaskUpdater(event_queue, str(context.task_id), str(context.context_id)).complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await self.pauses.cancel(context, event_queue)


@dataclass
class Host:
    client: Client
    pausemesh: PauseMeshPlugin
    executors: list[RefundExecutor] = field(default_factory=list)
    http: httpx.AsyncClient | None = None

    @property
    def service(self) -> ContinuationService:
        return self.pausemesh.runtime.service

    @property
    def acted_on(self) -> list[tuple[Any, Any]]:
        return [item for executor in self.executors for item in executor.acted_on]


@asynccontextmanager
async def refund_host(tmp_path: Path, *, root_card: bool | None = None) -> AsyncIterator[Host]:
    settings = Settings(database_path=str(tmp_path / "pausemesh.db"), data_dir=str(tmp_path))
    pausemesh = PauseMeshPlugin(PauseMeshConfig(settings=settings))
    executors: list[RefundExecutor] = []

    def executor(plugin: PauseMeshPlugin) -> RefundExecutor:
        executors.append(RefundExecutor(plugin))
        return executors[-1]

    card = AgentCard(
        name="refunds",
        description="Refunds after approval",
        version="1",
        capabilities=AgentCapabilities(),
    )
    a2a = A2APlugin(executor, card, public_url=BASE, root_card=root_card)
    app = Litestar(plugins=[pausemesh, a2a])
    async with (
        LifespanManager(asgi(app)),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi(app)), base_url=BASE) as http,
    ):
        config = ClientConfig(httpx_client=http, supported_protocol_bindings=["JSONRPC"])
        client = await create_client(f"{BASE}/a2a", client_config=config)
        try:
            yield Host(client, pausemesh, executors, http)
        finally:
            await client.close()


@pytest.fixture(name="host")
async def host_fixture(tmp_path: Path) -> AsyncIterator[Host]:
    async with refund_host(tmp_path) as host:
        yield host


def continuation_id(task: Any) -> str:
    cid = continuation_id_of(task)
    assert cid is not None
    return cid


async def test_the_host_acts_on_the_answer_once_and_the_task_completes(host: Host) -> None:
    task = await send_for_task(host.client, user_message(text="refund order 1234"))
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert task.status.message.parts[0].text == "Approve the refund of 40 EUR?"
    cid = continuation_id(task)

    done = await send_for_task(host.client, user_message({"approved": True}, task_id=task.id))
    with pytest.raises(A2AError):  # the task is terminal: a duplicate never reaches the host
        await send_for_task(host.client, user_message({"approved": True}, task_id=task.id))

    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert host.acted_on == [({"a2a": {"taskId": task.id, "order": "1234"}}, {"approved": True})]
    resumed = await host.service.get(cid)
    assert resumed.status == "resumed"
    assert resumed.correlation_id == task.context_id


async def test_an_answer_outside_the_schema_never_reaches_the_host(host: Host) -> None:
    task = await send_for_task(host.client, user_message(text="refund order 1234"))

    with pytest.raises(InvalidParamsError):
        await send_for_task(host.client, user_message({"approved": "yes"}, task_id=task.id))

    still = await host.client.get_task(GetTaskRequest(id=task.id))
    assert still.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert host.acted_on == []
    assert (await host.service.get(continuation_id(task))).status == "pending"


@pytest.mark.parametrize(("text", "approved"), [("yes", True), (" No ", False), ("true", True)])
async def test_a_text_answer_to_a_yes_no_question_reaches_the_host_as_the_boolean(
    host: Host, text: str, approved: bool
) -> None:
    task = await send_for_task(host.client, user_message(text="refund order 1234"))

    done = await send_for_task(host.client, user_message(text=text, task_id=task.id))

    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert host.acted_on == [
        ({"a2a": {"taskId": task.id, "order": "1234"}}, {"approved": approved})
    ]


async def test_a_text_answer_that_is_not_yes_or_no_is_refused_naming_the_expected_answers(
    host: Host,
) -> None:
    task = await send_for_task(host.client, user_message(text="refund order 1234"))

    with pytest.raises(InvalidParamsError) as refused:
        await send_for_task(host.client, user_message(text="maybe", task_id=task.id))

    assert "yes" in str(refused.value)
    assert "no" in str(refused.value)
    assert host.acted_on == []
    assert (await host.service.get(continuation_id(task))).status == "pending"


async def test_a_pause_cancelled_elsewhere_cancels_the_task_without_the_host(host: Host) -> None:
    task = await send_for_task(host.client, user_message(text="refund order 1234"))
    await host.service.cancel(continuation_id=continuation_id(task), reason="withdrawn")

    after = await send_for_task(host.client, user_message({"approved": True}, task_id=task.id))

    assert after.status.state == TaskState.TASK_STATE_CANCELED
    assert MessageToDict(after.status.message)["parts"] == [{"text": "Cancelled."}]
    assert host.acted_on == []


async def test_an_authorization_pause_waits_for_the_out_of_band_callback(host: Host) -> None:
    task = await send_for_task(host.client, user_message(text="sign in to the bank"))
    assert task.status.state == TaskState.TASK_STATE_AUTH_REQUIRED
    cid = continuation_id(task)
    assert task.status.message.parts[0].text == (
        f"Sign in at https://bank.test/connect?state={cid}"
    )

    early = await send_for_task(host.client, user_message({"action": "retry"}, task_id=task.id))
    assert early.status.state == TaskState.TASK_STATE_AUTH_REQUIRED
    assert host.acted_on == []

    # The host's callback, after the sign-in: the only way this pause resumes.
    await host.service.resume(
        Resume(
            continuation_id=cid,
            idempotency_key="bank-callback",
            payload={"linked": True},
            by=TrustedHost(),
        )
    )
    done = await send_for_task(host.client, user_message({"action": "retry"}, task_id=task.id))

    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert host.acted_on == [({"a2a": {"taskId": task.id}}, {"linked": True})]


async def test_rejecting_an_authorization_pause_cancels_it(host: Host) -> None:
    task = await send_for_task(host.client, user_message(text="sign in to the bank"))

    done = await send_for_task(host.client, user_message({"action": "reject"}, task_id=task.id))

    assert done.status.state == TaskState.TASK_STATE_REJECTED
    cancelled = await host.service.get(continuation_id(task))
    assert (cancelled.status, cancelled.reason) == ("cancelled", "a2a:reject")
    assert host.acted_on == []


async def test_cancelling_the_task_cancels_its_pause(host: Host) -> None:
    task = await send_for_task(host.client, user_message(text="refund order 1234"))

    cancelled = await host.client.cancel_task(CancelTaskRequest(id=task.id))

    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    settled = await host.service.get(continuation_id(task))
    assert (settled.status, settled.reason) == ("cancelled", "a2a:cancelled")


@pytest.mark.parametrize("root_card", [True, None], ids=["asked-for", "host-default"])
async def test_a_host_app_serves_the_card_at_the_root_only_when_it_asks(
    tmp_path: Path, root_card: bool | None
) -> None:
    async with refund_host(tmp_path, root_card=root_card) as host:
        assert host.http is not None
        response = await host.http.get("/.well-known/agent-card.json")
        if root_card:
            card = await A2ACardResolver(host.http, BASE).get_agent_card()
            assert card.name == "refunds"
            assert card.supported_interfaces[0].url == f"{BASE}/a2a/jsonrpc"
        else:
            assert response.status_code == 404


async def test_an_authorization_pause_takes_the_control_as_plain_text(host: Host) -> None:
    task = await send_for_task(host.client, user_message(text="sign in to the bank"))

    with pytest.raises(InvalidParamsError) as refused:
        await send_for_task(host.client, user_message(text="maybe", task_id=task.id))
    early = await send_for_task(host.client, user_message(text="Retry", task_id=task.id))
    done = await send_for_task(host.client, user_message(text="reject", task_id=task.id))

    assert "retry" in str(refused.value)
    assert "reject" in str(refused.value)
    assert early.status.state == TaskState.TASK_STATE_AUTH_REQUIRED
    assert done.status.state == TaskState.TASK_STATE_REJECTED
    assert (await host.service.get(continuation_id(task))).status == "cancelled"
