"""Process locks on a file (``flock``): the SQLite job lock and the worker slots.

An exclusive ``flock`` belongs to the open file: it is freed when the process exits, however
it exits (SIGKILL too), so a dead holder never blocks the next one. It only coordinates
processes on one machine, which is exactly what sharing one SQLite file means.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import Final

from pausemesh.stores.backoff import attempts

__all__ = ("FileJobLock", "FileLock", "WriteTurn")

# A commit's fsync takes about 0.2 ms on a quiet SSD: a waiting writer looks again that often.
_FIRST_PAUSE: Final = 0.00005
_PAUSE: Final = 0.0005
# How long a writer lets a waiting sibling take the turn first: a few of the sibling's looks.
_LET_IN: Final = 0.002


class FileLock:
    """A non-blocking exclusive lock on ``path`` (created if missing), held until ``release``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_acquire(self) -> bool:
        if self._fd is not None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            taken = _try_flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        if not taken:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)  # closing the descriptor frees the flock


class FileJobLock:
    """``JobLock`` for processes sharing one SQLite file: a lock file beside it."""

    def __init__(self, database_path: str | Path) -> None:
        self._lock = FileLock(f"{database_path}.jobs.lock")

    async def try_hold(self) -> bool:
        return self._lock.try_acquire()

    async def close(self) -> None:
        self._lock.release()


class WriteTurn:
    """Whose turn it is to write one SQLite file, among the processes of this machine.

    SQLite's own lock makes a second writer retry on a lengthening timer (its busy handler, or
    ``SqliteDatabase._begin``: 1, 2, 4 … ms): far longer than the fsync it waits for, and every
    request of its group waits with it. A turn is an ``flock`` on a file beside the database,
    taken around each transaction and tried again every ``_PAUSE`` seconds at most, so the next
    writer starts within a fraction of a commit after the holder's ends. SQLite's lock still
    guards the file against anyone not taking turns.

    Turns alternate: a writer that has to wait says so (a shared ``flock`` on a second file,
    ``<database>.write.wait``, held while it waits), and a writer about to take the turn again
    first lets such a waiter in. Without that, a writer thread committing group after group
    gives the turn and takes it back within microseconds, and a sibling that looks again every
    half millisecond can wait for tens of milliseconds.
    """

    def __init__(self, database_path: str | Path) -> None:
        path = Path(f"{database_path}.write.lock")
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        wait = Path(f"{database_path}.write.wait")
        self._wait_fd: int | None = os.open(wait, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def take(self, *, within: float = 0.0) -> bool:
        """Take the turn, trying for ``within`` seconds; False if another process kept it.

        Not a blocking ``flock``: a holder that hangs (a stopped process) must cost the caller
        a ``STORE_BUSY`` after its busy timeout, as SQLite's own lock would, not a hang. With
        ``within`` (the writer thread, never the event loop), a waiting sibling goes first.
        """
        fd = self._fd
        if fd is None:
            return True  # closed: SQLite's own lock still decides
        if within:
            self._let_waiter_in()
        if _try_flock(fd, fcntl.LOCK_EX):
            return True
        if not within:
            return False
        wait_fd = self._wait_fd
        announced = wait_fd is not None and _try_flock(wait_fd, fcntl.LOCK_SH)
        try:
            # Looks again at once: the turn may have been given while this one said it waits.
            for _ in attempts(within, _FIRST_PAUSE, _PAUSE):
                if _try_flock(fd, fcntl.LOCK_EX):
                    return True
            return False
        finally:
            if announced and wait_fd is not None:
                fcntl.flock(wait_fd, fcntl.LOCK_UN)

    def _let_waiter_in(self) -> None:
        """If a sibling waits for the turn, give it up to ``_LET_IN`` seconds to take it."""
        wait_fd = self._wait_fd
        if wait_fd is None:
            return
        for _ in attempts(_LET_IN, _FIRST_PAUSE, _FIRST_PAUSE):
            # Exclusive succeeds only when no waiter holds its shared lock.
            if _try_flock(wait_fd, fcntl.LOCK_EX):
                fcntl.flock(wait_fd, fcntl.LOCK_UN)
                return

    def give(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        for fd in (self._fd, self._wait_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._fd = self._wait_fd = None


def _try_flock(fd: int, operation: int) -> bool:
    try:
        fcntl.flock(fd, operation | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
