"""The write-ahead log made durable after the write turn is given back (``sqlite_sync = ack``).

With ``synchronous=FULL`` SQLite fsyncs the ``-wal`` file inside ``COMMIT``, while the
transaction still holds the file's write lock: every other worker process waits for that
fsync before it can begin. With ``synchronous=NORMAL`` ``COMMIT`` only writes the frames; the
writer then gives the turn back and fsyncs the ``-wal`` file before any caller hears of its
write: itself, or, when the next group already waits, on ``WalSync``'s thread (once for every
group handed to it meanwhile) while it commits that group. An fsync makes the whole file
durable, in order, so a later commit that read an earlier one (another process's too) is never
acknowledged before it.

What it gives up: between its ``COMMIT`` and the fsync (about one fsync) a commit is visible to
readers before it is on disk; an OS crash or a power cut in that window can lose a commit a
reader saw, though never one a writer was told of. ``sqlite_sync = commit`` keeps ``FULL``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

from pausemesh.core.errors import StoreError

__all__ = ("Synced", "WalSync")

_log = logging.getLogger("pausemesh.stores")

# What a waiting caller hears once the fsync that covers its commit returned: how long that
# fsync took (seconds) or the error it raised, and whether it is the first caller told of
# that fsync (so that one fsync is counted once, whatever the number of groups it covered).
Synced = Callable[[float | StoreError, bool], None]


def _sync_failed(error: OSError) -> StoreError:
    msg = (
        f"fsync of the SQLite write-ahead log failed ({error.strerror or error!r}): a commit may"
        " not be on disk; this process uses the database no more until it is restarted"
    )
    return StoreError(msg, code="STORE_UNAVAILABLE")


class WalSync:
    """One ``-wal`` file's fsyncs: on the caller's thread (``sync``) or on a thread of its own,
    shared by every commit queued while the previous one ran (``after_sync``).

    After an fsync fails, nothing written since the last good one can be trusted to reach the
    disk (the kernel may have dropped those pages): every later call fails with the same error.
    """

    def __init__(self, wal_path: str, *, fsync: Callable[[int], None] | None = None) -> None:
        self._fd = os.open(wal_path, os.O_RDONLY | os.O_CLOEXEC)
        # fdatasync, as SQLite's own sync of the -wal file: the data and the size that reads
        # need, not the modification time (an fsync would commit the inode's too).
        datasync: Callable[[int], None] = getattr(os, "fdatasync", os.fsync)  # not on macOS
        self._fsync = datasync if fsync is None else fsync
        self._changed = threading.Condition()
        self._waiting: list[Synced] = []
        self._closing = False
        self.failed: StoreError | None = None
        self._thread = threading.Thread(target=self._run, name="pausemesh-sqlite-sync", daemon=True)
        self._thread.start()

    def sync(self) -> float:
        """fsync now, on this thread; how long it took. Raises ``StoreError`` once failed."""
        if self.failed is not None:
            raise self.failed
        started = time.perf_counter()
        try:
            self._fsync(self._fd)
        except OSError as error:
            self.failed = _sync_failed(error)
            raise self.failed from error
        return time.perf_counter() - started

    def after_sync(self, then: Synced) -> None:
        """Call ``then`` (on the sync thread) once an fsync that started after this call ended."""
        with self._changed:
            if not self._closing:
                self._waiting.append(then)
                self._changed.notify()
                return
        then(self.sync_or_error(), True)  # closed: the caller's own thread syncs

    def sync_or_error(self) -> float | StoreError:
        """``sync``, with its error returned instead of raised (for a caller to pass on)."""
        try:
            return self.sync()
        except StoreError as error:
            return error

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._waiting and not self._closing:
                    self._changed.wait()
                waiting, self._waiting = self._waiting, []
                if not waiting and self._closing:
                    return
            result = self.sync_or_error()
            for index, then in enumerate(waiting):
                try:
                    then(result, index == 0)
                except Exception:  # noqa: BLE001 - the thread lives on: later commits wait on it
                    _log.exception("a SQLite commit's callback failed after its fsync")

    def close(self) -> None:
        """Sync what waits, stop the thread and close the file."""
        with self._changed:
            self._closing = True
            self._changed.notify()
        self._thread.join()
        os.close(self._fd)
