"""A rollback's tombstones (issue 44): the message ids a ``rollback`` removed stay removed.

``@ag-ui/client`` keeps every message it streamed, so after a rollback its next input carries
the removed run's output again. The thread remembers the removed ids (written by the save that
removes them, looked up per id, gone with the thread) and a later input's copies are dropped.
Every store kind passes the same tests; migration 46 on databases that already hold threads.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import msgspec

from pausemesh.agui.agent import AgentOutput, RunContext
from pausemesh.agui.events import TextMessageContentEvent, TextMessageStartEvent
from pausemesh.agui.input import convert_run_input
from pausemesh.agui.messages import UserMessage
from pausemesh.agui.run import RunHost
from pausemesh.core import ContinuationService, KeyedTokenIssuer, ManualClock
from pausemesh.core.run_queue import QueuedInput
from pausemesh.core.threads import ThreadRecord, ThreadStore
from pausemesh.stores.memory import InMemoryEventStore
from pausemesh.stores.memory.run_queue import InMemoryRunQueue
from pausemesh.stores.postgres import PostgresThreadStore
from pausemesh.stores.postgres.migrate import migrate
from pausemesh.stores.postgres.schema import POSTGRES_MIGRATIONS
from pausemesh.stores.sqlite import SqliteDatabase, SqliteThreadStore
from pausemesh.stores.sqlite.schema import SQLITE_MIGRATIONS
from tests.support.agui import RunResult, StreamChecker, read_frames
from tests.support.postgres import DATABASE_URL, _open_database, fresh_schema, require_postgres

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)
OLD = [{"id": "o1", "role": "user", "content": "before"}, {"id": "o2", "role": "assistant"}]


def _user(message_id: str, text: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "content": text}


async def _append(
    threads: ThreadStore,
    record: ThreadRecord,
    added: list[Any],
    at: datetime,
    removed: tuple[str, ...] = (),
) -> ThreadRecord:
    return await threads.save(
        msgspec.structs.replace(record, messages=added, messages_from=record.message_count),
        now=at,
        removed_ids=removed,
    )


async def test_the_ids_a_save_removes_are_remembered_per_thread_until_it_is_erased(
    threads: ThreadStore,
) -> None:
    record = await threads.create_or_load("t1", owner="alice", now=T0)
    other = await threads.create_or_load("t2", owner="alice", now=T0)
    saved = await _append(threads, record, [_user("u1", "hi")], T0, removed=("a1", "a1", "t1"))
    await _append(threads, saved, [], T1, removed=("a2",))
    await _append(threads, other, [_user("v1", "hi")], T0)

    asked = ["u1", "a1", "a2", "t1", "x"]
    assert await threads.removed_message_ids("t1", asked) == {"a1", "a2", "t1"}
    assert await threads.removed_message_ids("t2", asked) == set()
    assert await threads.removed_message_ids("t1", []) == set()
    stored = await threads.get("t1")
    assert stored is not None
    assert [m["id"] for m in stored.messages] == ["u1"]  # a tombstone is not a message

    assert await threads.erase("t1", now=T1)
    assert await threads.removed_message_ids("t1", asked) == set()


class _Held:
    """Holds a run whose last message says ``hold`` (after starting its answer); echoes."""

    def __init__(self) -> None:
        self.holding = asyncio.Event()

    async def __call__(self, ctx: RunContext) -> AsyncIterator[AgentOutput]:
        last = ctx.messages[-1]
        text = last.content if isinstance(last, UserMessage) else ""
        yield TextMessageStartEvent(message_id=f"a-{ctx.run_id}", role="assistant")
        if text == "hold":
            yield TextMessageContentEvent(message_id=f"a-{ctx.run_id}", delta="thinking")
            self.holding.set()
            await asyncio.Event().wait()  # until the rollback stops it
        yield TextMessageContentEvent(message_id=f"a-{ctx.run_id}", delta=f"echo {text}")


class _Watched(InMemoryRunQueue):
    def __init__(self) -> None:
        super().__init__()
        self.queued = asyncio.Event()

    async def enqueue(self, entry: QueuedInput, *, limit: int) -> QueuedInput | None:
        stored = await super().enqueue(entry, limit=limit)
        self.queued.set()
        return stored


async def _run(host: RunHost, run_id: str, messages: list[dict[str, Any]]) -> RunResult:
    body = {
        "threadId": "t1",
        "runId": run_id,
        "messages": messages,
        "forwardedProps": {"pausemesh": {"doubleTexting": "rollback"}},
    }
    chunks = [c async for c in host.run(convert_run_input(body), None)]
    lines = b"".join(chunks).decode().split("\n")
    return RunResult(list(read_frames(iter(lines), StreamChecker())))


async def test_a_later_input_that_carries_a_rolled_back_message_does_not_bring_it_back(
    threads: ThreadStore,
) -> None:
    agent, queue = _Held(), _Watched()
    clock = ManualClock(T0)
    service = ContinuationService(
        store=InMemoryEventStore(),
        clock=clock,
        keyed_issuer=KeyedTokenIssuer({"k1": b"k" * 32}, "k1"),
    )
    host = RunHost(
        agent=agent, service=service, threads=threads, clock=clock, keepalive_seconds=10,
        run_queue=queue,
    )  # fmt: skip
    first = _user("u1", "hold")
    held = asyncio.create_task(_run(host, "r1", [first]))
    await agent.holding.wait()
    redo = asyncio.create_task(_run(host, "r2", [first, _user("u2", "start over")]))
    stopped = await held
    assert stopped.events[-2]["value"]["removedMessageIds"] == ["a-r1"]
    assert (await redo).text() == "echo start over"

    # What the official client holds now: everything it streamed, the rolled-back answer too.
    streamed = {"id": "a-r1", "role": "assistant", "content": "thinking"}
    answer = {"id": "a-r2", "role": "assistant", "content": "echo start over"}
    history = [first, streamed, _user("u2", "start over"), answer]
    later = await _run(host, "r3", [*history, _user("u3", "and then")])
    assert later.text() == "echo and then"

    stored = await threads.get("t1")
    assert stored is not None
    assert [m["id"] for m in stored.messages] == ["u1", "u2", "a-r2", "u3", "a-r3"]
    assert await threads.removed_message_ids("t1", ["a-r1", "a-r2"]) == {"a-r1"}
    await host.close()


# --- Migration 46 on a database that already holds threads ------------------------------------


async def _check_after_migration(store: ThreadStore) -> None:
    carried = await store.get("t-old")
    assert carried is not None
    assert carried.messages == OLD
    assert await store.removed_message_ids("t-old", ["o1", "o2"]) == set()
    await _append(store, carried, [_user("u1", "next")], T1, removed=("gone",))
    after = await store.get("t-old")
    assert after is not None
    assert [m["id"] for m in after.messages] == ["o1", "o2", "u1"]
    assert await store.removed_message_ids("t-old", ["gone", "u1"]) == {"gone"}
    assert await store.erase("t-old", now=T1)  # the tombstones go with the thread
    assert await store.removed_message_ids("t-old", ["gone"]) == set()


async def test_sqlite_migration_46_keeps_existing_threads_and_adds_tombstones(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    before = tuple(m for m in SQLITE_MIGRATIONS if m.version < 46)
    old = await SqliteDatabase(path, migrations=before).open()

    def seed(conn: Any) -> None:
        conn.execute(
            "INSERT INTO agui_threads (thread_id, owner, messages_json, state_json, version,"
            " last_sequence, created_at_us, updated_at_us, stored_bytes, message_count,"
            " messages_bytes) VALUES ('t-old', 'alice', '[]', '{}', 3, 0, 0, 0, 4, 2, 0)"
        )
        for position, message in enumerate(OLD):
            conn.execute(
                "INSERT INTO agui_thread_messages VALUES ('t-old', ?, ?, ?, NULL)",
                (position, message["id"], msgspec.json.encode(message).decode()),
            )

    await old.write(seed)
    await old.close()

    store = SqliteThreadStore(await SqliteDatabase(path).open(), owns_database=True)
    try:
        await _check_after_migration(store)
    finally:
        await store.close()


async def test_postgres_migration_46_keeps_existing_threads_and_adds_tombstones() -> None:
    await require_postgres()
    schema = fresh_schema()
    before = tuple(m for m in POSTGRES_MIGRATIONS if m.version < 46)
    await migrate(DATABASE_URL, schema=schema, migrations=before)
    conn = await asyncpg.connect(DATABASE_URL)
    try:
        await conn.execute(
            f'INSERT INTO "{schema}".agui_threads (thread_id, owner, body_json, version,'  # noqa: S608 - a test schema
            " last_sequence, created_at, updated_at, message_count)"
            " VALUES ('t-old', 'alice', $1, 3, 0, $2, $2, 2)",
            msgspec.json.encode({"state": {}, "open_receipt": None, "messages": []}).decode(),
            T0,
        )
        for position, message in enumerate(OLD):
            await conn.execute(
                f"INSERT INTO \"{schema}\".agui_thread_messages VALUES ('t-old', $1, $2, $3, $4)",  # noqa: S608 - a test schema
                position,
                message["id"],
                msgspec.json.encode(message).decode(),
                T0,
            )
    finally:
        await conn.close()
    await migrate(DATABASE_URL, schema=schema)
    store = PostgresThreadStore(await _open_database(schema), owns_database=True)
    try:
        await _check_after_migration(store)
    finally:
        await store.close()
