"""The cross-replica live tail: LISTEN on one dedicated connection, wake in-process waiters.

Every thread append ends with ``pg_notify(channel, "<sequence> <thread id>")`` in the same
transaction, so the notification arrives on every replica only once the events are committed.
Waiters take only its sequence from a notification (past their mark, they need not read the
head to know events wait); the events themselves they read from the log after their last sequence.
When the listening connection drops, every waiter is woken (it re-reads and finds what it
missed, without repeats: reads are by sequence), the connection is re-established with backoff,
and all waiters are woken once more after LISTEN is back, covering what was committed between.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from typing import Any

import asyncpg

from pausemesh.stores.postgres.database import PostgresDatabase
from pausemesh.stores.thread_notify import ThreadNotifier

__all__ = ("ThreadListener", "channel_for")

_log = logging.getLogger("pausemesh.postgres.listen")

_RETRY_MIN = 0.05
_RETRY_MAX = 2.0


def channel_for(schema: str) -> str:
    """One NOTIFY channel per schema (a channel name is at most 63 bytes)."""
    return "pausemesh_threads_" + hashlib.sha256(schema.encode()).hexdigest()[:16]


class ThreadListener:
    """Owns the LISTEN connection of one process and the in-process wake-ups it drives."""

    def __init__(self, database: PostgresDatabase) -> None:
        self.database = database
        self.channel = channel_for(database.schema)
        self.notifier = ThreadNotifier()
        self._conn: Any = None  # asyncpg.Connection or a pool connection held for good
        self._held_from_pool = False
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._lost = asyncio.Event()
        self._closed = False
        self.reconnects = 0  # how often the connection was re-established (for tests, logs)

    @property
    def listening(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    async def start(self) -> None:
        """Start listening (idempotent); returns once LISTEN is active or the first try failed."""
        if self._closed:
            return
        if self._ready is None:
            self._ready = asyncio.get_running_loop().create_future()
            self._task = asyncio.create_task(
                self._run(self._ready), name="pausemesh-thread-listener"
            )
        await asyncio.shield(self._ready)

    def wake(self, thread_id: str, head: int | None = None) -> None:
        self.notifier.notify(thread_id, head)

    def _wake_all(self) -> None:
        self.notifier.notify_all()

    def _on_notification(self, _conn: Any, _pid: int, _channel: str, payload: object) -> None:
        sequence, _, thread_id = str(payload).partition(" ")
        self.notifier.notify(thread_id, int(sequence) if sequence.isdigit() else None)

    def _on_termination(self, _conn: Any) -> None:
        self._lost.set()

    async def _connect(self) -> None:
        conn: Any
        if self.database.dsn is not None:
            conn = await asyncpg.connect(
                self.database.dsn,
                timeout=5,
                server_settings={"application_name": "pausemesh-listen"},
            )
            self._held_from_pool = False
        else:
            # A host-owned pool without a DSN: hold one of its connections for the listener.
            conn = await self.database.pool.acquire()
            self._held_from_pool = True
        self._conn = conn
        conn.add_termination_listener(self._on_termination)
        try:
            await conn.add_listener(self.channel, self._on_notification)
        except BaseException:
            await self._disconnect()  # never leak the half-set-up connection
            raise

    async def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        with contextlib.suppress(Exception):
            if self._held_from_pool:
                # A host pool may skip its reset query: leave the connection as we found it.
                await conn.remove_listener(self.channel, self._on_notification)
                await self.database.pool.release(conn)
            else:
                await asyncio.wait_for(conn.close(), timeout=2)

    async def _run(self, ready: asyncio.Future[None]) -> None:
        delay = _RETRY_MIN
        first = True
        while not self._closed:
            self._lost.clear()
            try:
                await self._connect()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - keep retrying until closed
                _log.warning("thread listener cannot connect (%s); retrying", type(error).__name__)
                if not ready.done():
                    ready.set_result(None)
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX)
                continue
            delay = _RETRY_MIN
            if not first:
                self.reconnects += 1
            first = False
            # Anything committed while we were not listening is found by a re-read.
            self._wake_all()
            if not ready.done():
                ready.set_result(None)
            await self._lost.wait()
            _log.warning("thread listener connection lost; reconnecting")
            self._wake_all()
            await self._disconnect()

    async def close(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        await self._disconnect()
        self._wake_all()
        await self.notifier.close()
