"""Cross-process wake-ups for the SQLite live tail: one change watcher per process.

Several processes (``pausemesh serve --workers N``) append to one SQLite file. A process wakes
its own tails when it commits; appends committed by the others are found by one watcher per
process. It looks when the kernel says the file's write-ahead log was written (``wal_watch``:
every commit writes it, whichever process makes it), at most once per ``TICK_SECONDS``; where
that word is not available it looks every ``TICK_SECONDS`` instead. A look asks ``PRAGMA
data_version`` (answered from the connection's memory, no I/O) whether any other connection
committed, and only then reads which threads moved past the last change it saw (the change
clock of migration ``thread_changes``, an index range scan). Only the tails of those threads
are woken; an idle tail costs nothing here, and with no commits the watcher does not run at
all. It runs only while some tail waits, as loop callbacks (no task).

The kernel's word comes when a commit's frames are written, and the commit is visible only
after that (with ``synchronous=FULL`` its fsync lies between): a look the word prompts can come
too early, and no later write need follow. So after each word (and after it starts, when a
commit may be on its way) the watcher looks again at growing intervals (each as long as the
time since the word, ``TICK_SECONDS`` at least: 20, 40, 80 ms …) for ``SETTLE_SECONDS``; then
it rests until the next word. A commit slower
than that to show is found by the next look, or by the wheel's safety read of an idle tail's
head (``thread_notify``).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Final

from pausemesh.stores.sqlite.database import SqliteDatabase
from pausemesh.stores.sqlite.wal_watch import WalWrites, watch_wal
from pausemesh.stores.thread_notify import ThreadNotifier

__all__ = ("SETTLE_SECONDS", "TICK_SECONDS", "ChangeWatcher")

TICK_SECONDS: Final = 0.02
# How long after the last word of a write (or the start) the watcher keeps looking: nine
# looks at doubling intervals, for commits whose fsync outlasts the look the word prompted.
SETTLE_SECONDS = 5.0
# Looks without any waiter before the watcher stops (it starts again with the next waiter).
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
        # Loop callbacks, not a task: a look is one read that never waits.
        self._timer: asyncio.TimerHandle | None = None
        self._wal: WalWrites | None = None
        self._last_look = 0.0
        self._idle = 0
        # When the last word of a write came (or the watcher started).
        self._word_at = 0.0

    async def start(self) -> None:
        """Make sure the watcher runs; call it before a waiter reads the thread's head, so a
        commit after that read is past the watcher's mark."""
        self._idle = 0
        if self._wal is not None or self._timer is not None:
            return  # running: woken by the log's writes, or a look is due
        loop = asyncio.get_running_loop()
        # Watch first, then take the marks: a commit between the two is both counted in the
        # marks and announced, never neither.
        self._wal = watch_wal(self.database.path)
        try:
            self._data_version = self._version()
            rows = self.database.read_now("SELECT value FROM agui_change_clock")
        except BaseException:
            self._stop()  # the waiter hears the store's error; the next one starts afresh
            raise
        self._seen = rows[0][0] if rows else 0
        if self._wal is not None:
            loop.add_reader(self._wal.fd, self._written)
            self._word_at = loop.time()  # a commit written before the watch may show later
        self._timer = loop.call_later(self.tick, self._check)

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
            "SELECT thread_id, change_seq, last_sequence FROM agui_threads WHERE change_seq > ?",
            (self._seen,),
        )
        for thread_id, change, head in rows:
            self.notifier.notify(thread_id, head)
            self._seen = max(self._seen, change)
        return len(rows)

    def _written(self) -> None:
        """The log was written: look now, or one tick after the last look (so a busy file
        costs at most one look per tick, as the timer did)."""
        assert self._wal is not None  # noqa: S101 - the reader is added with it
        if not self._wal.drain():
            return  # nothing new
        loop = asyncio.get_running_loop()
        now = self._word_at = loop.time()
        due = self._last_look + self.tick
        if self._timer is not None:
            if self._timer.when() <= due:
                return  # a look is due soon enough
            self._timer.cancel()  # a later look of the settling: this word brings it forward
        wait = due - now
        if wait > 0:
            self._timer = loop.call_later(wait, self._check)
        else:
            self._check()

    def _check(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        now = self._last_look = loop.time()
        self._idle = 0 if self.notifier.watching else self._idle + 1
        if self._idle >= _IDLE_TICKS or (self._wal is not None and not self.notifier.watching):
            self._stop()  # the next waiter starts it again
            return
        with contextlib.suppress(Exception):  # a failed look is retried at the next one
            self.poll()
        if self._wal is None:
            self._timer = loop.call_later(self.tick, self._check)
        elif (since := now - self._word_at) < SETTLE_SECONDS:
            # A commit whose word came before this look may not have shown yet: look again.
            self._timer = loop.call_later(max(self.tick, since), self._check)

    def _stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._wal is not None:
            with contextlib.suppress(Exception):  # the loop may be closing
                asyncio.get_running_loop().remove_reader(self._wal.fd)
            self._wal.close()
            self._wal = None

    async def close(self) -> None:
        self._stop()
