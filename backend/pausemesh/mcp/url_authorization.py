"""URL authorization: a tool sends the person to a link (MCP URL-mode elicitation) and waits.

The link must pass the static URL checks and the host's ``McpProjectionPolicy``; without one,
URL mode fails closed. ``accept`` only means the person agreed to open the link: the pause
completes when the host's trusted out-of-band callback calls ``complete``. A 2026-07-28 client
is asked again until then; a live 2025-11-25 call is held until the callback (or expiry) and
its client is sent ``notifications/elicitation/complete`` before the call's result. Credentials
never pass through the MCP client.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    ElicitCompleteNotification,
    ElicitRequest,
    ElicitRequestURLParams,
    ElicitResult,
    InputRequiredResult,
)

from pausemesh.core.errors import ProtocolAdapterError
from pausemesh.core.model import Continuation
from pausemesh.core.resume import Resume, TrustedHost
from pausemesh.mcp.elicitation import (
    McpElicitationReceipt,
    McpFormResponse,
    McpProjectionContext,
    McpProjectionPolicy,
    McpUrlBinding,
    McpUrlConsent,
    issue_mcp_elicitation,
    require_url_capability,
    to_mcp_elicitation_complete_notification,
)
from pausemesh.mcp.sdk_bridge import (
    McpAnswer,
    PauseBridge,
    Question,
    authorized,
    cancelled,
    client_capabilities,
    is_modern,
    parse_result,
    principal_of,
)

__all__ = ("UrlAuthorizations",)

_log = logging.getLogger("pausemesh.mcp")

_CALLBACK_POLL_SECONDS: Final = 0.2
# How long a held call that saw the callback's resume waits for that callback's
# notifications/elicitation/complete to go out: delivery is best effort, the result is not.
_NOTIFY_WAIT_SECONDS: Final = 10.0

UrlFor = Callable[[Continuation], str]


@dataclass(frozen=True, slots=True)
class _LiveUrl:
    session: Any
    related_request_id: Any
    request: dict[str, Any]
    receipt: McpElicitationReceipt
    # The result ends the call's response stream, so the callback's notification must go out
    # first: ``complete`` sets ``completing`` before it resumes and ``notified`` once the
    # notification was sent (or failed), and the held call waits for the latter.
    completing: asyncio.Event = field(default_factory=asyncio.Event)
    notified: asyncio.Event = field(default_factory=asyncio.Event)


class UrlAuthorizations:
    """``McpPauses.authorize`` and ``McpPauses.complete_authorization``."""

    def __init__(
        self, bridge: PauseBridge, policy: Callable[[], McpProjectionPolicy | None]
    ) -> None:
        self._bridge = bridge
        self._policy = policy
        # Live 2025-11-25 URL elicitations of this process, so the trusted callback can send
        # notifications/elicitation/complete to the client that initiated each one.
        self._live_urls: dict[str, _LiveUrl] = {}

    async def authorize(
        self, ctx: Context[Any, Any], question: Question, url_for: UrlFor
    ) -> McpAnswer | InputRequiredResult:
        if is_modern(ctx) and ctx.request_state is not None:
            return await self._retry(ctx, question, url_for)
        bridge = self._bridge
        principal = principal_of(ctx)
        capabilities = client_capabilities(ctx)
        try:
            require_url_capability(capabilities)
        except ProtocolAdapterError:
            raise MCPError(
                code=MISSING_REQUIRED_CLIENT_CAPABILITY,
                message="This tool needs the user to open a link: the client must support"
                " URL-mode elicitation",
                data={"requiredCapabilities": {"elicitation": {"url": {}}}},
            ) from None
        continuation = await bridge.create(question, principal)
        try:
            request, receipt = self._project(continuation, capabilities, url_for)
        except MCPError:
            await bridge.abandon(continuation, principal)
            raise
        if is_modern(ctx):
            params = ElicitRequestURLParams.model_validate(request["params"])
            return bridge.input_required(continuation, params, question, principal)
        return await self._live(ctx, continuation, request, receipt, principal)

    def _project(
        self, continuation: Continuation, capabilities: dict[str, Any], url_for: UrlFor
    ) -> tuple[dict[str, Any], McpElicitationReceipt]:
        context = McpProjectionContext(
            client_capabilities=capabilities,
            request_id=continuation.continuation_id,
            url_binding=McpUrlBinding(
                elicitation_id=continuation.continuation_id, url=url_for(continuation)
            ),
        )
        try:
            return issue_mcp_elicitation(continuation, context, self._policy())
        except ProtocolAdapterError as error:
            # A link the host policy does not vouch for is a server-side refusal.
            _log.warning("MCP URL elicitation refused: %s", error.message)
            raise MCPError(
                code=INVALID_REQUEST,
                message="This server cannot send the authorization link (URL policy)",
                data={"code": error.code},
            ) from None

    # -- 2026-07-28: ask again until the callback settled the pause -------------------------

    async def _retry(
        self, ctx: Context[Any, Any], question: Question, url_for: UrlFor
    ) -> McpAnswer | InputRequiredResult:
        bridge = self._bridge
        principal = principal_of(ctx)
        assert ctx.request_state is not None  # noqa: S101 - checked by the caller
        continuation = await bridge.retried(ctx.request_state, question, principal)
        if isinstance(continuation, McpAnswer):
            return continuation
        if continuation.status == "resumed":
            return authorized(continuation)
        response = (ctx.input_responses or {}).get(question.key)
        capabilities = client_capabilities(ctx)
        request, receipt = self._project(continuation, capabilities, url_for)
        if isinstance(response, ElicitResult):
            consent = parse_result(continuation, request, receipt, response)
            if consent.action != "accept":
                return await bridge.settle(
                    continuation, McpFormResponse(action=consent.action), principal
                )
        # Consent without completion (or no answer yet): ask again; the link is unchanged.
        params = ElicitRequestURLParams.model_validate(request["params"])
        return bridge.input_required(continuation, params, question, principal)

    # -- 2025-11-25: a live URL elicitation held until the callback -------------------------

    async def _live(
        self,
        ctx: Context[Any, Any],
        continuation: Continuation,
        request: dict[str, Any],
        receipt: McpElicitationReceipt,
        principal: str | None,
    ) -> McpAnswer:
        bridge = self._bridge
        cid = continuation.continuation_id
        related = ctx.request_context.request_id
        live = self._live_urls[cid] = _LiveUrl(ctx.session, related, request, receipt)
        try:
            response = await ctx.session.send_request(
                ElicitRequest(params=ElicitRequestURLParams.model_validate(request["params"])),
                ElicitResult,
                metadata=ServerMessageMetadata(related_request_id=related),
            )
            try:
                consent = parse_result(continuation, request, receipt, response)
            except MCPError:
                await bridge.abandon(continuation, principal)
                raise
            assert isinstance(consent, McpUrlConsent)  # noqa: S101 - URL requests only
            if consent.action != "accept":
                return await bridge.settle(
                    continuation, McpFormResponse(action=consent.action), principal
                )
            return await self._wait_for_callback(continuation, principal, live)
        finally:
            self._live_urls.pop(cid, None)

    async def _wait_for_callback(
        self, continuation: Continuation, principal: str | None, live: _LiveUrl
    ) -> McpAnswer:
        """Hold the live call until the trusted callback settles the pause (or it expires)."""
        service = self._bridge.service
        while True:
            current = await service.get(continuation.continuation_id, principal=principal)
            if current.status == "resumed":
                # Only a callback handled in this process sets ``completing``: a resume from
                # another replica or path has no notification here to wait for.
                if live.completing.is_set():
                    try:
                        await asyncio.wait_for(live.notified.wait(), _NOTIFY_WAIT_SECONDS)
                    except TimeoutError:
                        _log.info("notifications/elicitation/complete still unsent: answering")
                return authorized(current)
            if current.status == "cancelled":
                return cancelled(current)
            if current.status == "expired":
                return McpAnswer(continuation=current, action="cancel")
            await asyncio.sleep(_CALLBACK_POLL_SECONDS)

    # -- the host's trusted callback ----------------------------------------------------------

    async def complete(
        self, continuation_id: str, *, result: dict[str, Any], principal: str | None
    ) -> Continuation:
        service = self._bridge.service
        current = await service.get(continuation_id, principal=principal)
        payload = current.payload if isinstance(current.payload, dict) else {}
        if payload.get("kind") != "authorization":
            raise MCPError(code=INVALID_PARAMS, message="Not an authorization pause")
        command = Resume(
            continuation_id=continuation_id,
            idempotency_key="mcp-authorization:" + continuation_id,
            payload=result,
            by=TrustedHost(principal),
        )
        live = self._live_urls.get(continuation_id)
        if live is None:
            return (await service.resume(command)).continuation
        # Set before the resume, so the held call cannot see "resumed" without also seeing
        # that a notification is on its way; ``notified`` is set whatever happens below.
        live.completing.set()
        try:
            resumed = (await service.resume(command)).continuation
            notification = to_mcp_elicitation_complete_notification(
                resumed, live.request, live.receipt
            )
            try:
                await live.session.send_notification(
                    ElicitCompleteNotification.model_validate(notification),
                    live.related_request_id,
                )
            except Exception:  # noqa: BLE001 - delivery is best effort (MCP: not guaranteed)
                _log.info("could not deliver notifications/elicitation/complete", exc_info=True)
        finally:
            live.notified.set()
        return resumed
