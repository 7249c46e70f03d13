"""A Starlette app with PauseMesh's AG-UI endpoints as its own routes, streamed with sse-starlette.

Run it::

    uvicorn examples.starlette_native:app

No Litestar app is mounted: ``StarletteAgui`` gives native Starlette ``Route``s over the same
run host, and ``sse-starlette`` streams them (disconnects, send timeouts, shutdown).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from pausemesh import Settings, StarletteAgui
from pausemesh.agui import (
    AgentOutput,
    PauseRequest,
    RunContext,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)

__all__ = ("app", "create_host_app", "meeting_agent")

SLOT = {
    "type": "object",
    "properties": {"slot": {"type": "string", "enum": ["Mon 10:00", "Tue 14:00"]}},
    "required": ["slot"],
}


def say(text: str) -> list[AgentOutput]:
    message_id = f"msg-{uuid.uuid4()}"
    return [
        TextMessageStartEvent(message_id=message_id, role="assistant"),
        TextMessageContentEvent(message_id=message_id, delta=text),
        TextMessageEndEvent(message_id=message_id),
    ]


async def meeting_agent(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """Asks for a meeting slot, then confirms it (on the next run)."""
    for decision in ctx.decisions.values():
        payload = decision.payload if isinstance(decision.payload, dict) else {}
        text = f"Meeting set for {payload['slot']}." if payload else "No meeting, then."
        for event in say(text):
            yield event
        return
    yield PauseRequest(message="Which slot suits you?", response_schema=SLOT)


async def index(_: Request) -> JSONResponse:
    return JSONResponse({"service": "calendar", "agent": "/agui"})


def create_host_app(settings: Settings) -> Starlette:
    pausemesh = StarletteAgui(settings, agent=meeting_agent)
    return Starlette(
        routes=[Route("/", index), *pausemesh.routes("/agui")],
        lifespan=pausemesh.lifespan,
    )


app = create_host_app(Settings.load(env_file=None))
