"""An agent that asks a manager, for the four-eyes tests against a real server process.

On a user message it asks ``Approver.role("manager")`` to approve "<the message>"; a message
that starts with ``allow-requester`` sets ``allow_requester=True`` (the asker may decide it if
it is a manager). When the decision comes back it puts it, and who made it, in the state.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from pausemesh.agui import (
    AgentOutput,
    Approver,
    PauseRequest,
    RunContext,
    StateSnapshotEvent,
    UserMessage,
)

__all__ = ("ALLOW_REQUESTER", "ask_a_manager")

ALLOW_REQUESTER = "allow-requester"
_SCHEMA = {
    "type": "object",
    "properties": {"decision": {"enum": ["approve", "reject"]}},
    "required": ["decision"],
}


def _last_user_text(ctx: RunContext) -> str:
    for message in reversed(ctx.messages):
        if isinstance(message, UserMessage) and isinstance(message.content, str):
            return message.content
    return ""


async def ask_a_manager(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    for decision in ctx.decisions.values():
        answer = decision.payload if decision.status == "resolved" else None
        yield StateSnapshotEvent(snapshot={"decision": answer, "resolvedBy": decision.resolved_by})
        return
    text = _last_user_text(ctx)
    yield PauseRequest(
        message=f"Approve: {text}?",
        reason="approval_required",
        response_schema=_SCHEMA,
        approvers=(Approver.role("manager"),),
        allow_requester=text.startswith(ALLOW_REQUESTER),
    )
