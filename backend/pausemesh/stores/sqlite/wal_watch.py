"""Word from the kernel that a SQLite file's write-ahead log was written (Linux ``inotify``).

Every commit in WAL mode writes the ``-wal`` file, whichever process makes it, so a watch on
that file tells the change watcher when to look, instead of a timer asking 50 times a second
(on a small VM each timer wake-up of an idle process costs about 0.1 ms of CPU: the timer alone
was about half a percent of a core). Where ``inotify`` is missing (not Linux) or refused (the
per-user instance limit), ``watch_wal`` returns None and the watcher keeps its timer.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
import sys
from pathlib import Path
from typing import Any, Final

__all__ = ("WalWrites", "watch_wal")

_log = logging.getLogger("pausemesh.stores")
_IN_MODIFY: Final = 0x00000002
# Enough for many queued events at once; each is 16 bytes plus a name (none for a file).
_READ_SIZE: Final = 4096


class WalWrites:
    """An ``inotify`` descriptor that becomes readable when the ``-wal`` file is written."""

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def drain(self) -> bool:
        """Consume the queued events; whether there were any (what they say does not matter:
        something was written). A loop may call its reader once more after a drain."""
        written = False
        with contextlib.suppress(BlockingIOError, InterruptedError):
            while os.read(self.fd, _READ_SIZE):
                written = True
        return written

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


@functools.cache
def _libc() -> Any:
    """This process's C library, loaded once (a watcher starts again after every idle spell)."""
    return ctypes.CDLL(None, use_errno=True)


def watch_wal(database_path: str) -> WalWrites | None:
    """Watch ``<database_path>-wal`` for writes, or None where that cannot be done."""
    if sys.platform != "linux" or database_path.startswith("file:"):
        return None
    wal = Path(f"{database_path}-wal")
    if not wal.exists():
        return None
    try:
        libc = _libc()
        fd = int(libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC))
    except (OSError, AttributeError):
        return None
    if fd < 0:
        _refused(ctypes.get_errno())
        return None
    if int(libc.inotify_add_watch(fd, os.fsencode(wal), _IN_MODIFY)) < 0:
        _refused(ctypes.get_errno())
        os.close(fd)
        return None
    return WalWrites(fd)


_said: list[bool] = []


def _refused(errno: int) -> None:
    """Say once per process that the timer serves instead (usually a per-user limit:
    ``fs.inotify.max_user_instances`` or ``max_user_watches``)."""
    if _said:
        return
    _said.append(True)
    _log.warning(
        "inotify refused (%s): the SQLite change watcher looks every 20 ms instead",
        os.strerror(errno),
    )
