"""A reload fetches a page, not the thread's whole life (issue 42, item 3), through both web
bindings in-process (SQLite files): the snapshot and ``/connect`` carry the newest
``PAUSEMESH_SNAPSHOT_MESSAGES`` messages, ``GET /agui/threads/{id}/messages`` pages back
through all of them newest first with a cursor that holds while new messages arrive, an erased
thread's pages are 404 and a bad cursor or limit is a 400 with a stable code."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from litestar import Litestar
from starlette.applications import Starlette

from pausemesh.agui.agent import AgentOutput, PauseRequest, RunContext, lazy_history
from pausemesh.agui.events import TextMessageContentEvent, TextMessageStartEvent
from pausemesh.settings import Settings
from pausemesh.web import PauseMeshConfig, PauseMeshPlugin
from pausemesh.web.agui_starlette import StarletteAgui
from tests.http.test_starlette_conversations import client_for
from tests.support.agui import RunResult, StreamChecker, read_frames

PAGE = 3


@lazy_history
async def says_ok(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    if ctx.decisions:
        return  # an answer ends quietly
    yield TextMessageStartEvent(message_id=f"a-{ctx.run_id}", role="assistant")
    yield TextMessageContentEvent(message_id=f"a-{ctx.run_id}", delta="ok")
    last = ctx.messages[-1] if ctx.messages else None
    if last is not None and last.id.startswith("ask"):
        yield PauseRequest(message="Sure?", response_schema={"type": "boolean"})


def _settings(database: Path) -> Settings:
    return Settings(database_path=str(database), snapshot_messages=PAGE)


def starlette_host(database: Path) -> Any:
    pausemesh = StarletteAgui(_settings(database), agent=says_ok)
    return Starlette(routes=pausemesh.routes(), lifespan=pausemesh.lifespan)


def litestar_host(database: Path) -> Any:
    config = PauseMeshConfig(settings=_settings(database), agent=says_ok)
    return Litestar(plugins=[PauseMeshPlugin(config)])


HOSTS = pytest.mark.parametrize(
    "make_host", [starlette_host, litestar_host], ids=["starlette", "litestar"]
)


async def _turn(client: httpx.AsyncClient, n: int) -> None:
    body = {
        "threadId": "t1",
        "runId": f"r{n}",
        "messages": [{"id": f"u{n}", "role": "user", "content": f"turn {n}"}],
    }
    ran = await client.post("/agui", json=body)
    assert ran.status_code == 200
    assert '"RUN_FINISHED"' in ran.text, ran.text[:500]


async def _events(client: httpx.AsyncClient, body: dict[str, Any]) -> list[dict[str, Any]]:
    ran = await client.post("/agui", json={"threadId": "t1", **body})
    assert ran.status_code == 200
    return RunResult(list(read_frames(iter(ran.text.split("\n")), StreamChecker()))).events


def _snapshot_ids(events: list[dict[str, Any]]) -> list[str]:
    (messages,) = (e["messages"] for e in events if e["type"] == "MESSAGES_SNAPSHOT")
    return [m["id"] for m in messages]


def _ids(turns: range) -> list[str]:
    return [i for n in turns for i in (f"u{n}", f"a-r{n}")]


async def _all_pages(client: httpx.AsyncClient, cursor: str | None, limit: int) -> list[str]:
    seen: list[str] = []
    while cursor is not None:
        page = await client.get(f"/agui/threads/t1/messages?before={cursor}&limit={limit}")
        assert page.status_code == 200, page.text
        body = page.json()
        assert len(body["messages"]) <= limit
        seen += [m["id"] for m in body["messages"]]
        cursor = body["nextCursor"]
    return seen


@HOSTS
async def test_a_reload_carries_the_newest_page_and_older_pages_follow_back_to_the_first(
    tmp_path: Path, make_host: Callable[[Path], Any]
) -> None:
    async with client_for(make_host(tmp_path / "p.db")) as client:
        for n in range(4):
            await _turn(client, n)
        snapshot = (await client.get("/agui/threads/t1")).json()
        connect = await client.post(
            "/agui/connect", json={"threadId": "t1", "runId": "c1", "messages": []}
        )
        older = await _all_pages(client, snapshot["messagesCursor"], 2)
        newest = (await client.get("/agui/threads/t1/messages")).json()

    assert [m["id"] for m in snapshot["messages"]] == _ids(range(4))[-PAGE:]
    restored = RunResult(list(read_frames(iter(connect.text.split("\n")), StreamChecker())))
    (messages,) = (e["messages"] for e in restored.events if e["type"] == "MESSAGES_SNAPSHOT")
    assert [m["id"] for m in messages] == _ids(range(4))[-PAGE:]
    # Newest first, every message once, down to the first.
    assert older == list(reversed(_ids(range(4))[:-PAGE]))
    assert [m["id"] for m in newest["messages"]] == list(reversed(_ids(range(4))))
    assert newest["nextCursor"] is None


@HOSTS
async def test_a_cursor_holds_while_new_messages_arrive(
    tmp_path: Path, make_host: Callable[[Path], Any]
) -> None:
    async with client_for(make_host(tmp_path / "c.db")) as client:
        for n in range(3):
            await _turn(client, n)
        first = (await client.get("/agui/threads/t1/messages?limit=2")).json()
        for n in range(3, 5):  # two more turns while the reader pages back
            await _turn(client, n)
        rest = await _all_pages(client, first["nextCursor"], 3)

    assert [m["id"] for m in first["messages"]] == ["a-r2", "u2"]
    assert rest == list(reversed(_ids(range(2))))


@HOSTS
async def test_an_erased_threads_pages_are_not_found_and_bad_queries_are_refused(
    tmp_path: Path, make_host: Callable[[Path], Any]
) -> None:
    async with client_for(make_host(tmp_path / "e.db")) as client:
        await _turn(client, 0)
        refused = {
            query: await client.get(f"/agui/threads/t1/messages?{query}")
            for query in (
                "before=not-a-cursor",
                "before=bTp4",
                "limit=0",
                "limit=1001",
                "limit=ten",
            )
        }
        other = await client.get("/agui/threads/nobody/messages")
        assert (await client.delete("/agui/threads/t1")).status_code == 204
        erased = await client.get("/agui/threads/t1/messages")

    codes = {query: (r.status_code, r.json()["code"]) for query, r in refused.items()}
    assert codes == {
        "before=not-a-cursor": (400, "INVALID_CURSOR"),
        "before=bTp4": (400, "INVALID_CURSOR"),
        "limit=0": (400, "INVALID_REQUEST"),
        "limit=1001": (400, "INVALID_REQUEST"),
        "limit=ten": (400, "INVALID_REQUEST"),
    }
    assert other.status_code == 404
    assert erased.status_code == 404
    assert erased.headers["content-type"] == "application/problem+json"


@HOSTS
async def test_the_snapshot_and_pages_carry_each_messages_server_time_beside_the_messages(
    tmp_path: Path, make_host: Callable[[Path], Any]
) -> None:
    async with client_for(make_host(tmp_path / "t.db")) as client:
        for n in range(2):
            await _turn(client, n)
        before = (await client.get("/agui/threads/t1/messages?limit=4")).json()
        await _turn(client, 2)
        snapshot = (await client.get("/agui/threads/t1")).json()
        page = (await client.get("/agui/threads/t1/messages?limit=4")).json()

    # The snapshot's page (the newest PAGE) and the messages page: a time for each, by id.
    assert set(snapshot["messageTimes"]) == {m["id"] for m in snapshot["messages"]}
    assert set(page["messageTimes"]) == {m["id"] for m in page["messages"]}
    assert all(set(m) <= {"id", "role", "content"} for m in page["messages"])
    for text in [*snapshot["messageTimes"].values(), *page["messageTimes"].values()]:
        assert text.endswith("Z")
        assert datetime.fromisoformat(text).utcoffset() == timedelta(0)
    # A later run leaves the earlier messages' times as they were first stored.
    for message_id in ("a-r1", "u1"):
        assert page["messageTimes"][message_id] == before["messageTimes"][message_id]
    assert snapshot["messageTimes"]["u2"] == page["messageTimes"]["u2"]


@HOSTS
async def test_a_paused_run_and_a_replayed_answer_send_the_newest_page_not_the_history(
    tmp_path: Path, make_host: Callable[[Path], Any]
) -> None:
    async with client_for(make_host(tmp_path / "s.db")) as client:
        for n in range(4):
            await _turn(client, n)
        asked = await _events(
            client,
            {"runId": "r-ask", "messages": [{"id": "ask-1", "role": "user", "content": "ask"}]},
        )
        (interrupt,) = asked[-1]["outcome"]["interrupts"]
        resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": True}]
        answered = await _events(client, {"runId": "r-answer", "messages": [], "resume": resume})
        replayed = await _events(client, {"runId": "r-again", "messages": [], "resume": resume})
        snapshot = (await client.get("/agui/threads/t1")).json()
        everything = (await client.get("/agui/threads/t1/messages")).json()

    history = [*_ids(range(4)), "ask-1", "a-r-ask"]
    assert [e["type"] for e in asked[-3:]] == [
        "MESSAGES_SNAPSHOT",
        "STATE_SNAPSHOT",
        "RUN_FINISHED",
    ]
    # The page a reload carries, and the cursor of the snapshot route leads to the rest.
    assert _snapshot_ids(asked) == history[-PAGE:]
    assert answered[-1]["type"] == "RUN_FINISHED"
    assert "MESSAGES_SNAPSHOT" not in [e["type"] for e in answered]
    # A replay of that answer is answered from the record: the newest page again.
    assert [e["type"] for e in replayed] == [
        "RUN_STARTED",
        "MESSAGES_SNAPSHOT",
        "STATE_SNAPSHOT",
        "RUN_FINISHED",
    ]
    assert _snapshot_ids(replayed) == [m["id"] for m in snapshot["messages"]]
    assert len(_snapshot_ids(replayed)) == PAGE
    assert snapshot["messagesCursor"] is not None
    # Nothing was lost on the server: the pages hold the whole conversation.
    assert [m["id"] for m in reversed(everything["messages"])][: len(history)] == history
