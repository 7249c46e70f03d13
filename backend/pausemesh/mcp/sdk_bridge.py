"""The bridge between the ``mcp`` SDK's tool context and the continuation service.

What both kinds of MCP pause share (form questions in ``mcp.form_pauses``, URL authorization
in ``mcp.url_authorization``): reading the SDK ``Context`` (principal, protocol era, client
capabilities), creating the keyed continuation behind a pause, settling it exactly once,
decoding a 2026-07-28 retry's ``requestState`` back to its pause, and turning our refusals
into the protocol's ``MCPError``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final, Literal

from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
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
from pausemesh.core.principal_handoff import principal_in_scope, roles_in_scope
from pausemesh.core.resume import Resume, TrustedHost
from pausemesh.core.service import ContinuationService
from pausemesh.mcp.elicitation import (
    MCP_CORRELATION_PREFIX,
    McpElicitationReceipt,
    McpFormResponse,
    McpProjectionContext,
    McpUrlConsent,
    issue_mcp_elicitation,
    parse_mcp_elicit_result,
    require_form_capability,
)
from pausemesh.mcp.state import (
    decode_pause_state,
    encode_pause_state,
    invalid_request_state,
    new_pause_state,
)

__all__ = (
    "ANSWERED_DIFFERENTLY",
    "McpAction",
    "McpAnswer",
    "PauseBridge",
    "Question",
    "authorized",
    "cancelled",
    "client_capabilities",
    "is_modern",
    "parse_result",
    "principal_of",
    "require_form",
)

_log = logging.getLogger("pausemesh.mcp")

ANSWERED_DIFFERENTLY: Final = "This pause was already answered with a different answer"
McpAction = Literal["accept", "decline", "cancel"]


@dataclass(frozen=True, slots=True)
class McpAnswer:
    """What the person did: ``accept`` with ``content``, or ``decline`` / ``cancel``."""

    continuation: Continuation
    action: McpAction
    content: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Question:
    """One pause of a tool call: what the state binds (tool, arguments) and what is asked."""

    tool: str
    arguments: dict[str, Any]
    message: str
    schema: dict[str, Any] | None  # None: an authorization (URL mode)
    key: str
    expires_in: timedelta | None


def principal_of(ctx: Context[Any, Any]) -> str | None:
    """The principal the /mcp mount resolved for this HTTP request (None in-process)."""
    return principal_in_scope(getattr(ctx.request_context.request, "scope", None))


def roles_of(ctx: Context[Any, Any]) -> frozenset[str]:
    """The roles the /mcp mount resolved for this HTTP request (empty in-process)."""
    return roles_in_scope(getattr(ctx.request_context.request, "scope", None))


def is_modern(ctx: Context[Any, Any]) -> bool:
    """True for a 2026-07-28 (multi-round-trip) client, False for the handshake eras."""
    version = ctx.protocol_version
    return version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS


def client_capabilities(ctx: Context[Any, Any]) -> dict[str, Any]:
    declared = ctx.client_capabilities
    if declared is None:
        return {}
    dumped: dict[str, Any] = declared.model_dump(by_alias=True, exclude_none=True, mode="json")
    return dumped


def require_form(capabilities: dict[str, Any]) -> None:
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


def parse_result(
    continuation: Continuation,
    request: dict[str, Any],
    receipt: McpElicitationReceipt,
    response: ElicitResult,
) -> McpFormResponse | McpUrlConsent:
    """The client's answer, checked against the request; a bad one is ``-32602``."""
    result = response.model_dump(by_alias=True, exclude_none=True, mode="json")
    try:
        return parse_mcp_elicit_result(continuation, request, receipt, result)
    except ProtocolAdapterError as error:
        raise _bad_answer(error) from None


def cancelled(continuation: Continuation) -> McpAnswer:
    """A cancelled pause's answer: ``decline`` if the person declined, else ``cancel``."""
    action: McpAction = "decline" if continuation.reason == "mcp:decline" else "cancel"
    return McpAnswer(continuation=continuation, action=action)


def authorized(continuation: Continuation) -> McpAnswer:
    summary = continuation.resume_payload
    return McpAnswer(
        continuation=continuation,
        action="accept",
        content=summary if isinstance(summary, dict) else {},
    )


class PauseBridge:
    """The continuation behind each MCP pause: created, re-found from a retry, settled once."""

    def __init__(self, service: Callable[[], ContinuationService]) -> None:
        self._service = service

    @property
    def service(self) -> ContinuationService:
        return self._service()

    @staticmethod
    def payload_of(question: Question) -> dict[str, Any]:
        """The pause payload ``question`` opens (what a joined pause must still ask)."""
        if question.schema is None:
            return {"kind": "authorization", "message": question.message}
        return {"kind": "input", "message": question.message, "responseSchema": question.schema}

    async def create(self, question: Question, principal: str | None) -> Continuation:
        service = self._service()
        expires_in = question.expires_in
        expires_at = service.deadline_in(expires_in) if expires_in is not None else None
        created = await service.create(
            payload=self.payload_of(question),
            correlation_id=f"{MCP_CORRELATION_PREFIX}{uuid7()}",
            expires_at=expires_at,
            metadata={"mcp": {"tool": question.tool, "arguments": question.arguments}},
            owner=principal,
            keyed=True,
        )
        return created.continuation

    @staticmethod
    def project(
        continuation: Continuation, capabilities: dict[str, Any]
    ) -> tuple[dict[str, Any], McpElicitationReceipt]:
        context = McpProjectionContext(
            client_capabilities=capabilities, request_id=continuation.continuation_id
        )
        return issue_mcp_elicitation(continuation, context)

    async def settle(
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
                    raise MCPError(code=INVALID_PARAMS, message=ANSWERED_DIFFERENTLY) from None
                settled = current
            return cancelled(settled)
        content = outcome.content if isinstance(outcome.content, dict) else {}
        command = Resume(
            continuation_id=cid,
            idempotency_key="mcp:" + canonical_sha256(["mcp-answer-v1", cid, content]),
            payload=content,
            by=TrustedHost(principal),
        )
        try:
            settled = (await service.resume(command)).continuation
        except (TokenAlreadyUsedError, IdempotencyConflictError):
            raise MCPError(code=INVALID_PARAMS, message=ANSWERED_DIFFERENTLY) from None
        except ContinuationCancelledError:
            current = await service.get(cid, principal=principal)
            return cancelled(current)
        except ContinuationExpiredError:
            raise invalid_request_state() from None
        answer = settled.resume_payload
        return McpAnswer(
            continuation=settled,
            action="accept",
            content=answer if isinstance(answer, dict) else content,
        )

    async def retried(
        self, request_state: str, question: Question, principal: str | None
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
            return cancelled(continuation)
        return continuation

    @staticmethod
    def input_required(
        continuation: Continuation,
        params: ElicitRequestFormParams | ElicitRequestURLParams,
        question: Question,
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

    async def abandon(self, continuation: Continuation, principal: str | None) -> None:
        try:
            await self._service().cancel(
                continuation_id=continuation.continuation_id,
                reason="mcp:elicitation_failed",
                principal=principal,
            )
        except Exception:  # noqa: BLE001 - best effort; expiry settles it otherwise
            _log.warning("could not cancel an abandoned MCP pause", exc_info=True)
