"""Form pauses: a tool asks the person a question (MCP form-mode elicitation), in both eras.

* **2026-07-28**: the first call creates the continuation and returns ``InputRequiredResult``
  with the form and a sealed ``requestState``; the retry carries the answer, which is checked
  against the pause's schema and resumes the continuation exactly once.
* **2025-11-25 and older**: a live ``elicitation/create`` on the session, backed by the same
  kind of continuation and settled with the client's answer. The question is also the tool
  call's open pause (``mcp.pause_slots``): if the session ends unanswered, a later call of the
  same tool with the same arguments (either era) joins it instead of asking anew.
"""

from __future__ import annotations

from typing import Any

import msgspec
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import (
    CONNECTION_CLOSED,
    INVALID_PARAMS,
    REQUEST_TIMEOUT,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
)

from pausemesh.core.model import Continuation
from pausemesh.mcp.elicitation import McpFormResponse
from pausemesh.mcp.pause_slots import PauseSlots
from pausemesh.mcp.sdk_bridge import (
    ANSWERED_DIFFERENTLY,
    McpAnswer,
    PauseBridge,
    Question,
    client_capabilities,
    is_modern,
    parse_result,
    principal_of,
    require_form,
)

__all__ = ("FormPauses",)


def _session_lost(error: Exception) -> bool:
    """The elicitation got no answer because the connection went, not because of the client."""
    if isinstance(error, MCPError):
        return error.error.code in (CONNECTION_CLOSED, REQUEST_TIMEOUT)
    return True


class FormPauses:
    """``McpPauses.ask``: one question, one continuation, one settlement."""

    def __init__(self, bridge: PauseBridge, slots: PauseSlots) -> None:
        self._bridge = bridge
        self._slots = slots

    async def ask(
        self, ctx: Context[Any, Any], question: Question
    ) -> McpAnswer | InputRequiredResult:
        if is_modern(ctx):
            return await self._ask_round_trip(ctx, question)
        return await self._ask_live(ctx, question)

    # -- 2026-07-28: input_required + requestState ----------------------------------------

    async def _ask_round_trip(
        self, ctx: Context[Any, Any], question: Question
    ) -> McpAnswer | InputRequiredResult:
        bridge = self._bridge
        principal = principal_of(ctx)
        capabilities = client_capabilities(ctx)
        if ctx.request_state is None:
            require_form(capabilities)
            payload = bridge.payload_of(question)
            joined = await self._slots.pending(question, principal, payload)
            continuation = joined or await bridge.create(question, principal)
        else:
            retried = await bridge.retried(ctx.request_state, question, principal)
            if isinstance(retried, McpAnswer):
                return retried
            continuation = retried
            response = (ctx.input_responses or {}).get(question.key)
            if response is not None:
                return await self._answer(continuation, response, question.key, principal)
            if continuation.status == "resumed":
                raise MCPError(code=INVALID_PARAMS, message=ANSWERED_DIFFERENTLY)
            # Spec: a server MAY ask again rather than fail when the answer is missing.
        request, _receipt = bridge.project(continuation, capabilities)
        params = ElicitRequestFormParams.model_validate(request["params"])
        return bridge.input_required(continuation, params, question, principal)

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
        request, receipt = self._bridge.project(view, {"elicitation": {"form": {}}})
        outcome = parse_result(view, request, receipt, response)
        assert isinstance(outcome, McpFormResponse)  # noqa: S101 - form requests only
        return await self._bridge.settle(continuation, outcome, principal)

    # -- 2025-11-25: live elicitation/create ------------------------------------------------

    async def _ask_live(self, ctx: Context[Any, Any], question: Question) -> McpAnswer:
        bridge = self._bridge
        principal = principal_of(ctx)
        capabilities = client_capabilities(ctx)
        require_form(capabilities)
        continuation = await self._slots.open(
            question,
            principal,
            bridge.payload_of(question),
            lambda: bridge.create(question, principal),
        )
        request, receipt = bridge.project(continuation, capabilities)
        try:
            response = await ctx.session.send_request(
                ElicitRequest(params=ElicitRequestFormParams.model_validate(request["params"])),
                ElicitResult,
                metadata=ServerMessageMetadata(related_request_id=ctx.request_context.request_id),
            )
        except Exception as error:
            # The client failed to answer: the pause ends. The session went away: with slots
            # the pause stays pending for a later call to join; without, nobody can answer it.
            if not (self._slots.enabled and _session_lost(error)):
                await bridge.abandon(continuation, principal)
            raise
        outcome = parse_result(continuation, request, receipt, response)
        assert isinstance(outcome, McpFormResponse)  # noqa: S101 - form requests only
        return await bridge.settle(continuation, outcome, principal)
