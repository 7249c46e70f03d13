"""Cross-process wake-ups for the SQLite live tail: one change watcher per process.

Several processes (``pausemesh serve --workers N``) append to one SQLite file. A process wakes
its own tails when it commits; appends committed by the others are found by one watcher per
process: every ``TICK_SECONDS`` it asks ``PRAGMA data_version`` (answered from the connection's
memory, no I/O) whether any other connection committed, and only then reads which threads moved
past the last change it saw (the change clock of migration ``thread_changes``, an index range
scan). Only the tails of those threads are woken; an idle tail costs nothing here. The check is
a timer callback of the loop (no task), and it runs only while some tail waits.
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
        # A timer callback, not a task: a check is one read that never waits, and an idle
        # tail's process pays only this (no future, no task step per tick).
        self._timer: asyncio.TimerHandle | None = None
        self._idle = 0

    async def start(self) -> None:
        """Make sure the watcher runs; call it before a waiter reads the thread's head, so a
        commit after that read is past the watcher's mark."""
        self._idle = 0
        if self._timer is not None:
            return
        self._data_version = self._version()
        rows = self.database.read_now("SELECT value FROM agui_change_clock")
        self._seen = rows[0][0] if rows else 0
        self._timer = asyncio.get_running_loop().call_later(self.tick, self._check)

    def _version(self) -> int:
        rows = self.database.read_now("PRAGMA data_version")
        version: int = rows[0][0]
        return version

    def poll(self) -> int:
        """One check; wakes the threads changed since the last; how many changed."""
        version = self._version()
        if version == self._data_version:
            return 0
        self._data_version = version
        rows = self.database.read_now(
            "SELECT thread_id, change_seq FROM agui_threads WHERE change_seq > ?", (self._seen,)
        )
        for thread_id, change in rows:
            self.notifier.notify(thread_id)
            self._seen = max(self._seen, change)
        return len(rows)

    def _check(self) -> None:
        self._idle = 0 if self.notifier.watching else self._idle + 1
        if self._idle >= _IDLE_TICKS:
            self._timer = None  # ends; the next waiter starts it again
            return
        with contextlib.suppress(Exception):  # a failed check is retried next tick
            self.poll()
        self._timer = asyncio.get_running_loop().call_later(self.tick, self._check)

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
