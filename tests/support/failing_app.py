"""A standalone PauseMesh app whose agent misbehaves on request, for real-server tests.

Run it with ``python -m uvicorn tests.support.failing_app:app`` (settings from ``PAUSEMESH_*``).
The last user message decides what the agent does:

* ``fail``: raises an exception whose text must never reach the client;
* ``hang``: never finishes (the run timeout ends it);
* anything else: says hello.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator

from pausemesh import Settings, create_app
from pausemesh.agui import (
    AgentOutput,
    RunContext,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    UserMessage,
)

__all__ = ("SECRET", "app", "misbehaving_agent")

SECRET = "db password is hunter2 at /srv/secret.conf"
"""What the failing agent's exception says; a client must never see it."""


def _last_user_text(ctx: RunContext) -> str:
    for message in reversed(ctx.messages):
        if isinstance(message, UserMessage) and isinstance(message.content, str):
            return message.content
    return ""


async def misbehaving_agent(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    text = _last_user_text(ctx)
    message_id = f"msg-{uuid.uuid4()}"
    yield TextMessageStartEvent(message_id=message_id, role="assistant")
    yield TextMessageContentEvent(message_id=message_id, delta="Working on it.")
    if text == "fail":
        raise RuntimeError(SECRET)
    if text == "hang":
        await asyncio.Event().wait()
    yield TextMessageEndEvent(message_id=message_id)


# A plain app has no logging of its own (create_app leaves it to the process).
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
app = create_app(Settings.load(env_file=None), agent=misbehaving_agent)
