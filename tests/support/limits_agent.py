"""An agent for the limits and shutdown tests (``pausemesh serve --agent tests.support.limits_agent:agent``).

The last user message decides what it does:

* ``slow N``: says it is working, waits N seconds, then finishes;
* ``flood``: sends 16 KiB text deltas until the run ends (a reader that stops reading is
  left behind by its writes);
* ``ask``: pauses with one question; the run that answers it says how it was decided;
* anything else: says hello.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

from pausemesh.agui import (
    AgentOutput,
    PauseRequest,
    RunContext,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    UserMessage,
)

__all__ = ("agent", "last_user_text")

_CHUNK = "x" * 16_384


def last_user_text(ctx: RunContext) -> str:
    """The text of the run's last user message (empty when there is none)."""
    for message in reversed(ctx.messages):
        if isinstance(message, UserMessage) and isinstance(message.content, str):
            return message.content
    return ""


async def agent(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    text = last_user_text(ctx)
    if text == "ask" and not ctx.decisions:
        yield PauseRequest(message="Go on?")
        return
    message_id = f"msg-{uuid.uuid4()}"
    yield TextMessageStartEvent(message_id=message_id, role="assistant")
    for decision in ctx.decisions.values():
        yield TextMessageContentEvent(message_id=message_id, delta=f"{decision.status}. ")
    if text.startswith("slow "):
        yield TextMessageContentEvent(message_id=message_id, delta="Working on it.")
        await asyncio.sleep(float(text.removeprefix("slow ")))
    elif text == "flood":
        while True:
            yield TextMessageContentEvent(message_id=message_id, delta=_CHUNK)
            await asyncio.sleep(0)
    yield TextMessageContentEvent(message_id=message_id, delta="Hello.")
    yield TextMessageEndEvent(message_id=message_id)
