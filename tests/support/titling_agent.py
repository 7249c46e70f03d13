"""An agent that names its thread (``pausemesh serve --agent tests.support.titling_agent:agent``).

The last user message decides what it does:

* ``name: TEXT``: yields ``ThreadTitle(TEXT)``, then answers;
* ``name and fail: TEXT``: yields ``ThreadTitle(TEXT)``, then ends the run with an error (a
  failed run saves nothing, so the title is not taken);
* anything else: answers without naming the thread.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

from pausemesh.agui import (
    AgentOutput,
    RunContext,
    RunErrorEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ThreadTitle,
)
from tests.support.limits_agent import last_user_text

__all__ = ("agent",)


async def agent(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    text = last_user_text(ctx)
    command, _, title = text.partition(": ")
    if command in ("name", "name and fail"):
        yield ThreadTitle(title)
    if command == "name and fail":
        yield RunErrorEvent(message="failed after naming the thread", code="TITLING_FAILED")
        return
    message_id = f"msg-{uuid.uuid4()}"
    yield TextMessageStartEvent(message_id=message_id)
    yield TextMessageContentEvent(message_id=message_id, delta="Noted.")
    yield TextMessageEndEvent(message_id=message_id)
