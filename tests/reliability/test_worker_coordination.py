"""What lets several processes share one store: the job lock, worker slots and the SQLite
change watcher (two ``SqliteDatabase`` objects on one file stand in for two processes; the
lock held by a killed process is a real subprocess)."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import fcntl
import logging
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pausemesh.core.errors import StoreError
from pausemesh.observability.telemetry import (
    COMMIT_SECONDS,
    WRITE_TURN_WAIT_SECONDS,
    MetricSpec,
    set_metrics,
)
from pausemesh.serving.workers import claim_slot
from pausemesh.stores import file_lock
from pausemesh.stores.file_lock import FileJobLock, FileLock, WriteTurn
from pausemesh.stores.postgres.job_lock import PostgresJobLock
from pausemesh.stores.sqlite import SqliteDatabase, SqliteThreadStore, changes, wal_watch
from pausemesh.stores.sqlite.wal_watch import watch_wal
from tests.support.head_reads import HeadReads
from tests.support.postgres import migrated_database

NOW = datetime.now(UTC)
# Liveness bound: only a stuck waiter gets near it (never a timing assertion).
STUCK = 30.0


async def test_only_one_of_two_file_job_locks_holds_until_it_is_closed(tmp_path: Path) -> None:
    first, second = FileJobLock(tmp_path / "a.db"), FileJobLock(tmp_path / "a.db")
    assert await first.try_hold()
    assert await first.try_hold()  # still ours
    assert not await second.try_hold()
    await first.close()
    assert await second.try_hold()
    assert not await first.try_hold()
    await second.close()


def test_a_killed_holder_frees_the_file_lock(tmp_path: Path) -> None:
    path = tmp_path / "jobs.lock"
    script = (
        "import time; from pausemesh.stores.file_lock import FileLock;"
        f" assert FileLock({str(path)!r}).try_acquire(); print('held', flush=True);"
        " time.sleep(600)"
    )
    holder = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == b"held"
        lock = FileLock(path)
        assert not lock.try_acquire()
        holder.kill()
        holder.wait(STUCK)
        assert lock.try_acquire()
        lock.release()
    finally:
        holder.kill()
        holder.wait(STUCK)
        assert holder.stdout is not None
        holder.stdout.close()


def test_one_write_turn_at_a_time_and_a_waiting_taker_gets_it_when_it_is_given(
    tmp_path: Path,
) -> None:
    first, second = WriteTurn(tmp_path / "a.db"), WriteTurn(tmp_path / "a.db")
    try:
        assert first.take()
        assert not second.take()
        assert not second.take(within=0.05)  # first keeps it: the wait ends, refused
        taken = threading.Event()

        def wait_for_the_turn() -> None:
            if second.take(within=STUCK):
                taken.set()

        waiter = threading.Thread(target=wait_for_the_turn)
        waiter.start()
        assert not taken.wait(0.2)  # still first's turn
        first.give()
        assert taken.wait(STUCK)
        waiter.join(STUCK)
        assert not first.take()
        second.give()
        assert first.take()
        first.give()
    finally:
        first.close()
        second.close()


def test_a_writer_taking_the_turn_again_lets_a_waiting_sibling_have_it_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer thread commits group after group; between two, a sibling that waits gets the
    turn (it would otherwise look again every half millisecond and miss it every time).

    The writer gives a waiting sibling a few of its looks (2 ms), then goes on: a sibling that
    stopped must not hold it up. On a loaded machine the sibling's thread may not run within
    2 ms (a four-worker test run saw it), so the bound is the liveness bound here: what is
    tested is that the writer lets the sibling in first, not how long it waits."""
    monkeypatch.setattr(file_lock, "_LET_IN", STUCK)
    first, second = WriteTurn(tmp_path / "a.db"), WriteTurn(tmp_path / "a.db")
    order: list[str] = []

    def wait_for_the_turn() -> None:
        if second.take(within=STUCK):
            order.append("second")
            second.give()

    try:
        assert first.take()
        waiter = threading.Thread(target=wait_for_the_turn)
        waiter.start()
        _until_a_writer_waits(tmp_path / "a.db.write.wait")
        first.give()
        assert first.take(within=STUCK)  # at once, as the next group would
        order.append("first")
        first.give()
        waiter.join(STUCK)
        assert order == ["second", "first"]
    finally:
        first.close()
        second.close()


