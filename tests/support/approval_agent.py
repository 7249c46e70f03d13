"""A booking agent that asks a manager, with a default outcome
(``pausemesh serve --agent tests.support.approval_agent:agent``).

The user's message sets the pause's deadline in seconds (``expires_in``, default 600) and its
``on_expiry`` (``deny`` unless the message says ``cancel``); tagged ``travel``. On the next run
it says what the decision was and who made it: "The manager did not answer in time; the
booking was not made." when the pause's default outcome decided it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

from pausemesh.agui import (
    AgentOutput,
    Approver,
    PauseRequest,
    RunContext,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from tests.support.limits_agent import last_user_text

__all__ = ("SCHEMA", "agent")

SCHEMA = {
    "type": "object",
    "properties": {
        "decision": {
            "type": "string",
            "enum": ["approve", "reject"],
            "enumNames": ["Approve", "Reject"],
        }
    },
    "required": ["decision"],
}


async def agent(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    if ctx.decisions:
        [decision] = ctx.decisions.values()
        if decision.resolved_by == "expiry":
            text = "The manager did not answer in time; the booking was not made."
        elif decision.status == "cancelled":
            text = "The request was withdrawn; the booking was not made."
        else:
            answer = (
                decision.payload.get("decision") if isinstance(decision.payload, dict) else None
            )
            text = f"{decision.resolved_by} said {answer}."
        message_id = f"msg-{uuid.uuid4()}"
        yield TextMessageStartEvent(message_id=message_id)
        yield TextMessageContentEvent(message_id=message_id, delta=text)
        yield TextMessageEndEvent(message_id=message_id)
        return
    words = last_user_text(ctx).split()
    seconds = next((float(w) for w in words if w.replace(".", "", 1).isdigit()), 600.0)
    yield PauseRequest(
        message="Approve the booking of PM404 (EUR 890)?",
        response_schema=SCHEMA,
        approvers=(Approver.role("manager"),),
        expires_in=seconds,
        on_expiry="cancel" if "cancel" in words else "deny",
        tags=("travel",),
    )
