"""An agent for the double-texting tests (``pausemesh serve --agent
tests.support.texting_agent:agent``), driven by the last user message:

* ``hold NAME``: says "holding NAME.", then waits until the file ``NAME`` exists in the
  directory ``TEXTING_AGENT_GATES`` names (the test opens the gate), says " released NAME.";
  ``hold NAME then ask`` then pauses with a question;
* ``ask``: pauses with one question; the run that answers it says "answered ask";
  ``ask then hold NAME``: the run that answers it holds NAME first;
* anything else: "echo " and the text.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

from pausemesh.agui import (
    AgentOutput,
    PauseRequest,
    RunContext,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from tests.support.limits_agent import last_user_text

__all__ = ("agent",)

_POLL_SECONDS = 0.05
_THEN_HOLD = " then hold "
_THEN_ASK = " then ask"


async def _hold(message_id: str, name: str) -> AsyncIterator[AgentOutput]:
    yield TextMessageContentEvent(message_id=message_id, delta=f"holding {name}.")
    gate = Path(os.environ["TEXTING_AGENT_GATES"]) / name
    # The agent's own slow work, which the test ends (a file another process creates).
    while not gate.exists():  # noqa: ASYNC110
        await asyncio.sleep(_POLL_SECONDS)
    yield TextMessageContentEvent(message_id=message_id, delta=f" released {name}.")


async def agent(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    text = last_user_text(ctx)
    if text.startswith("ask") and not ctx.decisions:
        yield PauseRequest(message="Go on?")
        return
    message_id = f"msg-{uuid.uuid4()}"
    yield TextMessageStartEvent(message_id=message_id, role="assistant")
    if ctx.decisions:
        if _THEN_HOLD in text:
            async for output in _hold(message_id, text.split(_THEN_HOLD, 1)[1]):
                yield output
        yield TextMessageContentEvent(message_id=message_id, delta="answered ask")
    elif text.startswith("hold "):
        async for output in _hold(message_id, text.removeprefix("hold ").removesuffix(_THEN_ASK)):
            yield output
        if text.endswith(_THEN_ASK):
            yield TextMessageEndEvent(message_id=message_id)
            yield PauseRequest(message="Go on?")
            return
    else:
        yield TextMessageContentEvent(message_id=message_id, delta=f"echo {text}")
    yield TextMessageEndEvent(message_id=message_id)