def _until_a_writer_waits(wait_file: Path) -> None:
    """Until some ``WriteTurn`` has said it waits (its shared lock on the wait file)."""
    probe = os.open(wait_file, os.O_RDWR)
    try:
        for _ in range(int(STUCK / 0.001)):
            try:
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return
            fcntl.flock(probe, fcntl.LOCK_UN)
            time.sleep(0.001)
        pytest.fail("the waiting writer never said it waits")
    finally:
        os.close(probe)


async def test_a_write_waits_for_another_process_turn_and_commits_once_it_is_given(
    tmp_path: Path,
) -> None:
    """A lone write does not block the loop while another process has the turn: the writer
    thread waits for it, and the write commits as soon as it is given."""
    database = await SqliteDatabase(tmp_path / "turns.db").open()
    other = WriteTurn(tmp_path / "turns.db")  # another process's turn on the same file
    try:
        assert other.take()
        write = asyncio.ensure_future(
            database.write(lambda conn: conn.execute("CREATE TABLE t (x INTEGER)"))
        )
        await asyncio.sleep(0.2)  # the loop keeps running meanwhile
        assert not write.done()
        other.give()
        await asyncio.wait_for(write, STUCK)
        assert await database.read("SELECT count(*) FROM t") == [(0,)]
        assert other.take()  # the writer gave the turn back after its commit
        other.give()
    finally:
        other.close()
        await database.close()


class _Observed:
    """A metrics sink that keeps every histogram observation by metric name."""

    def __init__(self) -> None:
        self.values: dict[str, list[float]] = {}

    def inc(self, spec: MetricSpec, labels: tuple[str, ...], amount: float) -> None:
        pass

    def observe(self, spec: MetricSpec, labels: tuple[str, ...], value: float) -> None:
        self.values.setdefault(spec.name, []).append(value)


async def test_the_time_a_write_waited_for_another_process_turn_is_its_turn_wait_not_its_commit(
    tmp_path: Path,
) -> None:
    """Operators tell contention between workers from a slow disk: the wait for a sibling's
    turn is ``pausemesh_store_write_turn_wait_seconds``, and the commit time starts after it."""
    observed = _Observed()
    set_metrics(observed)  # before open: the writer task observes in the context it starts in
    database = await SqliteDatabase(tmp_path / "turns.db").open()
    other = WriteTurn(tmp_path / "turns.db")
    held = 0.3
    try:
        assert other.take()
        observed.values.clear()  # the migration's own commit is not this write's
        write = asyncio.ensure_future(
            database.write(lambda conn: conn.execute("CREATE TABLE t (x INTEGER)"))
        )
        # The writer thread says it waits once it has asked for the turn.
        await asyncio.to_thread(_until_a_writer_waits, tmp_path / "turns.db.write.wait")
        seen_waiting_at = time.monotonic()
        await asyncio.sleep(held)
        given_at = time.monotonic()
        other.give()
        await asyncio.wait_for(write, STUCK)
        finished_at = time.monotonic()
    finally:
        other.close()
        await database.close()
    waits = observed.values[WRITE_TURN_WAIT_SECONDS.name]
    commits = observed.values[COMMIT_SECONDS.name]
    # One inline try that found the turn taken observes nothing; the writer thread's group
    # waited at least as long as the turn was held after it asked, and committed after that.
    assert len(waits) == len(commits) == 1
    assert waits[0] >= given_at - seen_waiting_at
    assert commits[0] <= finished_at - given_at


async def test_a_write_is_store_busy_when_another_process_keeps_the_turn(tmp_path: Path) -> None:
    """A hung holder (a stopped process) costs the busy timeout and a ``STORE_BUSY``, as
    SQLite's own lock would; nothing is written."""
    database = await SqliteDatabase(tmp_path / "turns.db", busy_timeout_ms=200).open()
    other = WriteTurn(tmp_path / "turns.db")
    try:
        assert other.take()
        with pytest.raises(StoreError) as caught:
            await database.write(lambda conn: conn.execute("CREATE TABLE t (x INTEGER)"))
        assert caught.value.code == "STORE_BUSY"
        other.give()
        assert await database.read("SELECT name FROM sqlite_master WHERE name = 't'") == []
    finally:
        other.close()
        await database.close()


def test_workers_claim_distinct_slots_and_a_freed_slot_is_claimed_again(tmp_path: Path) -> None:
    first = claim_slot(tmp_path, "host:8787", 2)
    second = claim_slot(tmp_path, "host:8787", 2)
    assert {first.index, second.index} == {0, 1}
    other_server = claim_slot(tmp_path, "host:8788", 2)
    assert other_server.index == 0
    first._lock.release()
    assert claim_slot(tmp_path, "host:8787", 2).index == first.index


