"""An agent that asks two questions at once (``pausemesh serve --agent
tests.support.cohort_agent:agent``), for ``pausemesh conformance agui``'s partial-cohort probe.

On a user message it says so and pauses twice in one run (one cohort): which seat (a form
with a string ``enum``) and whether to add a meal (no schema). The run that answers both says
what it was told, one line per decision.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator

from pausemesh.agui import (
    AgentOutput,
    PauseRequest,
    RunContext,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)

__all__ = ("agent",)

SEAT = {
    "type": "object",
    "properties": {"seat": {"type": "string", "enum": ["aisle", "window"]}},
    "required": ["seat"],
}


def _say(text: str) -> list[AgentOutput]:
    message_id = f"m-{uuid.uuid4()}"
    return [
        TextMessageStartEvent(message_id=message_id),
        TextMessageContentEvent(message_id=message_id, delta=text),
        TextMessageEndEvent(message_id=message_id),
    ]


async def agent(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    if ctx.decisions:
        told = [f"{d.status} {json.dumps(d.payload)}" for d in ctx.decisions.values()]
        for output in _say("; ".join(told)):
            yield output
        return
    for output in _say("Two questions."):
        yield output
    yield PauseRequest(message="Which seat?", reason="input_required", response_schema=SEAT)
    yield PauseRequest(message="Add a meal?", reason="confirmation")
