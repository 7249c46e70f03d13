"""The AG-UI routes in-process (the app with the demo agent, warnings as errors): headers,
problems, OpenAPI, and one ask → answer through the plugin's wiring."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager

from pausemesh.demo.agent import travel_agent
from pausemesh.settings import Settings
from pausemesh.web.app import create_app
from tests.support.agui import RunResult, StreamChecker, read_frames
from tests.support.rest import assert_problem


@pytest.fixture(name="client")
async def client_fixture(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    app: Any = create_app(Settings(database_path=str(tmp_path / "app.db")), agent=travel_agent)
    async with (
        LifespanManager(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app), base_url="http://localhost"
        ) as client,
    ):
        yield client


async def _run(
    client: httpx.AsyncClient, body: dict[str, object]
) -> tuple[httpx.Response, RunResult]:
    response = await client.post("/agui", json=body)
    lines = iter(response.text.split("\n"))
    return response, RunResult(list(read_frames(lines, StreamChecker())))


async def test_a_run_is_an_uncached_lf_framed_event_stream(client: httpx.AsyncClient) -> None:
    user = {"id": "u1", "role": "user", "content": "Lisbon please"}
    response, asked = await _run(client, {"threadId": "t1", "runId": "r1", "messages": [user]})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["cache-control"] == "no-cache"
    assert response.headers["x-accel-buffering"] == "no"
    assert "\r" not in response.text
    [interrupt] = asked.interrupts
    answer = [
        {"interruptId": interrupt["id"], "status": "resolved", "payload": {"flight": "PM303"}}
    ]
    _, done = await _run(
        client, {"threadId": "t1", "runId": "r2", "messages": [], "resume": answer}
    )
    assert done.last["type"] == "RUN_FINISHED"
    thread = (await client.get("/agui/threads/t1")).json()
    assert thread["pendingInterrupts"] == []
    assert [b["flight"] for b in thread["state"]["bookings"]] == ["PM303"]
    assert (
        thread["lastSequence"] == done.frames[-1].sequence == len(asked.frames) + len(done.frames)
    )


async def test_client_mistakes_are_problems_not_streams(client: httpx.AsyncClient) -> None:
    assert_problem(await client.get("/agui/threads/ghost"), 404, "THREAD_NOT_FOUND")
    assert_problem(await client.post("/agui", content=b""), 400, "INVALID_RUN_INPUT")
    too_long = {"threadId": "t" * 500, "runId": "r", "messages": []}
    assert_problem(await client.post("/agui", json=too_long), 400, "INVALID_ID")
    bad_cursor = await client.get("/agui/threads/ghost/events?after=-1")
    assert_problem(bad_cursor, 400, "INVALID_CURSOR")


async def test_thread_ids_reserved_for_a2a_tasks_are_refused(client: httpx.AsyncClient) -> None:
    body = {"threadId": "a2a-task:123", "runId": "r", "messages": []}
    assert_problem(await client.post("/agui", json=body), 400, "INVALID_ID")
    assert_problem(await client.post("/agui/connect", json=body), 400, "INVALID_ID")
    assert_problem(await client.get("/agui/threads/a2a-task:123"), 400, "INVALID_ID")
    assert_problem(await client.get("/agui/threads/a2a-task:123/events"), 400, "INVALID_ID")


async def test_the_agui_routes_are_in_the_openapi_document(client: httpx.AsyncClient) -> None:
    paths = (await client.get("/schema/openapi.json")).json()["paths"]
    assert {
        "/agui",
        "/agui/connect",
        "/agui/threads/{thread_id}",
        "/agui/threads/{thread_id}/events",
    } <= set(paths)
