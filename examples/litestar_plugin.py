"""A host Litestar app that adds PauseMesh with one plugin and brings its own agent.

Run it::

    uvicorn examples.litestar_plugin:app

The host keeps its own routes (``GET /``); the plugin adds the AG-UI endpoints (``POST /agui``,
``/agui/connect``, ``/agui/threads/...``) and the continuation API, all on the stores and key
chosen by ``PAUSEMESH_*`` settings (SQLite under ``./data/`` by default).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

from litestar import Litestar, get

from pausemesh import PauseMeshConfig, PauseMeshPlugin, Settings
from pausemesh.agui import (
    AgentOutput,
    PauseRequest,
    RunContext,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)

__all__ = ("app", "create_host_app", "refund_agent")

APPROVAL = {
    "type": "object",
    "properties": {"approved": {"type": "boolean", "title": "Approve the refund?"}},
    "required": ["approved"],
}


def say(text: str) -> list[AgentOutput]:
    message_id = f"msg-{uuid.uuid4()}"
    return [
        TextMessageStartEvent(message_id=message_id, role="assistant"),
        TextMessageContentEvent(message_id=message_id, delta=text),
        TextMessageEndEvent(message_id=message_id),
    ]


async def refund_agent(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """Asks a person to approve a refund, then acts on the answer (on the next run)."""
    for decision in ctx.decisions.values():
        payload = decision.payload if isinstance(decision.payload, dict) else {}
        approved = decision.status == "resolved" and payload.get("approved") is True
        for event in say("Refund sent." if approved else "Refund not sent."):
            yield event
        return
    for event in say("Order 1234 qualifies for a refund of 40 EUR."):
        yield event
    yield PauseRequest(message="Approve the refund of 40 EUR?", response_schema=APPROVAL)


@get("/")
async def index() -> dict[str, str]:
    return {"service": "refunds", "agent": "/agui"}


def create_host_app(settings: Settings) -> Litestar:
    pausemesh = PauseMeshPlugin(PauseMeshConfig(settings=settings, agent=refund_agent))
    return Litestar(route_handlers=[index], plugins=[pausemesh])


app = create_host_app(Settings.load(env_file=None))
