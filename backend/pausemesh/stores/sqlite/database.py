"""The embedded SQLite database (aiosqlite): WAL, durable before acknowledged, group commit.

``SqliteDatabase`` owns two connections on one file: a writer, on which concurrent write
operations of this process are grouped into one ``BEGIN IMMEDIATE … COMMIT`` (each inside
its own SAVEPOINT, so one operation's CAS failure never touches another's), and a reader.
Other processes on the same file take turns through ``WriteTurn`` and SQLite's lock.
No write is acknowledged before its commit is on disk: by default (``sync="commit"``) with
``synchronous=FULL``, the fsync inside ``COMMIT``; with ``sync="ack"`` the ``-wal`` file is
fsynced after the write turn is given back (``wal_sync.py``), for several worker processes.
The migration ledger is applied on open (``_apply_migrations``) and checked for readiness.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import sqlite3
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

import aiosqlite

from pausemesh.core.errors import PauseMeshError, StoreError
from pausemesh.observability.telemetry import (
    COMMIT_GROUP_SIZE,
    COMMIT_SECONDS,
    WAL_SYNC_SECONDS,
    WRITE_TURN_WAIT_SECONDS,
    handed_context,
    leaf_span,
    observe,
)
from pausemesh.stores.backoff import attempts
from pausemesh.stores.file_lock import WriteTurn
from pausemesh.stores.migrations import Migration, check_ledger
from pausemesh.stores.private_files import private_database_file
from pausemesh.stores.sqlite.schema import SQLITE_MIGRATIONS
from pausemesh.stores.sqlite.wal_sync import WalSync

__all__ = ("GroupInsert", "SqliteDatabase", "SqliteSync")

T = TypeVar("T")
WriteOp = Callable[[sqlite3.Connection], Any]

_MAX_GROUP = 256

# A lone write commits on the loop's thread only while recent commits (with their fsync) took
# less than this: a thread hop (about 0.1 ms) costs more than such a commit, but a commit that
# takes longer (a loaded disk's fsync: 2-30 ms measured on the development VM) would hold every
# other request of the process meanwhile, so it goes to the writer thread. Each commit
# afterwards lowers the estimate by ``_COMMIT_ESTIMATE_DECAY`` (at most, a slow one raises it
# at once): some ten fast commits after a 10 ms one, lone writes commit inline again.
INLINE_COMMIT_BUDGET = 0.001
_COMMIT_ESTIMATE_DECAY = 0.75

_log = logging.getLogger("pausemesh.stores")

# When a commit reaches the disk: inside ``COMMIT`` with the turn held (``commit``: FULL, the
# default), or after the write turn is given back, before any caller hears (``ack``).
SqliteSync = Literal["ack", "commit"]


def _connect_raw(
    path: str, busy_timeout_ms: int, synchronous: str = "FULL"
) -> Callable[[], sqlite3.Connection]:
    def connector() -> sqlite3.Connection:
        conn = sqlite3.connect(
            path,
            timeout=busy_timeout_ms / 1000,
            isolation_level=None,  # we issue BEGIN/COMMIT ourselves
            check_same_thread=False,
            cached_statements=256,
        )
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        conn.execute("PRAGMA journal_mode = WAL")
        # Durability is explicit, never the build's default: FULL fsyncs inside every COMMIT;
        # NORMAL only with a WalSync that fsyncs before any write is acknowledged.
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        # A deleted or rewritten row is zeroed in its page, not left in free space: an erased
        # conversation leaves no readable copy in the file (``truncate_wal`` clears the log).
        conn.execute("PRAGMA secure_delete = ON")
        return conn

    return connector


def _is_busy(error: sqlite3.Error) -> bool:
    return "locked" in str(error) or "busy" in str(error)


def _run_op(conn: sqlite3.Connection, op: WriteOp) -> tuple[bool, Any]:
    try:
        return True, op(conn)
    except PauseMeshError as error:
        return False, error
    except sqlite3.Error as error:
        return False, _store_error(error)


def _store_error(error: sqlite3.Error) -> StoreError:
    code = "STORE_BUSY" if _is_busy(error) else "STORE_UNAVAILABLE"
    return StoreError(f"SQLite operation failed: {type(error).__name__}", code=code)


def _in_snapshot(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    """``fn(conn)`` inside one read transaction: every statement (and blob) it reads sees the
    same snapshot."""
    try:
        conn.execute("BEGIN")
        try:
            return fn(conn)
        finally:
            conn.execute("COMMIT")  # a read transaction: this only ends the snapshot
    except sqlite3.Error as error:
        raise _store_error(error) from error


def _settle(pending: _Pending, result: tuple[bool, Any]) -> None:
    if pending.future.done():  # the caller went away; its write still happened (or not)
        return
    ok, value = result
    if ok:
        pending.future.set_result(value)
    else:
        pending.future.set_exception(value)


class _Pending:
    __slots__ = ("future", "large", "op", "rows", "trace")

    def __init__(
        self,
        op: WriteOp,
        future: asyncio.Future[Any],
        *,
        large: bool = False,
        rows: GroupRows | None = None,
    ) -> None:
        self.op = op
        self.future = future
        # Rows the group inserts after its ops if ``op`` succeeded (``GroupInsert``).
        self.rows = rows
        # Writes megabytes: never run inline on the loop thread (see ``write``).
        self.large = large
        # The caller's trace: a group's commit on the writer thread is a child of its first
        # caller's span (an inline commit is one already, in the caller's context).
        self.trace = handed_context()


def _apply_migrations(conn: sqlite3.Connection, migrations: Sequence[Migration]) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS pausemesh_schema_migrations ("
            " version INTEGER PRIMARY KEY CHECK (version > 0),"
            " name TEXT NOT NULL, checksum TEXT NOT NULL, applied_at TEXT NOT NULL) STRICT"
        )
        applied = {
            row[0]: (row[1], row[2])
            for row in conn.execute(
                "SELECT version, name, checksum FROM pausemesh_schema_migrations"
            )
        }
        for migration in check_ledger(applied, migrations):
            for statement in migration.statements:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO pausemesh_schema_migrations VALUES (?, ?, ?, datetime('now'))",
                (migration.version, migration.name, migration.checksum),
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


class GroupInsert:
    """An INSERT whose rows the writes of one group share (``SqliteDatabase.write(rows=...)``):
    the group runs it once, after its ops, with the rows of every op that succeeded, as one
    multi-row statement. A row per write as its own statement (an ``executemany`` in each op)
    cost the writer thread a statement per write, each step taking and giving back the GIL the
    loop needs (issue 45: the outbox row of each pause's webhook)."""

    __slots__ = ("_head", "_row", "_sql", "_tail", "width")

    # SQLite binds at most 32,766 parameters in one statement (since 3.32).
    _MAX_ROWS = 512

    def __init__(self, head: str, width: int, tail: str = "") -> None:
        self._head = head
        self._row = "(" + ", ".join("?" * width) + ")"
        self._tail = tail
        self.width = width
        self._sql: dict[int, str] = {}

    def run(self, conn: sqlite3.Connection, rows: Sequence[Sequence[Any]]) -> None:
        for start in range(0, len(rows), self._MAX_ROWS):
            chunk = rows[start : start + self._MAX_ROWS]
            sql = self._sql.get(len(chunk))
            if sql is None:
                sql = self._sql[len(chunk)] = (
                    f"{self._head} VALUES {', '.join([self._row] * len(chunk))}{self._tail}"
                )
            conn.execute(sql, [value for row in chunk for value in row])


GroupRows = tuple[GroupInsert, Sequence[Sequence[Any]]]


def _insert_group_rows(
    conn: sqlite3.Connection, group: Sequence[_Pending], results: list[tuple[bool, Any]]
) -> None:
    """The ``GroupInsert`` rows of the group's writes that succeeded, one statement each."""
    by_insert: dict[GroupInsert, list[Sequence[Any]]] = {}
    for pending, (ok, _) in zip(group, results, strict=True):
        if ok and pending.rows is not None:
            insert, rows = pending.rows
            by_insert.setdefault(insert, []).extend(rows)
    for insert, rows in by_insert.items():
        insert.run(conn, rows)


def _writer_failed(error: BaseException) -> StoreError:
    return StoreError(f"SQLite writer failed: {error!r}")


@dataclass(frozen=True, slots=True)
class _GroupRun:
    """What running a group gave: its results (None: declined inline), how long it waited
    for the write turn and then took from BEGIN to COMMIT (seconds; None if it never began),
    whether it committed, and how long the fsync that made it durable took (``sync="ack"``)."""

    results: list[tuple[bool, Any]] | None
    waited: float | None = None
    seconds: float | None = None
    committed: bool = False
    synced: float | None = None


def _synced(run: _GroupRun, result: float | StoreError, first: bool = True) -> _GroupRun:
    """``run`` once the fsync that covers it returned: a failed fsync fails every write of
    the group (its commit may not be on disk). Only the ``first`` group an fsync covered
    carries its time to the metrics."""
    if isinstance(result, StoreError):
        assert run.results is not None  # noqa: S101 - only committed groups are synced
        return replace(run, results=[(False, result)] * len(run.results))
    return replace(run, synced=result) if first else run


def _settle_synced(
    post: Callable[..., object],
    group: list[_Pending],
    run: _GroupRun,
    result: float | StoreError,
    first: bool,
) -> None:
    """On the sync thread: the group's results to the loop, now that they are on disk."""
    synced = _synced(run, result, first)
    with contextlib.suppress(RuntimeError):  # a loop closed meanwhile has no callers left
        post(_settle_group, group, synced)


def _settle_group(group: list[_Pending], run: _GroupRun) -> None:
    """On the loop: a group's results to its callers, and what it took to the metrics."""
    if run.waited is not None:
        observe(WRITE_TURN_WAIT_SECONDS, run.waited)
    if run.seconds is not None:
        observe(COMMIT_SECONDS, run.seconds, "sqlite")
        observe(COMMIT_GROUP_SIZE, len(group), "sqlite")
    if run.synced is not None:
        observe(WAL_SYNC_SECONDS, run.synced)
    assert run.results is not None  # noqa: S101 - a declined group is never settled (see _drain)
    for pending, result in zip(group, run.results, strict=True):
        _settle(pending, result)


class SqliteDatabase:
    """One SQLite file: a grouped writer, a reader, and the migration ledger."""

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout_ms: int = 5000,
        migrations: Sequence[Migration] = SQLITE_MIGRATIONS,
        sync: SqliteSync = "commit",
        inline_commit_budget: float = INLINE_COMMIT_BUDGET,
    ) -> None:
        self.path = str(path)
        # 0: every write goes to the writer thread; ``math.inf``: a lone write always inline.
        self._inline_budget = inline_commit_budget
        # What a commit has lately cost, fsync included (seconds; see INLINE_COMMIT_BUDGET).
        self._commit_estimate = 0.0
        # How long the last COMMIT statement took (on the thread that ran it).
        self._commit_took = 0.0
        self._busy_timeout_ms = busy_timeout_ms
        # A ``file:`` URI names no ``-wal`` file this process could fsync: FULL there.
        self.sync: SqliteSync = "commit" if self.path.startswith("file:") else sync
        self._wal_sync: WalSync | None = None
        self._migrations = tuple(migrations)
        self._writer: aiosqlite.Connection | None = None
        self._reader: sqlite3.Connection | None = None
        # ``read_large``: its own connection (made on first use) on its own thread.
        self._large_connect: Callable[[], sqlite3.Connection] | None = None
        self._large_conn: sqlite3.Connection | None = None
        self._large_pool: ThreadPoolExecutor | None = None
        self._raw_writer: sqlite3.Connection | None = None
        # Appended on the loop, taken on the writer thread (deque: both ends thread-safe).
        self._queue: deque[_Pending] = deque()
        self._wakeup = asyncio.Event()
        self._flush_scheduled = False
        self._group_in_flight = False
        # Committed write transactions of this process (observability; group commit shows
        # as fewer commits than writes).
        self.commits = 0
        self._writer_task: asyncio.Task[None] | None = None
        self._closed = False
        self._read_only = False
        self._turn: WriteTurn | None = None

    async def open(self) -> SqliteDatabase:
        if self.path == ":memory:" or "mode=memory" in self.path:
            # The writer and the reader are two connections: they would see two databases.
            msg = "SqliteDatabase needs a file; use InMemoryEventStore for a store in memory"
            raise ValueError(msg)
        if not self.path.startswith("file:"):
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            # Created 0600 before SQLite opens it: its -wal and -shm files take its mode.
            private_database_file(self.path)
            self._turn = WriteTurn(self.path)
        raw_connect = _connect_raw(
            self.path, self._busy_timeout_ms, "NORMAL" if self.sync == "ack" else "FULL"
        )
        holder: list[sqlite3.Connection] = []

        def writer_connector() -> sqlite3.Connection:
            conn = raw_connect()
            holder.append(conn)
            return conn

        try:
            self._writer = await aiosqlite.Connection(writer_connector, 64)
            self._raw_writer = holder[0]
            await self._run_in_writer(_apply_migrations, self._raw_writer, self._migrations)
            if self.sync == "ack":
                # The -wal file exists once the writer has used it; the migrations' commit
                # is made durable here like any other.
                self._wal_sync = WalSync(self.path + "-wal")
                self._wal_sync.sync()
            # From here on the writer waits for other processes in _begin, not in SQLite.
            self._raw_writer.execute("PRAGMA busy_timeout = 0")
            # Reads run on the event loop thread: a WAL point read on an index takes tens of
            # microseconds, less than a thread hop, and WAL readers never wait for writers.
            self._reader = raw_connect()
            self._large_connect = raw_connect
        except sqlite3.Error as error:
            await self.close()
            raise _store_error(error) from error
        except OSError as error:  # the -wal file could not be opened
            await self.close()
            msg = f"SQLite write-ahead log unavailable: {error.strerror or error!r}"
            raise StoreError(msg) from error
        except BaseException:
            await self.close()
            raise
        self._writer_task = asyncio.create_task(self._write_loop(), name="pausemesh-sqlite-writer")
        return self

    async def open_read_only(self) -> SqliteDatabase:
        """Open for reading only (``pausemesh inspect``, ``stats``): no writer, no migration.

        The file is opened with ``mode=ro``; a missing file or a schema whose migration
        ledger is not exactly this code's is ``MIGRATION_REQUIRED`` (or the ledger's own
        code), and every ``write`` is refused.
        """
        self._connect_read_only()
        return self

    def _connect_read_only(self) -> None:
        if not Path(self.path).is_file():
            msg = f"no PauseMesh database at {self.path}"
            raise StoreError(msg, code="MIGRATION_REQUIRED")
        uri = f"{Path(self.path).resolve().as_uri()}?mode=ro"
        try:
            self._reader = sqlite3.connect(
                uri, uri=True, isolation_level=None, check_same_thread=False
            )
            self._reader.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
            rows = self._reader.execute(
                "SELECT name FROM sqlite_master WHERE name = 'pausemesh_schema_migrations'"
            ).fetchall()
            applied = (
                {}
                if not rows
                else {
                    row[0]: (row[1], row[2])
                    for row in self._reader.execute(
                        "SELECT version, name, checksum FROM pausemesh_schema_migrations"
                    )
                }
            )
        except sqlite3.Error as error:
            self._reader_close()
            raise _store_error(error) from error
        try:
            missing = check_ledger(applied, self._migrations)
        except StoreError:
            self._reader_close()
            raise
        if missing:
            self._reader_close()
            msg = f"{self.path} needs migration {missing[0].version}; serve it once to migrate"
            raise StoreError(msg, code="MIGRATION_REQUIRED")
        self._read_only = True

    def _reader_close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    async def _run_in_writer(self, fn: Callable[..., T], *args: Any) -> T:
        assert self._writer is not None  # noqa: S101 - only called once open
        # aiosqlite's public API costs one thread hop per statement; a whole group of
        # operations runs in a single hop on its worker thread instead.
        execute = cast("Callable[..., Awaitable[T]]", self._writer._execute)  # noqa: SLF001
        return await execute(fn, *args)

    def _require_open(self) -> None:
        if self._read_only and not self._closed:
            return
        if self._closed or self._writer_task is None:
            msg = "SQLite store is not open"
            raise StoreError(msg, code="STORE_UNAVAILABLE")
        if self._wal_sync is not None and self._wal_sync.failed is not None:
            raise self._wal_sync.failed

    async def write(
        self,
        op: Callable[[sqlite3.Connection], T],
        *,
        large: bool = False,
        rows: GroupRows | None = None,
    ) -> T:
        """Run ``op`` inside the next group transaction; resolve once it is committed.

        ``op`` runs inside its own SAVEPOINT: if it raises, only its own writes are rolled
        back and the error is raised here. Operations queued in the same loop iteration
        share one transaction and one COMMIT. ``large``: the op writes megabytes (a long
        thread's transcript), so it goes to the writer thread even alone, where SQLite checks
        and writes it with the GIL released, instead of holding the loop thread meanwhile.
        ``rows``: rows inserted in the same transaction if ``op`` succeeds, in one statement
        with those of the group's other writes (``GroupInsert``).
        """
        self._require_open()
        if self._read_only:
            msg = "this SQLite database was opened read-only"
            raise StoreError(msg, code="STORE_READ_ONLY")
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._queue.append(_Pending(op, future, large=large, rows=rows))
        if not self._group_in_flight and not self._flush_scheduled:
            # Let every task that is ready to write this iteration join the group first.
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)
        return await future

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._group_in_flight or not self._queue or self._closed:
            if self._closed:
                self._wakeup.set()
            return
        if len(self._queue) == 1 and self._inline_ok(self._queue[0]):
            # A lone write commits right here while commits are fast: a thread hop costs more
            # than the SQL and the fsync of one small transaction. Under load groups grow and
            # go to the writer thread, and so does every write while the disk is slow, so the
            # loop keeps serving meanwhile.
            pending = self._queue[0]
            began = time.perf_counter()
            with leaf_span("store.commit", store="sqlite", group_size=1, inline=True):
                run = self._run_group([pending], inline=True)
            if run.results is not None:
                # Synced inline too: a thread hop would cost more than the fsync it waits for.
                synced = self._synced_now(run)
                if run.committed:
                    self._note_commit(time.perf_counter() - began)
                _settle_group([self._queue.popleft()], synced)
                return
        self._group_in_flight = True
        self._wakeup.set()

    async def read(self, sql: str, params: Iterable[Any] = ()) -> list[Any]:
        """Run a short indexed read (see ``open``: it does not leave the loop thread)."""
        return self.read_now(sql, params)

    def read_now(self, sql: str, params: Iterable[Any] = ()) -> list[Any]:
        """``read`` from a plain callback of the loop (no coroutine needed: it never waits)."""
        self._require_open()
        assert self._reader is not None  # noqa: S101 - guarded by _require_open
        try:
            return self._reader.execute(sql, tuple(params)).fetchall()
        except sqlite3.Error as error:
            raise _store_error(error) from error

    async def read_snapshot(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run a few short indexed reads ``fn`` on the loop's reader inside one read
        transaction: every statement sees the same snapshot (a thread row and its messages)."""
        self._require_open()
        assert self._reader is not None  # noqa: S101 - guarded by _require_open
        return _in_snapshot(self._reader, fn)

    async def read_large(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run the read ``fn`` on a connection and a thread of their own, inside one read
        transaction (one snapshot): for rows of megabytes, which ``Blob.read`` copies with the
        GIL released while the loop goes on (a plain ``SELECT`` builds the value holding it).

        Large reads of this process go one at a time. Opened read-only (``inspect``), ``fn``
        runs on the reader, on the caller's thread.
        """
        self._require_open()
        if self._read_only:
            assert self._reader is not None  # noqa: S101 - set by open_read_only
            return _in_snapshot(self._reader, fn)
        if self._large_pool is None:
            self._large_pool = ThreadPoolExecutor(1, thread_name_prefix="pausemesh-sqlite-large")
        return await asyncio.get_running_loop().run_in_executor(
            self._large_pool, self._read_large, fn
        )

    def _read_large(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._large_conn is None:
            assert self._large_connect is not None  # noqa: S101 - set in open()
            try:
                self._large_conn = self._large_connect()
            except sqlite3.Error as error:
                raise _store_error(error) from error
        return _in_snapshot(self._large_conn, fn)

    def _close_large(self) -> None:
        if self._large_conn is not None:
            self._large_conn.close()
            self._large_conn = None

    async def _write_loop(self) -> None:
        loop = asyncio.get_running_loop()
        # The context the commits' metrics are observed in (this task's: the app's sink).
        context = contextvars.copy_context()
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._queue:
                self._group_in_flight = True
                try:
                    await self._run_in_writer(self._drain, loop, context)
                except BaseException as error:  # the writer thread itself failed
                    failed = _writer_failed(error)
                    while self._queue:
                        _settle(self._queue.popleft(), (False, failed))
                    if not isinstance(error, Exception):
                        raise
            self._group_in_flight = False
            if self._closed:
                return

    def _drain(self, loop: asyncio.AbstractEventLoop, context: contextvars.Context) -> None:
        """On the writer thread: commit groups until the queue is empty.

        The next group starts as soon as the previous one is committed, not after the loop has
        taken the results back: each group's results go to the loop on their own, so a busy
        loop never holds up the next commit. With ``sync="ack"`` it does not wait for the
        previous group's fsync either when it is already queued (see ``wal_sync.py``).
        """
        queue = self._queue
        # Hands a callback to the loop, run in the context the metrics are observed in.
        post = partial(loop.call_soon_threadsafe, context=context)
        while queue:
            group = [queue.popleft() for _ in range(min(len(queue), _MAX_GROUP))]
            try:
                with leaf_span(
                    "store.commit", parent=group[0].trace, store="sqlite", group_size=len(group)
                ):
                    run = self._run_group(group)
            except BaseException as error:
                post(_settle_group, group, _GroupRun([(False, _writer_failed(error))] * len(group)))
                if not isinstance(error, Exception):
                    raise
                continue
            assert run.results is not None  # noqa: S101 - only inline runs can decline
            if queue and self._wal_sync is not None and run.committed:
                # The next group begins now; this one's callers hear once the fsync that
                # covers it (and any group committed meanwhile) has returned.
                self._wal_sync.after_sync(partial(_settle_synced, post, group, run))
                self._note_commit(self._commit_took)
            else:  # nothing waits (or nothing to sync): no hop to the sync thread
                synced = self._synced_now(run)
                if run.committed:
                    # The COMMIT alone (and its fsync), not the group's statements nor the
                    # GIL waits of a thread beside a busy loop: what a lone write would cost.
                    self._note_commit(self._commit_took + (synced.synced or 0.0))
                post(_settle_group, group, synced)

    @property
    def writer_busy(self) -> bool:
        """Whether the writer thread holds or awaits a group: a write queued meanwhile joins
        the next group on that thread, never inline."""
        return self._group_in_flight

    def _inline_ok(self, pending: _Pending) -> bool:
        """Whether ``pending``, alone, may commit on the loop's thread (see ``_flush``)."""
        return not pending.large and self._commit_estimate < self._inline_budget

    def _note_commit(self, seconds: float) -> None:
        """A durable commit took ``seconds`` (see ``INLINE_COMMIT_BUDGET``). On the loop's
        thread or the writer's, never both at once (inline only with no group in flight)."""
        self._commit_estimate = max(seconds, self._commit_estimate * _COMMIT_ESTIMATE_DECAY)

    def _synced_now(self, run: _GroupRun) -> _GroupRun:
        """``run`` made durable on this thread when ``sync="ack"`` left that to us."""
        if self._wal_sync is None or not run.committed:
            return run
        return _synced(run, self._wal_sync.sync_or_error())

    def _begin(self, conn: sqlite3.Connection, *, wait: bool) -> bool:
        """``BEGIN IMMEDIATE``; another process may hold the write lock.

        The writer connection's own busy timeout is 0 so that an inline (loop-thread) write
        never blocks the loop; the writer thread instead retries here until the timeout.
        """
        busy: sqlite3.OperationalError | None = None
        for _ in attempts(self._busy_timeout_ms / 1000 if wait else 0.0, 0.001, 0.05):
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as error:
                if not _is_busy(error):
                    raise
                busy = error
                continue
            return True
        if wait and busy is not None:
            raise busy
        return False

    def _run_group(self, ops: list[_Pending], *, inline: bool = False) -> _GroupRun:
        """One transaction and one COMMIT for the whole group.

        Runs on the writer thread, or ``inline`` on the loop thread for a lone write; inline it
        never waits for another process's lock (no results: the writer thread takes over).
        In a group of several, each op runs inside a SAVEPOINT so that an op that raises rolls
        back only its own writes; a lone op that raises rolls back the transaction.
        """
        turn = self._turn
        asked = time.perf_counter()
        commits = self.commits
        if turn is None:
            results = self._run_group_in_turn(ops, inline=inline)
            seconds = time.perf_counter() - asked
            return _GroupRun(results, seconds=seconds, committed=self.commits != commits)
        if not turn.take(within=0.0 if inline else self._busy_timeout_ms / 1000):
            if inline:
                return _GroupRun(None)
            busy = StoreError("another process kept the SQLite write turn", code="STORE_BUSY")
            return _GroupRun([(False, busy)] * len(ops), waited=time.perf_counter() - asked)
        began = time.perf_counter()
        try:
            results = self._run_group_in_turn(ops, inline=inline)
        finally:
            turn.give()
        seconds = time.perf_counter() - began
        return _GroupRun(results, began - asked, seconds, committed=self.commits != commits)

    def _run_group_in_turn(
        self, ops: list[_Pending], *, inline: bool
    ) -> list[tuple[bool, Any]] | None:
        conn = self._raw_writer
        assert conn is not None  # noqa: S101 - set in open()
        try:
            if not self._begin(conn, wait=not inline):
                return None
        except sqlite3.Error as error:
            return [(False, _store_error(error))] * len(ops)
        try:
            if len(ops) == 1:
                results = [_run_op(conn, ops[0].op)]
                if not results[0][0]:
                    conn.execute("ROLLBACK")
                    return results
            else:
                results = []
                for op in ops:
                    conn.execute("SAVEPOINT op")
                    result = _run_op(conn, op.op)
                    if not result[0]:
                        conn.execute("ROLLBACK TO op")
                    conn.execute("RELEASE op")
                    results.append(result)
            _insert_group_rows(conn, ops, results)
            committing = time.perf_counter()
            conn.execute("COMMIT")
            self._commit_took = time.perf_counter() - committing
            self.commits += 1
        except sqlite3.Error as error:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            # Nothing of the group is durable: every caller hears so.
            return [(False, _store_error(error))] * len(ops)
        return results

    async def truncate_wal(self) -> bool:
        """Copy the whole write-ahead log into the database and truncate the log to nothing
        (``PRAGMA wal_checkpoint(TRUNCATE)``), so that rows just erased are in no old frame of
        it (their pages in the database are zeroed: ``secure_delete``). On a connection of its
        own, on a thread: it waits up to the busy timeout for the readers and writers of this
        and other processes, never on the event loop. False when they kept the log busy: it is
        copied then, not truncated, and later writes overwrite it."""
        self._require_open()
        if self._read_only:
            return False
        truncated = await asyncio.to_thread(self._checkpoint_truncate)
        if not truncated:
            _log.warning(
                "the SQLite write-ahead log stayed busy for %d ms after an erase: it was copied"
                " into the database but not truncated (later writes overwrite it)",
                self._busy_timeout_ms,
            )
        return truncated

    def _checkpoint_truncate(self) -> bool:
        conn = sqlite3.connect(
            self.path,
            timeout=self._busy_timeout_ms / 1000,
            isolation_level=None,
            check_same_thread=False,
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
            busy: int = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        except sqlite3.Error as error:
            raise _store_error(error) from error
        finally:
            conn.close()
        return busy == 0

    async def check_readiness(self) -> None:
        # After a failed fsync the read below raises that error (``_require_open``).
        rows = await self.read("SELECT version, name, checksum FROM pausemesh_schema_migrations")
        applied = {(r[0], r[1], r[2]) for r in rows}
        expected = {(m.version, m.name, m.checksum) for m in self._migrations}
        if applied != expected:
            msg = "database schema does not match this PauseMesh"
            raise StoreError(msg, code="SCHEMA_INCOMPLETE")

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._writer_task is not None:
            self._wakeup.set()
            with contextlib.suppress(Exception):
                await self._writer_task
        if self._wal_sync is not None:
            # The groups handed to it are synced and settled before the file is let go.
            await asyncio.to_thread(self._wal_sync.close)
        if self._large_pool is not None:
            # After the reads already queued on it; its connection is closed on its thread.
            await asyncio.get_running_loop().run_in_executor(self._large_pool, self._close_large)
            self._large_pool.shutdown(wait=False)
        if self._reader is not None:
            self._reader.close()
        if self._writer is not None:
            with contextlib.suppress(Exception):
                await self._writer.close()
        if self._turn is not None:
            self._turn.close()
