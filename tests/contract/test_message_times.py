"""When the server first stored each message (issue 44): set by the save that first stores it,
kept when later saves and runs rewrite the tail, absent for messages stored before times were
kept. Every store kind passes the same tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import msgspec

from pausemesh.agui.input import convert_run_input
from pausemesh.agui.run import RunHost
from pausemesh.agui.run.snapshots import message_page, thread_snapshot
from pausemesh.core import ContinuationService, KeyedTokenIssuer, ManualClock
from pausemesh.core.threads import ThreadRecord, ThreadStore
from pausemesh.stores.memory import InMemoryEventStore
from pausemesh.stores.postgres import PostgresThreadStore
from pausemesh.stores.postgres.migrate import migrate
from pausemesh.stores.postgres.schema import POSTGRES_MIGRATIONS
from pausemesh.stores.sqlite import SqliteDatabase, SqliteThreadStore
from pausemesh.stores.sqlite.schema import SQLITE_MIGRATIONS
from tests.contract.test_thread_messages import answers_ok
from tests.support.postgres import DATABASE_URL, _open_database, fresh_schema, require_postgres

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)
T2 = T0 + timedelta(minutes=9)
OLD = [{"id": "o1", "role": "user", "content": "before"}, {"id": "o2", "role": "assistant"}]


def _turn(n: int) -> list[dict[str, Any]]:
    return [
        {"id": f"u{n}", "role": "user", "content": f"turn {n}"},
        {"id": f"a{n}", "role": "assistant", "content": f"answer {n}"},
    ]


async def _append(
    threads: ThreadStore, record: ThreadRecord, added: list[Any], at: datetime
) -> ThreadRecord:
    return await threads.save(
        msgspec.structs.replace(record, messages=added, messages_from=record.message_count),
        now=at,
    )


async def test_a_message_keeps_the_time_it_was_first_stored_through_later_saves(
    threads: ThreadStore,
) -> None:
    record = await threads.create_or_load("t1", owner="alice", now=T0)
    first = await _append(threads, record, _turn(0), T0)
    second = await _append(threads, first, _turn(1), T1)
    # A save that rewrites the tail: a2's place rewritten with the same message, one new.
    rewritten = await threads.save(
        msgspec.structs.replace(
            second,
            messages=[*_turn(1), {"id": "x1", "role": "assistant", "content": "more"}],
            messages_from=2,
        ),
        now=T2,
    )
    stored = await threads.get("t1")
    tail = await threads.get("t1", tail=2)
    page = await threads.read_messages("t1", before=None, limit=10)

    assert first.message_times == [T0, T0]
    assert second.message_times == [T1, T1]
    assert rewritten.message_times == [T1, T1, T2]
    assert stored is not None
    assert stored.message_times == [T0, T0, T1, T1, T2]
    assert tail is not None
    assert tail.message_times == [T1, T2]
    assert [(p.message["id"], p.stored_at) for p in page] == [
        ("x1", T2), ("a1", T1), ("u1", T1), ("a0", T0), ("u0", T0),
    ]  # fmt: skip


async def test_a_position_rewritten_with_another_message_takes_the_new_save_time(
    threads: ThreadStore,
) -> None:
    record = await threads.create_or_load("t1", owner="alice", now=T0)
    first = await _append(threads, record, _turn(0), T0)
    # The tail shortened, then a different message stored where a0 was.
    await threads.save(
        msgspec.structs.replace(
            first, messages=[{"id": "b0", "role": "assistant", "content": "other"}], messages_from=1
        ),
        now=T1,
    )
    stored = await threads.get("t1")

    assert stored is not None
    assert [m["id"] for m in stored.messages] == ["u0", "b0"]
    assert stored.message_times == [T0, T1]


async def test_runs_stamp_their_messages_once_and_the_routes_carry_the_times(
    threads: ThreadStore,
) -> None:
    clock = ManualClock(T0)
    service = ContinuationService(
        store=InMemoryEventStore(),
        clock=clock,
        keyed_issuer=KeyedTokenIssuer({"k1": b"k" * 32}, "k1"),
    )
    host = RunHost(agent=answers_ok, service=service, threads=threads, keepalive_seconds=10)

    async def run(n: int) -> None:
        body = {
            "threadId": "t1",
            "runId": f"r{n}",
            "messages": [{"id": f"u{n}", "role": "user", "content": f"turn {n}"}],
        }
        frames = [f async for f in host.run(convert_run_input(body), None)]
        assert b"RUN_FINISHED" in frames[-1], frames

    await run(1)
    after_first = await threads.get("t1")
    clock.set(T1)
    await run(2)
    stored = await threads.get("t1")
    assert after_first is not None
    assert stored is not None

    times = thread_snapshot(stored)["messageTimes"]
    ids = [m["id"] for m in stored.messages]
    assert ids == ["u1", "ok-r1", "u2", "ok-r2"]
    assert times == {
        "u1": "2026-01-01T12:00:00.000Z",
        "ok-r1": "2026-01-01T12:00:00.000Z",
        "u2": "2026-01-01T12:05:00.000Z",
        "ok-r2": "2026-01-01T12:05:00.000Z",
    }
    assert thread_snapshot(after_first)["messageTimes"] == {k: times[k] for k in ("u1", "ok-r1")}
    page = message_page("t1", await threads.read_messages("t1", before=None, limit=3))
    assert page.message_times == {k: times[k] for k in ("ok-r2", "u2", "ok-r1")}


# --- Rows stored before migration 45 have no time ---------------------------------------------


def _check_carried(
    carried: ThreadRecord | None, after: ThreadRecord | None, page_times: dict[str, str]
) -> None:
    assert carried is not None
    assert carried.messages == OLD
    assert carried.message_times == [None, None]
    assert thread_snapshot(carried)["messageTimes"] == {}
    assert after is not None
    assert after.message_times == [None, None, T1, T1]
    assert page_times == {"u0": "2026-01-01T12:05:00.000Z", "a0": "2026-01-01T12:05:00.000Z"}


async def test_sqlite_rows_stored_before_migration_45_have_no_time(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    before = tuple(m for m in SQLITE_MIGRATIONS if m.version < 45)
    old = await SqliteDatabase(path, migrations=before).open()

    def seed(conn: Any) -> None:
        conn.execute(
            "INSERT INTO agui_threads (thread_id, owner, messages_json, state_json, version,"
            " last_sequence, created_at_us, updated_at_us, stored_bytes, message_count,"
            " messages_bytes) VALUES ('t-old', 'alice', '[]', '{}', 3, 0, 0, 0, 4, 2, 0)"
        )
        for position, message in enumerate(OLD):
            conn.execute(
                "INSERT INTO agui_thread_messages VALUES ('t-old', ?, ?, ?)",
                (position, message["id"], msgspec.json.encode(message).decode()),
            )

    await old.write(seed)
    await old.close()

    store = SqliteThreadStore(await SqliteDatabase(path).open(), owns_database=True)
    try:
        carried = await store.get("t-old")
        assert carried is not None
        await _append(store, carried, _turn(0), T1)
        after = await store.get("t-old")
        page = message_page("t-old", await store.read_messages("t-old", before=None, limit=10))
    finally:
        await store.close()

    _check_carried(carried, after, page.message_times)


async def test_postgres_rows_stored_before_migration_45_have_no_time() -> None:
    await require_postgres()
    schema = fresh_schema()
    before = tuple(m for m in POSTGRES_MIGRATIONS if m.version < 45)
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
                f"INSERT INTO \"{schema}\".agui_thread_messages VALUES ('t-old', $1, $2, $3)",  # noqa: S608 - a test schema
                position,
                message["id"],
                msgspec.json.encode(message).decode(),
            )
    finally:
        await conn.close()
    await migrate(DATABASE_URL, schema=schema)
    store = PostgresThreadStore(await _open_database(schema), owns_database=True)
    try:
        carried = await store.get("t-old")
        assert carried is not None
        await _append(store, carried, _turn(0), T1)
        after = await store.get("t-old")
        page = message_page("t-old", await store.read_messages("t-old", before=None, limit=10))
    finally:
        await store.close()

    _check_carried(carried, after, page.message_times)
