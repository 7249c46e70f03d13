"""``sync="ack"``: a write is acknowledged only once the WAL fsync after its commit returned.

The fsync is held at a gate (``os.fdatasync`` wrapped, the real one still called) so the tests can
look at the database while a commit is written but not yet synced.
"""

from __future__ import annotations

import asyncio
import errno
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pausemesh.bootstrap import open_storage
from pausemesh.core.errors import StoreError
from pausemesh.settings import Settings
from pausemesh.stores.sqlite import SqliteDatabase, SqliteEventStore
from pausemesh.stores.sqlite.database import SqliteSync
from pausemesh.stores.sqlite.wal_sync import Synced, WalSync

# Liveness bound: only a stuck sync gets near it (never a timing assertion).
STUCK = 30.0


class FsyncGate:
    """``os.fdatasync`` that, once closed, waits at the gate until it is opened (then syncs)."""

    def __init__(self, real: Callable[[int], None]) -> None:
        self._real = real
        self.closed = False
        self.failing = False
        self.entered = threading.Event()
        self.opened = threading.Event()
        self.calls = 0

    def __call__(self, fd: int) -> None:
        self.calls += 1
        if self.failing:
            raise OSError(errno.EIO, "Input/output error")
        if self.closed:
            self.entered.set()
            self.opened.wait(STUCK)
        self._real(fd)


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[FsyncGate]:
    fsync_gate = FsyncGate(os.fdatasync)
    monkeypatch.setattr(os, "fdatasync", fsync_gate)
    yield fsync_gate
    fsync_gate.opened.set()


def _table(name: str) -> Callable[[sqlite3.Connection], object]:
    return lambda conn: conn.execute(f"CREATE TABLE w_{name} (x INTEGER)")


async def _tables(database: SqliteDatabase) -> list[str]:
    rows = await database.read("SELECT name FROM sqlite_master WHERE name GLOB 'w_*'")
    return sorted(row[0].removeprefix("w_") for row in rows)


async def _turns() -> None:
    # A few loop iterations: a result queued for the loop would have been taken by now.
    for _ in range(3):
        await asyncio.sleep(0)


async def test_a_group_is_acknowledged_only_after_the_wal_fsync_that_covers_it(
    tmp_path: Path, gate: FsyncGate
) -> None:
    database = await SqliteDatabase(tmp_path / "ack.db", sync="ack").open()
    try:
        gate.closed = True
        # Two writes in one iteration: a group for the writer thread.
        writes = asyncio.gather(database.write(_table("a")), database.write(_table("b")))
        assert await asyncio.to_thread(gate.entered.wait, STUCK)
        await _turns()
        assert not writes.done()
        # Committed, and visible to a reader before it is on disk: what sync="ack" trades.
        assert await _tables(database) == ["a", "b"]
        gate.opened.set()
        await asyncio.wait_for(writes, STUCK)
    finally:
        gate.opened.set()
        await database.close()


async def test_a_lone_write_committed_on_the_loop_is_synced_before_it_returns(
    tmp_path: Path, gate: FsyncGate
) -> None:
    database = await SqliteDatabase(tmp_path / "lone.db", sync="ack").open()
    try:
        before = gate.calls
        await database.write(_table("a"))
        assert gate.calls == before + 1
    finally:
        await database.close()


