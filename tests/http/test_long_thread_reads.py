"""A long thread through both web bindings (in-process, SQLite files): its snapshot
(``GET /agui/threads/{id}``), its reload (``POST /agui/connect``) and the snapshot a paused run
ends with are sent in pieces (``core/large_json.py``), and say exactly what the store holds,
as a short thread's do."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from litestar import Litestar
from starlette.applications import Starlette

from pausemesh.agui.agent import AgentOutput, PauseRequest, RunContext
from pausemesh.agui.events import (
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from pausemesh.agui.run import thread_snapshot
from pausemesh.agui.run.snapshots import to_messages
from pausemesh.core.large_json import LARGE_BYTES
from pausemesh.core.threads import ThreadRecord
from pausemesh.settings import Settings
from pausemesh.stores.sqlite import SqliteDatabase, SqliteThreadStore
from pausemesh.web import PauseMeshConfig, PauseMeshPlugin
from pausemesh.web.agui_starlette import StarletteAgui
from tests.http.test_starlette_conversations import client_for
from tests.support.agui import RunResult, StreamChecker, read_frames

# About 600 KB: past the size from which a thread is read and sent in pieces.
LONG_TEXT = "a long line of text\n" * 30_000


async def answer_then_ask(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    yield TextMessageStartEvent(message_id=f"a-{ctx.run_id}", role="assistant")
    yield TextMessageContentEvent(message_id=f"a-{ctx.run_id}", delta="Read it.")
    yield TextMessageEndEvent(message_id=f"a-{ctx.run_id}")
    yield PauseRequest(message="Shall I summarise it?")


def _settings(database: Path) -> Settings:
    return Settings(database_path=str(database), max_payload_bytes=2 * 1024 * 1024)


def starlette_host(database: Path) -> Any:
    pausemesh = StarletteAgui(_settings(database), agent=answer_then_ask)
    return Starlette(routes=pausemesh.routes(), lifespan=pausemesh.lifespan)


def litestar_host(database: Path) -> Any:
    config = PauseMeshConfig(settings=_settings(database), agent=answer_then_ask)
    return Litestar(plugins=[PauseMeshPlugin(config)])


def _frames(body: str) -> RunResult:
    return RunResult(list(read_frames(iter(body.split("\n")), StreamChecker())))


async def _stored(database: Path, thread_id: str) -> ThreadRecord:
    store = SqliteThreadStore(await SqliteDatabase(database).open_read_only(), owns_database=True)
    try:
        record = await store.get(thread_id)
    finally:
        await store.close()
    assert record is not None
    return record


@pytest.mark.parametrize(
    "make_host", [starlette_host, litestar_host], ids=["starlette", "litestar"]
)
async def test_a_long_threads_snapshot_and_reload_say_what_the_store_holds(
    tmp_path: Path, make_host: Callable[[Path], Any]
) -> None:
    database = tmp_path / "long.db"
    message = {"id": "u-1", "role": "user", "content": LONG_TEXT}
    async with client_for(make_host(database)) as client:
        ran = await client.post(
            "/agui", json={"threadId": "t-long", "runId": "r-1", "messages": [message]}
        )
        assert ran.status_code == 200, ran.text[:500]
        run = _frames(ran.text)
        (interrupt,) = run.interrupts
        record = await _stored(database, "t-long")
        assert record.stored_bytes > LARGE_BYTES
        typed = [msgspec.to_builtins(m) for m in to_messages(record.messages)]
        # The paused run's own snapshot (logged whole) carries the whole history.
        (ran_snapshot,) = (e for e in run.events if e["type"] == "MESSAGES_SNAPSHOT")
        assert ran_snapshot["messages"] == typed
        assert typed[0]["content"] == LONG_TEXT

        snapshot = await client.get("/agui/threads/t-long")
        reload = await client.post(
            "/agui/connect", json={"threadId": "t-long", "runId": "c-1", "messages": []}
        )

    assert snapshot.status_code == 200
    assert snapshot.headers["content-type"].startswith("application/json")
    assert snapshot.json() == json.loads(msgspec.json.encode(thread_snapshot(record)))
    assert reload.status_code == 200
    restored = _frames(reload.text)
    assert restored.types == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED"]
    assert restored.events[1]["messages"] == typed
    assert [i["id"] for i in restored.interrupts] == [interrupt["id"]]
