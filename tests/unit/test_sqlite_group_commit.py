"""SQLite group commit: concurrent appends share commits, yet each keeps its own CAS."""

from __future__ import annotations

import asyncio
import math
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pausemesh.core.errors import StoreError, VersionConflictError
from pausemesh.observability import telemetry
from pausemesh.stores.sqlite import (
    SQLITE_MIGRATIONS,
    SqliteDatabase,
    SqliteEventStore,
    open_sqlite_store,
)
from pausemesh.stores.sqlite.database import GroupInsert
from tests.support.events import created, resumed


async def test_concurrent_appends_share_fewer_commits_than_writes(tmp_path: Path) -> None:
    store = await open_sqlite_store(tmp_path / "group.db")
    assert isinstance(store, SqliteEventStore)
    before = store.database.commits
    ids = [f"c{i}" for i in range(100)]
    await asyncio.gather(*(store.append(i, 0, [created(i)]) for i in ids))
    commits = store.database.commits - before
    assert 1 <= commits < 100
    assert [len(await store.load(i)) for i in ids] == [1] * 100
    await store.close()


async def test_a_cas_failure_in_a_group_leaves_the_other_writes_of_that_group(
    tmp_path: Path,
) -> None:
    store = await open_sqlite_store(tmp_path / "group.db")
    await store.append("taken", 0, [created("taken")])
    results = await asyncio.gather(
        store.append("a", 0, [created("a")]),
        store.append("taken", 0, [created("taken")]),  # loses its CAS
        store.append("b", 0, [created("b")]),
        store.append("taken", 1, [resumed("taken")]),
        return_exceptions=True,
    )
    assert results[0] is None
    assert isinstance(results[1], VersionConflictError)
    assert results[2] is None
    assert results[3] is None
    assert [len(await store.load(i)) for i in ("a", "b", "taken")] == [1, 1, 2]
    await store.close()


