"""A booking agent that asks a manager, with a default outcome
(``pausemesh serve --agent tests.support.approval_agent:agent``).

The user's message sets the pause's deadline in seconds (``expires N``, default 600), its
reminder (``remind N``), an escalation to the principal ``carol`` (``escalate N``) and its
``on_expiry`` (``deny`` unless the message says ``cancel``); tagged ``travel``. On the next run
it says what the decision was and who made it: "The manager did not answer in time; the
booking was not made." when the pause's default outcome decided it.
"""

from __future__ import annotations

import itertools
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
    seconds = _after(words, "expires") or 600.0
    escalate = _after(words, "escalate")
    yield PauseRequest(
        message="Approve the booking of PM404 (EUR 890)?",
        response_schema=SCHEMA,
        approvers=(Approver.role("manager"),),
        expires_in=seconds,
        on_expiry="cancel" if "cancel" in words else "deny",
        tags=("travel",),
        remind_after=_after(words, "remind"),
        escalate_after=escalate,
        escalate_to=(Approver.principal("carol"),) if escalate else (),
    )


def _after(words: list[str], name: str) -> float | None:
    """The number after ``name`` in the message ("expires 2 remind 1"), if any."""
    for word, value in itertools.pairwise(words):
        if word.strip(",") == name:
            return float(value.strip(","))
    return None