async def test_the_next_group_commits_while_the_last_ones_fsync_runs(
    tmp_path: Path, gate: FsyncGate, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group committed while the next one waits goes to the sync thread, and the writer
    thread commits the next group at once; a group with nothing behind it is synced by the
    writer thread itself (no hop)."""
    handed = threading.Event()
    after_sync = WalSync.after_sync

    def noted(self: WalSync, then: Synced) -> None:
        after_sync(self, then)
        handed.set()

    monkeypatch.setattr(WalSync, "after_sync", noted)
    database = await SqliteDatabase(tmp_path / "pipeline.db", sync="ack").open()
    holding, hold = threading.Event(), threading.Event()

    def held(conn: sqlite3.Connection) -> None:
        holding.set()
        hold.wait(STUCK)
        conn.execute("CREATE TABLE w_a1 (x INTEGER)")

    try:
        gate.closed = True
        first = asyncio.gather(database.write(held), database.write(_table("a2")))
        assert await asyncio.to_thread(holding.wait, STUCK)
        second = asyncio.gather(database.write(_table("b1")), database.write(_table("b2")))
        await _turns()  # queued behind the group in flight
        hold.set()
        assert await asyncio.to_thread(handed.wait, STUCK)  # the first group's fsync
        assert await asyncio.to_thread(gate.entered.wait, STUCK)
        async with asyncio.timeout(STUCK):  # the second group commits meanwhile
            while await _tables(database) != ["a1", "a2", "b1", "b2"]:  # noqa: ASYNC110 - polls another thread's commit
                await asyncio.sleep(0.001)
        await _turns()
        assert not first.done()
        assert not second.done()
        gate.opened.set()
        await asyncio.wait_for(asyncio.gather(first, second), STUCK)
    finally:
        hold.set()
        gate.opened.set()
        await database.close()


@pytest.mark.parametrize("writes", [1, 2], ids=["lone write", "group"])
async def test_a_failed_fsync_fails_its_writes_and_the_database_refuses_any_more(
    tmp_path: Path, gate: FsyncGate, writes: int
) -> None:
    database = await SqliteDatabase(tmp_path / "eio.db", sync="ack").open()
    try:
        gate.failing = True
        results = await asyncio.gather(
            *(database.write(_table(f"t{n}")) for n in range(writes)), return_exceptions=True
        )
        assert len(results) == writes
        for result in results:
            assert isinstance(result, StoreError)
            assert result.code == "STORE_UNAVAILABLE"
            assert "fsync" in str(result)
        gate.failing = False  # the disk came back: this process still trusts nothing
        with pytest.raises(StoreError, match="fsync"):
            await database.write(_table("after"))
        with pytest.raises(StoreError, match="fsync"):
            await database.check_readiness()
    finally:
        await database.close()


async def test_close_settles_the_writes_still_waiting_for_their_fsync(
    tmp_path: Path, gate: FsyncGate
) -> None:
    path = tmp_path / "close.db"
    database = await SqliteDatabase(path, sync="ack").open()
    gate.closed = True
    writes = asyncio.gather(database.write(_table("a")), database.write(_table("b")))
    assert await asyncio.to_thread(gate.entered.wait, STUCK)
    closing = asyncio.ensure_future(database.close())
    await _turns()
    assert not closing.done()  # it waits for the fsync, and so for the writes' answers
    gate.opened.set()
    await asyncio.wait_for(asyncio.gather(writes, closing), STUCK)
    reopened = await SqliteDatabase(path, sync="ack").open()
    try:
        assert await _tables(reopened) == ["a", "b"]
    finally:
        await reopened.close()


@pytest.mark.parametrize(("sync", "level"), [("ack", 1), ("commit", 2)])
async def test_the_sqlite_sync_setting_reaches_the_served_database(
    tmp_path: Path, sync: SqliteSync, level: int
) -> None:
    storage = await open_storage(Settings(database_path=str(tmp_path / "s.db"), sqlite_sync=sync))
    try:
        assert isinstance(storage.events, SqliteEventStore)
        pragma = await storage.events.database.read("PRAGMA synchronous")
        assert pragma[0][0] == level  # NORMAL, FULL
    finally:
        await storage.close()


def test_a_callback_that_raises_leaves_the_sync_thread_serving_the_next(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    wal = tmp_path / "lone.db-wal"
    wal.write_bytes(b"")
    sync = WalSync(str(wal))
    heard = threading.Event()

    def broken(result: float | StoreError, first: bool) -> None:
        raise RuntimeError

    try:
        sync.after_sync(broken)
        sync.after_sync(lambda result, first: heard.set())  # noqa: ARG005 - Synced's shape
        assert heard.wait(STUCK)
    finally:
        sync.close()
    assert "callback failed after its fsync" in caplog.text
