"""Durable pauses for MCP tools: one continuation behind both MCP eras.

A tool calls ``McpPauses.ask(ctx, ...)``:

* **2026-07-28** (multi-round-trip): the first call creates a keyed continuation and returns
  ``InputRequiredResult`` with a form elicitation and a sealed ``requestState`` referencing it.
  The retry (any replica, after any restart) decodes the state, validates the answer against
  the pause's schema and resumes the continuation exactly once; a replay of the same retry
  gets the stored outcome, a different answer after the fact is refused.
* **2025-11-25 and older** (handshake era): a live ``elicitation/create`` on the session,
  backed by the same kind of continuation, resumed or cancelled with the client's answer.

A bad answer is the protocol's ``-32602`` and the continuation stays pending; decline and
cancel cancel it. The answer a tool gets is ``McpAnswer``; it then acts (e.g. books through
the operation ledger with the continuation id as business key, so it happens once).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

import msgspec
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    ElicitCompleteNotification,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    InputRequiredResult,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from pausemesh.core.canonical import canonical_sha256
from pausemesh.core.errors import (
    ContinuationCancelledError,
    ContinuationExpiredError,
    ContinuationNotFoundError,
    IdempotencyConflictError,
    InvalidTransitionError,
    ProtocolAdapterError,
    TokenAlreadyUsedError,
)
from pausemesh.core.ids import uuid7
from pausemesh.core.model import Continuation
from pausemesh.core.service import ContinuationService
from pausemesh.mcp.elicitation import (
    McpElicitationReceipt,
    McpFormResponse,
    McpProjectionContext,
    McpProjectionPolicy,
    McpUrlBinding,
    McpUrlConsent,
    issue_mcp_elicitation,
    parse_mcp_elicit_result,
    require_form_capability,
    require_url_capability,
    to_mcp_elicitation_complete_notification,
)
from pausemesh.mcp.state import (
    decode_pause_state,
    encode_pause_state,
    invalid_request_state,
    new_pause_state,
)
from pausemesh.web.protocol_mount import principal_in_scope

__all__ = ("McpAnswer", "McpPauses", "principal_of")

_log = logging.getLogger("pausemesh.mcp")

_ANSWERED_DIFFERENTLY = "This pause was already answered with a different answer"
McpAction = Literal["accept", "decline", "cancel"]


@dataclass(frozen=True, slots=True)
class McpAnswer:
    """What the person did: ``accept`` with ``content``, or ``decline`` / ``cancel``."""

    continuation: Continuation
    action: McpAction
    content: dict[str, Any] | None = None


def principal_of(ctx: Context[Any, Any]) -> str | None:
    """The principal the /mcp mount resolved for this HTTP request (None in-process)."""
    return principal_in_scope(getattr(ctx.request_context.request, "scope", None))


def _is_modern(ctx: Context[Any, Any]) -> bool:
    version = ctx.protocol_version
    return version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS


def _capabilities(ctx: Context[Any, Any]) -> dict[str, Any]:
    declared = ctx.client_capabilities
    if declared is None:
        return {}
    dumped: dict[str, Any] = declared.model_dump(by_alias=True, exclude_none=True, mode="json")
    return dumped


def _require_form(capabilities: dict[str, Any]) -> None:
    try:
        require_form_capability(capabilities)
    except ProtocolAdapterError:
        raise MCPError(
            code=MISSING_REQUIRED_CLIENT_CAPABILITY,
            message="This tool asks the user a question: the client must support form elicitation",
            data={"requiredCapabilities": {"elicitation": {"form": {}}}},
        ) from None


def _bad_answer(error: ProtocolAdapterError) -> MCPError:
    return MCPError(
        code=INVALID_PARAMS,
        message=f"The answer does not fit the question: {error.message}",
        data={"reason": "invalid_elicitation_response", "code": error.code},
    )


def _parse_result(
    continuation: Continuation,
    request: dict[str, Any],
    receipt: McpElicitationReceipt,
    response: ElicitResult,
) -> McpFormResponse | McpUrlConsent:
    result = response.model_dump(by_alias=True, exclude_none=True, mode="json")
    try:
        return parse_mcp_elicit_result(continuation, request, receipt, result)
    except ProtocolAdapterError as error:
        raise _bad_answer(error) from None


@dataclass(frozen=True, slots=True)
class _Question:
    """One pause of a tool call: what the state binds (tool, arguments) and what is asked."""

    tool: str
    arguments: dict[str, Any]
    message: str
    schema: dict[str, Any] | None  # None: an authorization (URL mode)
    key: str
    expires_in: timedelta | None


@dataclass(frozen=True, slots=True)
class _LiveUrl:
    session: Any
    related_request_id: Any
    request: dict[str, Any]
    receipt: McpElicitationReceipt


class McpPauses:
    """Creates and settles the continuations behind MCP elicitations."""

    def __init__(
        self,
        service: Callable[[], ContinuationService],
        policy: Callable[[], McpProjectionPolicy | None] = lambda: None,
    ) -> None:
        self._service = service
        self._policy = policy
        # Live 2025-11-25 URL elicitations of this process, so the trusted callback can send
        # notifications/elicitation/complete to the client that initiated each one.
        self._live_urls: dict[str, _LiveUrl] = {}

    async def ask(
        self,
        ctx: Context[Any, Any],
        *,
        tool: str,
        arguments: Mapping[str, Any],
        message: str,
        schema: dict[str, Any],
        key: str = "answer",
        expires_in: timedelta | None = None,
    ) -> McpAnswer | InputRequiredResult:
        question = _Question(tool, dict(arguments), message, schema, key, expires_in)
        if _is_modern(ctx):
            return await self._ask_round_trip(ctx, question)
        return await self._ask_live(ctx, question)

    # -- shared -------------------------------------------------------------------------

    async def _create(self, question: _Question, principal: str | None) -> Continuation:
        service = self._service()
        expires_in = question.expires_in
        expires_at = service.clock.now() + expires_in if expires_in is not None else None
        payload: dict[str, Any] = (
            {"kind": "authorization", "message": question.message}
            if question.schema is None
            else {"kind": "input", "message": question.message, "responseSchema": question.schema}
        )
        created = await service.create(
            payload=payload,
            correlation_id=f"mcp:{uuid7()}",
            expires_at=expires_at,
            metadata={"mcp": {"tool": question.tool, "arguments": question.arguments}},
            owner=principal,
            keyed=True,
        )
        return created.continuation

    def _project(
        self, continuation: Continuation, capabilities: dict[str, Any]
    ) -> tuple[dict[str, Any], Any]:
        context = McpProjectionContext(
            client_capabilities=capabilities, request_id=continuation.continuation_id
        )
        return issue_mcp_elicitation(continuation, context)

    async def _settle(
        self,
        continuation: Continuation,
        outcome: McpFormResponse,
        principal: str | None,
    ) -> McpAnswer:
        """Resume (accept) or cancel (decline/cancel) exactly once; replays get the same."""
        service = self._service()
        cid = continuation.continuation_id
        if outcome.action != "accept":
            try:
                settled = await service.cancel(
                    continuation_id=cid, reason=f"mcp:{outcome.action}", principal=principal
                )
            except ContinuationExpiredError:
                raise invalid_request_state() from None
            except InvalidTransitionError:
                # Settled already: a resumed pause cannot be declined after the fact; a
                # cancelled one stays cancelled with its first reason.
                current = await service.get(cid, principal=principal)
                if current.status != "cancelled":
                    raise MCPError(code=INVALID_PARAMS, message=_ANSWERED_DIFFERENTLY) from None
                settled = current
            return _cancelled(settled)
        content = outcome.content if isinstance(outcome.content, dict) else {}
        try:
            settled = await service.resume_trusted(
                continuation_id=cid,
                idempotency_key="mcp:" + canonical_sha256(["mcp-answer-v1", cid, content]),
                payload=content,
                principal=principal,
                resolved_by=principal,
            )
        except (TokenAlreadyUsedError, IdempotencyConflictError):
            raise MCPError(code=INVALID_PARAMS, message=_ANSWERED_DIFFERENTLY) from None
        except ContinuationCancelledError:
            current = await service.get(cid, principal=principal)
            return _cancelled(current)
        except ContinuationExpiredError:
            raise invalid_request_state() from None
        answer = settled.resume_payload
        return McpAnswer(
            continuation=settled,
            action="accept",
            content=answer if isinstance(answer, dict) else content,
        )

    async def _retried(
        self, request_state: str, question: _Question, principal: str | None
    ) -> Continuation | McpAnswer:
        """The pause a 2026-07-28 retry's ``requestState`` names, or its answer if cancelled.

        A state that does not decode or bind, an unknown pause and an expired one are all the
        invalid-state error.
        """
        service = self._service()
        state = decode_pause_state(
            request_state,
            principal=principal,
            tool=question.tool,
            arguments=question.arguments,
            now=service.clock.now().timestamp(),
        )
        try:
            continuation = await service.get(state.continuation_id, principal=principal)
        except ContinuationNotFoundError:
            raise invalid_request_state() from None
        if continuation.status == "expired":
            raise invalid_request_state()
        if continuation.status == "cancelled":
            return _cancelled(continuation)
        return continuation

    def _input_required(
        self,
        continuation: Continuation,
        params: ElicitRequestFormParams | ElicitRequestURLParams,
        question: _Question,
        principal: str | None,
    ) -> InputRequiredResult:
        """Ask ``params`` under the question's key, with a sealed ``requestState`` naming the pause."""
        state = new_pause_state(
            continuation.continuation_id,
            principal=principal,
            tool=question.tool,
            arguments=question.arguments,
            expires_at=continuation.expires_at.timestamp(),
        )
        return InputRequiredResult(
            input_requests={question.key: ElicitRequest(params=params)},
            request_state=encode_pause_state(state),
        )

    # -- 2026-07-28: input_required + requestState ----------------------------------------

    async def _ask_round_trip(
        self, ctx: Context[Any, Any], question: _Question
    ) -> McpAnswer | InputRequiredResult:
        principal = principal_of(ctx)
        capabilities = _capabilities(ctx)
        if ctx.request_state is None:
            _require_form(capabilities)
            continuation = await self._create(question, principal)
        else:
            retried = await self._retried(ctx.request_state, question, principal)
            if isinstance(retried, McpAnswer):
                return retried
            continuation = retried
            response = (ctx.input_responses or {}).get(question.key)
            if response is not None:
                return await self._answer(continuation, response, question.key, principal)
            if continuation.status == "resumed":
                raise MCPError(code=INVALID_PARAMS, message=_ANSWERED_DIFFERENTLY)
            # Spec: a server MAY ask again rather than fail when the answer is missing.
        request, _receipt = self._project(continuation, capabilities)
        params = ElicitRequestFormParams.model_validate(request["params"])
        return self._input_required(continuation, params, question, principal)

    async def _answer(
        self, continuation: Continuation, response: object, key: str, principal: str | None
    ) -> McpAnswer:
        if not isinstance(response, ElicitResult):
            raise MCPError(
                code=INVALID_PARAMS, message=f"inputResponses[{key!r}] is not an ElicitResult"
            )
        # A replayed retry is validated like the first one; the service tells replay from conflict.
        view = msgspec.structs.replace(continuation, status="pending")
        # The receipt is recomputed from the stored continuation: the request is a pure
        # function of it, and the client never sends the request back under MRTR.
        request, receipt = self._project(view, {"elicitation": {"form": {}}})
        outcome = _parse_result(view, request, receipt, response)
        assert isinstance(outcome, McpFormResponse)  # noqa: S101 - form requests only
        return await self._settle(continuation, outcome, principal)

    # -- 2025-11-25: live elicitation/create ------------------------------------------------

    async def _ask_live(self, ctx: Context[Any, Any], question: _Question) -> McpAnswer:
        principal = principal_of(ctx)
        capabilities = _capabilities(ctx)
        _require_form(capabilities)
        continuation = await self._create(question, principal)
        request, receipt = self._project(continuation, capabilities)
        try:
            response = await ctx.session.send_request(
                ElicitRequest(params=ElicitRequestFormParams.model_validate(request["params"])),
                ElicitResult,
                metadata=ServerMessageMetadata(related_request_id=ctx.request_context.request_id),
            )
        except Exception:
            # The session is gone or the client failed: nobody can answer this pause now.
            await self._abandon(continuation, principal)
            raise
        outcome = _parse_result(continuation, request, receipt, response)
        assert isinstance(outcome, McpFormResponse)  # noqa: S101 - form requests only
        return await self._settle(continuation, outcome, principal)

    async def _abandon(self, continuation: Continuation, principal: str | None) -> None:
        try:
            await self._service().cancel(
                continuation_id=continuation.continuation_id,
                reason="mcp:elicitation_failed",
                principal=principal,
            )
        except Exception:  # noqa: BLE001 - best effort; expiry settles it otherwise
            _log.warning("could not cancel an abandoned MCP pause", exc_info=True)

    # -- authorization: URL mode only ---------------------------------------------------------

    async def authorize(
        self,
        ctx: Context[Any, Any],
        *,
        tool: str,
        arguments: Mapping[str, Any],
        message: str,
        url_for: Callable[[Continuation], str],
        key: str = "authorization",
        expires_in: timedelta | None = None,
    ) -> McpAnswer | InputRequiredResult:
        """Send the user to ``url_for(continuation)`` (URL mode) and wait for the trusted callback.

        The link must pass the static URL checks and the host's ``McpProjectionPolicy``; without
        one, URL mode fails closed. ``accept`` only means the user agreed to open the link: the
        pause completes when the host's callback calls ``complete_authorization``. Credentials
        never pass through the MCP client; ``content`` is whatever non-secret summary the
        callback recorded (e.g. ``{"connected": true}``).
        """
        question = _Question(tool, dict(arguments), message, None, key, expires_in)
        if _is_modern(ctx) and ctx.request_state is not None:
            return await self._authorization_retry(ctx, question, url_for)
        principal = principal_of(ctx)
        capabilities = _capabilities(ctx)
        try:
            require_url_capability(capabilities)
        except ProtocolAdapterError:
            raise MCPError(
                code=MISSING_REQUIRED_CLIENT_CAPABILITY,
                message="This tool needs the user to open a link: the client must support"
                " URL-mode elicitation",
                data={"requiredCapabilities": {"elicitation": {"url": {}}}},
            ) from None
        continuation = await self._create(question, principal)
        try:
            request, receipt = self._project_url(continuation, capabilities, url_for)
        except MCPError:
            await self._abandon(continuation, principal)
            raise
        if _is_modern(ctx):
            params = ElicitRequestURLParams.model_validate(request["params"])
            return self._input_required(continuation, params, question, principal)
        return await self._authorize_live(ctx, continuation, request, receipt, principal)

    def _project_url(
        self,
        continuation: Continuation,
        capabilities: dict[str, Any],
        url_for: Callable[[Continuation], str],
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

    async def _authorization_retry(
        self,
        ctx: Context[Any, Any],
        question: _Question,
        url_for: Callable[[Continuation], str],
    ) -> McpAnswer | InputRequiredResult:
        principal = principal_of(ctx)
        assert ctx.request_state is not None  # noqa: S101 - checked by the caller
        continuation = await self._retried(ctx.request_state, question, principal)
        if isinstance(continuation, McpAnswer):
            return continuation
        if continuation.status == "resumed":
            return _authorized(continuation)
        response = (ctx.input_responses or {}).get(question.key)
        capabilities = _capabilities(ctx)
        request, receipt = self._project_url(continuation, capabilities, url_for)
        if isinstance(response, ElicitResult):
            consent = _parse_result(continuation, request, receipt, response)
            if consent.action != "accept":
                return await self._settle(
                    continuation, McpFormResponse(action=consent.action), principal
                )
        # Consent without completion (or no answer yet): ask again; the link is unchanged.
        params = ElicitRequestURLParams.model_validate(request["params"])
        return self._input_required(continuation, params, question, principal)

    async def _authorize_live(
        self,
        ctx: Context[Any, Any],
        continuation: Continuation,
        request: dict[str, Any],
        receipt: McpElicitationReceipt,
        principal: str | None,
    ) -> McpAnswer:
        cid = continuation.continuation_id
        related = ctx.request_context.request_id
        self._live_urls[cid] = _LiveUrl(ctx.session, related, request, receipt)
        try:
            response = await ctx.session.send_request(
                ElicitRequest(params=ElicitRequestURLParams.model_validate(request["params"])),
                ElicitResult,
                metadata=ServerMessageMetadata(related_request_id=related),
            )
            try:
                consent = _parse_result(continuation, request, receipt, response)
            except MCPError:
                await self._abandon(continuation, principal)
                raise
            assert isinstance(consent, McpUrlConsent)  # noqa: S101 - URL requests only
            if consent.action != "accept":
                return await self._settle(
                    continuation, McpFormResponse(action=consent.action), principal
                )
            return await self._wait_for_callback(continuation, principal)
        finally:
            self._live_urls.pop(cid, None)

    async def _wait_for_callback(
        self, continuation: Continuation, principal: str | None
    ) -> McpAnswer:
        """Hold the live call until the trusted callback settles the pause (or it expires)."""
        service = self._service()
        while True:
            current = await service.get(continuation.continuation_id, principal=principal)
            if current.status == "resumed":
                return _authorized(current)
            if current.status == "cancelled":
                return _cancelled(current)
            if current.status == "expired":
                return McpAnswer(continuation=current, action="cancel")
            await asyncio.sleep(_CALLBACK_POLL_SECONDS)

    async def complete_authorization(
        self, continuation_id: str, *, result: dict[str, Any], principal: str | None
    ) -> Continuation:
        """For the host's trusted out-of-band callback: resume the pause exactly once.

        ``principal`` must be the user who opened the link (the callback verifies its own
        session); another principal is told the pause does not exist. ``result`` is a
        non-secret summary, never a credential. A live 2025-11-25 client is then sent
        ``notifications/elicitation/complete``.
        """
        service = self._service()
        current = await service.get(continuation_id, principal=principal)
        payload = current.payload if isinstance(current.payload, dict) else {}
        if payload.get("kind") != "authorization":
            raise MCPError(code=INVALID_PARAMS, message="Not an authorization pause")
        resumed = await service.resume_trusted(
            continuation_id=continuation_id,
            idempotency_key="mcp-authorization:" + continuation_id,
            payload=result,
            principal=principal,
            resolved_by=principal,
        )
        live = self._live_urls.get(continuation_id)
        if live is not None:
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
        return resumed


_CALLBACK_POLL_SECONDS = 0.2


def _cancelled(continuation: Continuation) -> McpAnswer:
    """A cancelled pause's answer: ``decline`` if the person declined, else ``cancel``."""
    action: McpAction = "decline" if continuation.reason == "mcp:decline" else "cancel"
    return McpAnswer(continuation=continuation, action=action)


def _authorized(continuation: Continuation) -> McpAnswer:
    summary = continuation.resume_payload
    return McpAnswer(
        continuation=continuation,
        action="accept",
        content=summary if isinstance(summary, dict) else {},
    )