@pytest.mark.postgres
async def test_only_one_postgres_job_lock_holds_until_its_session_ends() -> None:
    async with migrated_database() as database:
        first, second = PostgresJobLock(database), PostgresJobLock(database)
        try:
            assert await first.try_hold()
            assert await first.try_hold()
            assert not await second.try_hold()
            await first.close()
            assert await second.try_hold()
        finally:
            await first.close()
            await second.close()


@pytest.fixture(name="two_processes", params=["wal-events", "timer"])
async def two_processes_fixture(
    tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[SqliteThreadStore, SqliteThreadStore]]:
    """Two stores on one file; ``timer``: where the kernel gives no word of WAL writes."""
    if request.param == "timer":
        monkeypatch.setattr(changes, "watch_wal", lambda _path: None)
    async with _two_stores(tmp_path) as stores:
        yield stores


@contextlib.asynccontextmanager
async def _two_stores(
    directory: Path,
) -> AsyncIterator[tuple[SqliteThreadStore, SqliteThreadStore]]:
    """Two thread stores on one SQLite file, as two processes have."""
    databases = [await SqliteDatabase(directory / "shared.db").open() for _ in range(2)]
    stores = SqliteThreadStore(databases[0]), SqliteThreadStore(databases[1])
    try:
        yield stores
    finally:
        for store in stores:
            await store.close()  # its watcher and notifier (the database is ours to close)
        for database in databases:
            await database.close()


async def _leased(store: SqliteThreadStore, thread_id: str) -> None:
    await store.create_or_load(thread_id, owner=None, now=NOW)
    await store.acquire_lease(
        thread_id, lease_id="L", run_id="r", now=NOW, expires_at=NOW + timedelta(hours=1)
    )


async def test_a_sqlite_tail_is_woken_by_an_append_another_process_committed(
    two_processes: tuple[SqliteThreadStore, SqliteThreadStore],
) -> None:
    a, b = two_processes
    for thread_id in ("t1", "t2"):
        await _leased(b, thread_id)
    t1 = asyncio.create_task(a.wait_for_events("t1", after_sequence=0, wait_seconds=STUCK * 2))
    t2 = asyncio.create_task(a.wait_for_events("t2", after_sequence=0, wait_seconds=STUCK * 2))
    await asyncio.sleep(0)  # both wait
    await b.append_events("t1", lease_id="L", run_id="r", events=['{"type":"RUN_STARTED"}'])
    async with asyncio.timeout(STUCK):
        assert await t1
    assert not t2.done()  # only the thread that changed was woken
    await b.append_events("t2", lease_id="L", run_id="r", events=["{}", "{}"])
    async with asyncio.timeout(STUCK):
        assert await t2
    assert [e.sequence for e in await a.read_events("t2", after_sequence=0)] == [1, 2]


@pytest.mark.parametrize("appender", ["this process", "another process"])
async def test_a_woken_sqlite_tail_takes_the_head_from_the_word_that_woke_it(
    two_processes: tuple[SqliteThreadStore, SqliteThreadStore],
    monkeypatch: pytest.MonkeyPatch,
    appender: str,
) -> None:
    """Its own process's append, or the change watcher's look after another's, reports how
    far the thread now goes: a thousand woken tails need not read it again."""
    a, b = two_processes
    await _leased(b if appender == "another process" else a, "t1")
    writer = b if appender == "another process" else a
    reads = HeadReads(a, monkeypatch)
    tails = [
        asyncio.create_task(a.wait_for_events("t1", after_sequence=0, wait_seconds=STUCK * 2))
        for _ in range(20)
    ]
    async with asyncio.timeout(STUCK):
        while reads.count == 0:  # noqa: ASYNC110 - polls state owned by the tails
            await asyncio.sleep(0)
    await asyncio.sleep(0.01)  # every tail waits
    assert reads.count == 1  # their check before waiting, shared
    await writer.append_events("t1", lease_id="L", run_id="r", events=["{}", "{}"])
    async with asyncio.timeout(STUCK):
        assert await asyncio.gather(*tails) == [True] * 20
    assert reads.count == 1


