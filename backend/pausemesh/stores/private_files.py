"""Database files readable by their owner only (mode 0600).

A SQLite file holds conversations, payloads and webhook client tokens. SQLite creates it with
0644 (less the umask), readable by every local user, and creates its ``-wal`` and ``-shm``
files with the database file's own mode. So the file is created here first, empty and 0600
(SQLite takes an empty file as a new database), and its companions follow. A file made by an
earlier version is tightened when it is opened, and the log says so once (the next open finds
it private already). The lock files beside it are created 0600 where they are opened
(``file_lock.py``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from pathlib import Path

__all__ = ("private_database_file",)

_log = logging.getLogger("pausemesh.stores")
_PRIVATE = 0o600
_OTHERS = 0o077  # group and world bits
# The files SQLite keeps beside a database (a rollback journal only outside WAL mode).
_COMPANIONS = ("-wal", "-shm", "-journal")


def private_database_file(path: str | Path) -> None:
    """Create the SQLite file at ``path`` with mode 0600 unless it exists; take the group's
    and others' bits off it and off its ``-wal``, ``-shm`` and ``-journal`` files if they
    have any. A file this process may not change (another owner's) is left, with a warning."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, _PRIVATE))
    tightened: list[str] = []
    for file in (Path(path), *(Path(f"{path}{suffix}") for suffix in _COMPANIONS)):
        try:
            mode = stat.S_IMODE(file.stat().st_mode)
        except FileNotFoundError:
            continue
        if not mode & _OTHERS:
            continue
        try:
            file.chmod(mode & ~_OTHERS)
        except OSError as error:
            _log.warning(
                "%s is readable by other users (mode %04o) and could not be made private: %s",
                file,
                mode,
                error.strerror or error,
            )
            continue
        tightened.append(f"{file.name} ({mode:04o})")
    if tightened:
        _log.warning(
            "made database files readable by their owner only (they hold conversations and"
            " tokens): %s, now without group and other access",
            ", ".join(tightened),
        )
