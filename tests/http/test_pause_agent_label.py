"""``PauseRequest(agent=...)``: the agent's name reaches the approvals inbox and its filter;
a blank or overlong one ends the run with ``AGENT_PROTOCOL_ERROR`` and asks nothing.

In-process (the app over ``httpx.ASGITransport``) on a real SQLite file, with the header
principal resolver: ``alice`` asks through the agent, ``boss`` (role ``manager``) reads the
inbox.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from asgi_lifespan import LifespanManager

from pausemesh.agui.agent import AgentOutput, Approver, PauseRequest, RunContext
from pausemesh.settings import Settings
from pausemesh.web.app import create_app
from tests.support.agui import RunResult, header_identity, read_frames, run_body
from tests.support.asgi import asgi

ALICE = {"X-Principal": "alice"}
MANAGER = {"X-Principal": "boss", "X-Roles": "manager"}


async def labelled_agent(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """Asks a manager, naming itself as the user's message says ("" and "x" * 201 too)."""
    text = ctx.messages[-1].content if ctx.messages else ""
    name = {"blank": "", "long": "x" * 201}.get(str(text), str(text))
    yield PauseRequest(
        message="Approve?", approvers=(Approver.role("manager"),), agent=name, tags=("t",)
    )


@pytest.fixture(name="client")
async def client_fixture(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(database_path=str(tmp_path / "p.db"), sweep_interval_seconds=3600)
    app = create_app(settings, agent=labelled_agent, principal_resolver=header_identity)
    async with (
        LifespanManager(asgi(app), startup_timeout=60, shutdown_timeout=60),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(asgi(app)), base_url="http://localhost", timeout=30
        ) as client,
    ):
        yield client


async def _run(client: httpx.AsyncClient, text: str) -> RunResult:
    message = {"id": f"m-{uuid.uuid4()}", "role": "user", "content": text}
    body = run_body(f"t-{uuid.uuid4()}", f"r-{uuid.uuid4()}", messages=[message])
    async with client.stream("POST", "/agui", json=body, headers=ALICE) as response:
        assert response.status_code == 200
        lines = [line async for line in response.aiter_lines()]
    return RunResult(list(read_frames(iter(lines))))


async def _inbox(client: httpx.AsyncClient, **params: str) -> list[dict[str, object]]:
    response = await client.get("/v1/approvals", params=params, headers=MANAGER)
    assert response.status_code == 200, response.text
    items: list[dict[str, object]] = response.json()["approvals"]
    return items


async def test_the_agents_name_is_shown_in_the_inbox_and_filters_it(
    client: httpx.AsyncClient,
) -> None:
    for name in ("travel-desk", "it-desk"):
        assert (await _run(client, name)).last["type"] == "RUN_FINISHED"
    assert [a["agent"] for a in await _inbox(client)] == ["it-desk", "travel-desk"]
    [only] = await _inbox(client, agent="travel-desk")
    assert only["agent"] == "travel-desk"
    assert only["tags"] == ["t"]


async def test_a_blank_or_overlong_agent_name_is_refused_and_asks_nothing(
    client: httpx.AsyncClient,
) -> None:
    for text in ("blank", "long"):
        run = await _run(client, text)
        assert run.error_code == "AGENT_PROTOCOL_ERROR", run.events
        assert "agent must be a name" in run.last["message"]
    assert await _inbox(client) == []
