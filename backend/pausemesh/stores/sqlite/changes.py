"""Cross-process wake-ups for the SQLite live tail: one change watcher per process.

Several processes (``pausemesh serve --workers N``) append to one SQLite file. A process wakes
its own tails when it commits; appends committed by the others are found by one task per
process: every ``TICK_SECONDS`` it asks ``PRAGMA data_version`` (answered from the connection's
memory, no I/O) whether any other connection committed, and only then reads which threads moved
past the last change it saw (the change clock of migration ``thread_changes``, an index range
scan). Only the tails of those threads are woken; an idle tail costs nothing here. The task runs
only while some tail waits.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Final

from pausemesh.stores.sqlite.database import SqliteDatabase
from pausemesh.stores.thread_notify import ThreadNotifier

__all__ = ("TICK_SECONDS", "ChangeWatcher")

TICK_SECONDS: Final = 0.02
# Ticks without any waiter before the task ends (it restarts with the next waiter).
_IDLE_TICKS: Final = 50


class ChangeWatcher:
    def __init__(
        self, database: SqliteDatabase, notifier: ThreadNotifier, *, tick: float = TICK_SECONDS
    ) -> None:
        self.database = database
        self.notifier = notifier
        self.tick = tick
        self._seen = 0
        self._data_version = -1
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Make sure the watcher runs; call it before a waiter reads the thread's head, so a
        commit after that read is past the watcher's mark."""
        if self._task is not None and not self._task.done():
            return
        self._data_version = await self._version()
        rows = await self.database.read("SELECT value FROM agui_change_clock")
        self._seen = rows[0][0] if rows else 0
        self._task = asyncio.create_task(self._run(), name="pausemesh-sqlite-changes")

    async def _version(self) -> int:
        rows = await self.database.read("PRAGMA data_version")
        version: int = rows[0][0]
        return version

    async def poll(self) -> int:
        """One check; wakes the threads changed since the last; how many changed."""
        version = await self._version()
        if version == self._data_version:
            return 0
        self._data_version = version
        rows = await self.database.read(
            "SELECT thread_id, change_seq FROM agui_threads WHERE change_seq > ?", (self._seen,)
        )
        for thread_id, change in rows:
            self.notifier.notify(thread_id)
            self._seen = max(self._seen, change)
        return len(rows)

    async def _run(self) -> None:
        idle = 0
        while idle < _IDLE_TICKS:
            await asyncio.sleep(self.tick)
            idle = 0 if self.notifier.watching else idle + 1
            with contextlib.suppress(Exception):  # a failed check is retried next tick
                await self.poll()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