async def test_the_wal_watch_is_readable_once_another_connection_commits(tmp_path: Path) -> None:
    database = await SqliteDatabase(tmp_path / "wal.db").open()
    other = sqlite3.connect(tmp_path / "wal.db", isolation_level=None)
    watch = watch_wal(database.path)
    assert watch is not None  # Linux, a file path, the log exists while the database is open
    try:
        readable = asyncio.Event()
        loop = asyncio.get_running_loop()

        def on_readable() -> None:
            if watch.drain():
                readable.set()

        loop.add_reader(watch.fd, on_readable)
        try:
            await asyncio.sleep(0.1)
            assert not readable.is_set()  # nothing written
            other.execute("CREATE TABLE t (x INTEGER)")
            await asyncio.wait_for(readable.wait(), STUCK)
            readable.clear()
            await asyncio.sleep(0.1)
            assert not readable.is_set()  # drained: quiet until the next write
            other.execute("INSERT INTO t VALUES (1)")
            await asyncio.wait_for(readable.wait(), STUCK)
        finally:
            loop.remove_reader(watch.fd)
    finally:
        watch.close()
        other.close()
        await database.close()


async def test_a_watcher_on_wal_events_stops_looking_once_settled_while_nothing_is_written(
    two_processes: tuple[SqliteThreadStore, SqliteThreadStore],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b = two_processes
    looks = 0
    poll = changes.ChangeWatcher.poll

    def counted(watcher: changes.ChangeWatcher) -> int:
        nonlocal looks
        looks += 1
        return poll(watcher)

    monkeypatch.setattr(changes.ChangeWatcher, "poll", counted)
    # Its looks after the start end after 0.1 s (looks at 20, 40 and 80 ms, then 160).
    monkeypatch.setattr(changes, "SETTLE_SECONDS", 0.1)
    await _leased(b, "t1")
    waiting = asyncio.create_task(a.wait_for_events("t1", after_sequence=0, wait_seconds=STUCK * 2))
    await asyncio.sleep(0)  # it waits: the watcher started
    # The fixture's ``timer`` case patches the module's watch_wal away.
    on_words = vars(changes)["watch_wal"] is watch_wal
    async with asyncio.timeout(STUCK):
        while on_words and a._watcher._timer is not None:  # noqa: ASYNC110 - polls the loop's timers: no look is due
            await asyncio.sleep(0.05)
    settled = looks
    await asyncio.sleep(0.3)  # the timer would look about 15 times meanwhile
    quiet = looks - settled
    await b.append_events("t1", lease_id="L", run_id="r", events=["{}"])
    async with asyncio.timeout(STUCK):
        assert await waiting
    if on_words:  # the kernel's word: once settled, no look until a write
        assert 0 < settled <= 4  # the start's looks: 20, 40, 80, 160 ms
        assert quiet == 0
    else:
        assert quiet > 0


FALLBACK = "the SQLite change watcher looks every 20 ms instead"


class _RefusingLibc:
    """A C library whose ``inotify_init1`` fails as at the per-user instance limit."""

    def inotify_init1(self, _flags: int) -> int:
        ctypes.set_errno(errno.EMFILE)
        return -1


async def test_a_refused_wal_watch_is_said_once_and_the_timer_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    database = await SqliteDatabase(tmp_path / "refused.db").open()
    monkeypatch.setattr(wal_watch, "_libc", _RefusingLibc)
    monkeypatch.setattr(wal_watch, "_said", [])
    try:
        with caplog.at_level(logging.WARNING, logger="pausemesh.stores"):
            assert wal_watch.watch_wal(database.path) is None
            assert wal_watch.watch_wal(database.path) is None
        said = [r.getMessage() for r in caplog.records if "inotify refused" in r.getMessage()]
        assert said == [f"inotify refused ({os.strerror(errno.EMFILE)}): {FALLBACK}"]
    finally:
        await database.close()


async def test_a_sqlite_tail_is_woken_when_a_look_came_before_the_commit_was_visible(
    tmp_path: Path,
) -> None:
    """The kernel's word comes when a commit's frames are written to the log; the commit is
    visible only later (with ``synchronous=FULL`` its fsync lies between). A look in between
    takes the word and finds nothing, and no later write need come: here the word is taken
    (drained) while the loop cannot look, as such a look would have taken it."""
    async with _two_stores(tmp_path) as (a, b):
        await _leased(b, "t1")
        waiting = asyncio.create_task(
            a.wait_for_events("t1", after_sequence=0, wait_seconds=STUCK * 2)
        )
        await asyncio.sleep(0)  # it waits, and the watcher runs on the kernel's word
        watch = a._watcher._wal  # the word this test takes away
        if watch is None:
            pytest.skip("no inotify here: the watcher's timer looks every tick anyway")
        loop = asyncio.get_running_loop()
        loop.remove_reader(watch.fd)
        try:
            await b.append_events("t1", lease_id="L", run_id="r", events=["{}"])
            assert watch.drain()  # the commit's word, taken
        finally:
            loop.add_reader(watch.fd, a._watcher._written)
        async with asyncio.timeout(STUCK):
            assert await waiting
