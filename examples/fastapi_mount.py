"""A FastAPI app that mounts the PauseMesh app under ``/pausemesh``.

Run it::

    uvicorn examples.fastapi_mount:app

Starlette (and so FastAPI) never forwards lifespan events to a mounted app, so the host's
lifespan must enter PauseMesh's: that one line opens the stores and starts the expiry
sweeper. Without it every PauseMesh request fails loudly with a 500 ``NOT_STARTED`` problem
that names the missing line, never with a half-initialized store.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import cast

from fastapi import FastAPI
from litestar import Litestar
from starlette.types import ASGIApp

from pausemesh import Settings, create_app
from pausemesh.agui import (
    AgentOutput,
    PauseRequest,
    RunContext,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)

__all__ = ("app", "create_host_app", "deploy_agent")

CHOICE = {
    "type": "object",
    "properties": {"environment": {"type": "string", "enum": ["staging", "production"]}},
    "required": ["environment"],
}


def say(text: str) -> list[AgentOutput]:
    message_id = f"msg-{uuid.uuid4()}"
    return [
        TextMessageStartEvent(message_id=message_id, role="assistant"),
        TextMessageContentEvent(message_id=message_id, delta=text),
        TextMessageEndEvent(message_id=message_id),
    ]


async def deploy_agent(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """Asks where to deploy, then reports the deployment (on the next run)."""
    for decision in ctx.decisions.values():
        payload = decision.payload if isinstance(decision.payload, dict) else {}
        if decision.status == "resolved":
            text = f"Deployed build 42 to {payload['environment']}."
        else:
            text = "Deployment called off."
        for event in say(text):
            yield event
        return
    yield PauseRequest(message="Where should build 42 go?", response_schema=CHOICE)


def create_host_app(settings: Settings, *, enter_lifespan: bool = True) -> FastAPI:
    pausemesh: Litestar = create_app(settings, agent=deploy_agent)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with pausemesh.lifespan():  # the line everyone forgets
            yield

    api = FastAPI(lifespan=lifespan if enter_lifespan else None)

    @api.get("/")
    async def index() -> dict[str, str]:
        return {"service": "deployments", "agent": "/pausemesh/agui"}

    # Litestar types its ASGI signature more precisely than Starlette's aliases; same protocol.
    api.mount("/pausemesh", cast("ASGIApp", pausemesh))
    return api


app = create_host_app(Settings.load(env_file=None))