async def test_a_group_inserts_the_rows_of_its_writes_that_succeeded_and_only_those(
    tmp_path: Path,
) -> None:
    """``write(rows=...)``: the rows go in with the group's others in one statement, in the
    same commit, and a write that failed (its CAS lost) leaves none."""
    database = await SqliteDatabase(tmp_path / "rows.db").open()

    def tables(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE heads (id TEXT PRIMARY KEY, version INTEGER NOT NULL)")
        conn.execute("CREATE TABLE owed (id TEXT PRIMARY KEY)")
        conn.execute("INSERT INTO heads VALUES ('taken', 1)")

    await database.write(tables)
    owed = GroupInsert("INSERT INTO owed (id)", 1, " ON CONFLICT DO NOTHING")

    async def advance(key: str, version: int) -> None:
        def op(conn: sqlite3.Connection) -> None:
            if version == 0:
                conn.execute("INSERT INTO heads VALUES (?, 1)", (key,))  # raises if taken
            elif not conn.execute(
                "UPDATE heads SET version = ? WHERE id = ? AND version = ?",
                (version + 1, key, version),
            ).rowcount:
                raise VersionConflictError(key, version, -1)

        await database.write(op, rows=(owed, [(f"{key}:{version + 1}",)]))

    before = database.commits
    results = await asyncio.gather(
        *(advance(f"c{i}", 0) for i in range(40)),
        advance("taken", 5),  # loses its CAS
        advance("taken", 0),  # its insert fails, so does the write
        advance("taken", 1),
        return_exceptions=True,
    )
    assert results[:40] == [None] * 40
    assert isinstance(results[40], VersionConflictError)
    assert isinstance(results[41], StoreError)
    assert results[42] is None
    assert database.commits - before < 43  # grouped
    rows = await database.read("SELECT id FROM owed")
    assert sorted(row[0] for row in rows) == sorted([f"c{i}:1" for i in range(40)] + ["taken:2"])
    await database.close()


# Liveness bound: only a stuck writer gets near it (never a timing assertion).
STUCK = 30.0
# Liveness bound: commits slower than the budget this many times over only on a stuck disk.
STUCK_WRITES = 200


async def test_the_writer_thread_commits_the_next_group_while_the_loop_is_busy(
    tmp_path: Path,
) -> None:
    """The loop hands groups to the writer thread and takes results back; the next group
    does not wait for the loop (busy serving requests) to take the last one's results."""
    database = await SqliteDatabase(tmp_path / "drain.db").open()
    first_running, release_first, second_ran = (threading.Event() for _ in range(3))

    def first(conn: sqlite3.Connection) -> None:
        first_running.set()
        release_first.wait(STUCK)
        conn.execute("CREATE TABLE a (x INTEGER)")

    def second(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE b (x INTEGER)")
        second_ran.set()

    try:
        # Two writes in one iteration: a group for the writer thread (a lone one commits inline).
        grouped = asyncio.gather(
            database.write(first), database.write(lambda conn: conn.execute("SELECT 1"))
        )
        await asyncio.to_thread(first_running.wait, STUCK)
        later = asyncio.ensure_future(database.write(second))
        await asyncio.sleep(0)  # queued behind the group in flight
        release_first.set()
        # The loop thread is held here, as by a burst of requests: the writer goes on alone.
        assert second_ran.wait(STUCK)
        await asyncio.wait_for(asyncio.gather(grouped, later), STUCK)
        tables = await database.read(
            "SELECT name FROM sqlite_master WHERE name IN ('a', 'b') ORDER BY name"
        )
        assert tables == [("a",), ("b",)]
    finally:
        release_first.set()
        await database.close()


async def _writer_idle(database: SqliteDatabase) -> None:
    """Until the writer thread has no group (it sets no event: its state is polled)."""
    while database.writer_busy:  # noqa: ASYNC110
        await asyncio.sleep(0)


def _on_thread(seen: list[int], hold: float = 0.0) -> Callable[[sqlite3.Connection], None]:
    """A write op noting the thread it ran on, after holding it ``hold`` seconds (a slow
    commit: the op runs inside it)."""

    def op(conn: sqlite3.Connection) -> None:
        time.sleep(hold)
        seen.append(threading.get_ident())
        conn.execute("CREATE TABLE IF NOT EXISTS t (x INTEGER)")

    return op


async def test_a_lone_write_goes_to_the_writer_thread_after_a_slow_commit_and_back_later(
    tmp_path: Path,
) -> None:
    """A commit that took longer than the budget (a loaded disk's fsync) would hold the loop:
    lone writes go to the writer thread until commits are fast again."""
    budget = 0.05
    database = await SqliteDatabase(tmp_path / "adaptive.db", inline_commit_budget=budget).open()
    loop_thread, seen = threading.get_ident(), list[int]()
    try:
        await database.write(_on_thread(seen, hold=budget * 1.2))
        await database.write(_on_thread(seen))
        assert seen == [loop_thread, seen[1]]
        assert seen[1] != loop_thread
        # Fast commits bring the estimate down (a liveness bound, not a time). Each write
        # waits for the writer thread to be idle, as a server's next request does: one
        # queued while a group is in flight joins the next group on the thread.
        for _ in range(STUCK_WRITES):
            await _writer_idle(database)
            await database.write(_on_thread(seen))
            if seen[-1] == loop_thread:
                break
        assert seen[-1] == loop_thread
    finally:
        await database.close()


@pytest.mark.parametrize(
    ("budget", "inline"), [(0.0, False), (math.inf, True)], ids=["never inline", "always inline"]
)
async def test_the_inline_budget_bounds_where_lone_writes_commit(
    tmp_path: Path, budget: float, *, inline: bool
) -> None:
    database = await SqliteDatabase(tmp_path / "budget.db", inline_commit_budget=budget).open()
    seen = list[int]()
    try:
        for hold in (0.01, 0.0, 0.0):
            await _writer_idle(database)
            await database.write(_on_thread(seen, hold))
        assert [t == threading.get_ident() for t in seen] == [inline] * 3
    finally:
        await database.close()


async def test_a_write_after_close_is_a_store_error(tmp_path: Path) -> None:
    from pausemesh.core.errors import StoreError  # noqa: PLC0415 - local to this test

    store = await open_sqlite_store(tmp_path / "group.db")
    await store.close()
    with pytest.raises(StoreError):
        await store.append("a", 0, [created("a")])


async def test_the_file_is_in_wal_mode_with_full_synchronous_by_default(tmp_path: Path) -> None:
    store = await open_sqlite_store(tmp_path / "pragmas.db")
    assert isinstance(store, SqliteEventStore)
    rows = await store.database.read("PRAGMA journal_mode")
    assert rows[0][0] == "wal"
    assert (await store.database.read("PRAGMA synchronous"))[0][0] == 2  # FULL
    assert store.database.sync == "commit"
    await store.close()


async def test_sync_ack_runs_normal_synchronous_with_its_own_wal_fsync(tmp_path: Path) -> None:
    database = await SqliteDatabase(tmp_path / "normal.db", sync="ack").open()
    try:
        # NORMAL: COMMIT does not fsync; WalSync does before any write is acknowledged
        # (tests/unit/test_sqlite_wal_sync.py).
        assert (await database.read("PRAGMA synchronous"))[0][0] == 1
        await database.write(lambda conn: conn.execute("CREATE TABLE t (x INTEGER)"))
    finally:
        await database.close()


async def test_an_in_memory_path_is_refused_with_a_pointer_to_the_memory_store() -> None:
    with pytest.raises(ValueError, match="InMemoryEventStore"):
        await open_sqlite_store(":memory:")


async def test_reopening_a_file_applies_no_migration_twice(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    await (await open_sqlite_store(path)).close()
    await (await open_sqlite_store(path)).close()
    with sqlite3.connect(path) as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM pausemesh_schema_migrations")]
    assert versions == sorted(set(versions))
    assert versions == [m.version for m in SQLITE_MIGRATIONS]


@pytest.mark.parametrize(
    ("tamper", "code"),
    [
        (
            "UPDATE pausemesh_schema_migrations SET checksum = 'x' WHERE version = 1",
            "MIGRATION_CHECKSUM_MISMATCH",
        ),
        (
            "INSERT INTO pausemesh_schema_migrations VALUES (999, 'future', 'x', 'now')",
            "MIGRATION_VERSION_AHEAD",
        ),
    ],
)
async def test_an_altered_or_newer_ledger_refuses_to_open(
    tmp_path: Path, tamper: str, code: str
) -> None:
    from pausemesh.core.errors import StoreError  # noqa: PLC0415 - local to this test

    path = tmp_path / "ledger.db"
    await (await open_sqlite_store(path)).close()
    with sqlite3.connect(path) as conn:
        conn.execute(tamper)
    with pytest.raises(StoreError) as info:
        await open_sqlite_store(path)
    assert info.value.code == code


@pytest.mark.parametrize("budget", [0.0, math.inf], ids=["writer thread", "inline"])
async def test_a_commit_is_a_child_of_the_span_that_asked_for_the_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, budget: float
) -> None:
    # A trace shows a request's writes under it wherever they commit (the loop or the writer).
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(telemetry, "_tracer", provider.get_tracer("test"))
    database = await SqliteDatabase(tmp_path / "traced.db", inline_commit_budget=budget).open()
    try:
        await database.write(lambda conn: conn.execute("CREATE TABLE t (x)"))
        exporter.clear()
        with telemetry.span("caller"):
            await database.write(lambda conn: conn.execute("INSERT INTO t VALUES (1)"))
    finally:
        await database.close()
    finished = exporter.get_finished_spans()
    [caller] = [s for s in finished if s.name == "caller"]
    [commit] = [s for s in finished if s.name == "store.commit"]
    assert commit.parent is not None
    assert commit.parent.span_id == caller.context.span_id
    assert (commit.attributes or {}).get("pausemesh.inline") is (True if budget else None)
