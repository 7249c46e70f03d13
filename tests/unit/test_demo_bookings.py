"""The demo agent's state and confirmation codes, through the real app on a SQLite file:
the state has ``bookings: []`` from the first event on, and every booking has its own code."""

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


async def _run(client: httpx.AsyncClient, body: dict[str, object]) -> RunResult:
    response = await client.post("/agui", json=body)
    assert response.status_code == 200, response.text
    return RunResult(list(read_frames(iter(response.text.split("\n")), StreamChecker())))


async def _ask(client: httpx.AsyncClient, thread: str) -> RunResult:
    user = {"id": f"u-{thread}", "role": "user", "content": "Lisbon please"}
    return await _run(client, {"threadId": thread, "runId": f"ask-{thread}", "messages": [user]})


async def _book(client: httpx.AsyncClient, thread: str, flight: str) -> dict[str, Any]:
    [interrupt] = (await _ask(client, thread)).interrupts
    answer = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"flight": flight}}]
    done = await _run(
        client, {"threadId": thread, "runId": f"book-{thread}", "messages": [], "resume": answer}
    )
    said = "".join(e.get("delta", "") for e in done.events if e["type"] == "TEXT_MESSAGE_CONTENT")
    thread_state = (await client.get(f"/agui/threads/{thread}")).json()["state"]
    [booking] = thread_state["bookings"]
    assert booking["confirmation"] in said
    return dict(booking)


async def test_the_first_run_starts_the_state_with_an_empty_booking_list(
    client: httpx.AsyncClient,
) -> None:
    asked = await _ask(client, "fresh")
    assert [e["type"] for e in asked.events[:2]] == ["RUN_STARTED", "STATE_SNAPSHOT"]
    assert asked.events[1]["snapshot"] == {"bookings": []}
    snapshot = (await client.get("/agui/threads/fresh")).json()
    assert snapshot["state"] == {"bookings": []}
    assert len(snapshot["pendingInterrupts"]) == 1


async def test_a_later_run_does_not_reset_the_bookings(client: httpx.AsyncClient) -> None:
    first = await _book(client, "again", "PM101")
    user = {"id": "u-again-2", "role": "user", "content": "And another to Lisbon"}
    asked = await _run(client, {"threadId": "again", "runId": "ask-2", "messages": [user]})
    snapshots = [e["snapshot"] for e in asked.events if e["type"] == "STATE_SNAPSHOT"]
    assert snapshots, asked.types
    assert all(s == {"bookings": [first]} for s in snapshots)
    state = (await client.get("/agui/threads/again")).json()["state"]
    assert state["bookings"] == [first]


async def test_the_same_flight_booked_in_two_conversations_gets_two_confirmation_codes(
    client: httpx.AsyncClient,
) -> None:
    one = await _book(client, "conversation-one", "PM101")
    two = await _book(client, "conversation-two", "PM101")
    assert one["flight"] == two["flight"] == "PM101"
    assert one["confirmation"] != two["confirmation"]
    assert one["confirmation"].startswith("PM-")
