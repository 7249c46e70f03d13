"""What a command prints when it cannot start: one line with what failed, the value that
caused it and the fix, never a traceback (unless the log level is ``debug``).

Every command goes through ``main`` (``pausemesh.cli.main``), which hands what escaped the
command to ``failure_line``: a ``CliError`` or ``SettingsError`` as it is, a ``StoreError``
with its code and message (the stores say the fix: ``run `pausemesh migrate```, ``create the
database or check PAUSEMESH_DATABASE_URL``), and the operating system's refusals of the data
directory or of the port said in the user's words. Anything else is a bug and keeps its
traceback. ``bind_listener`` is the one bind of ``serve``, ``demo`` and ``gateway``.
"""

from __future__ import annotations

import errno
import os
import socket
import sqlite3
from pathlib import Path

from pausemesh.cli.options import CliError
from pausemesh.core.errors import PauseMeshError, SettingsError, StoreError

__all__ = ("bind_listener", "bind_refusal", "failure_line", "leaf_error", "wants_traceback")


def leaf_error(error: BaseException) -> BaseException:
    """The one error inside a group of one (a task group's failure), or ``error`` itself."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def wants_traceback(log_level: str | None = None) -> bool:
    """True when the user asked for the details (``PAUSEMESH_LOG_LEVEL=debug`` or the flag)."""
    level = log_level or os.environ.get("PAUSEMESH_LOG_LEVEL") or ""
    return level.strip().lower() == "debug"


def failure_line(error: BaseException) -> str | None:
    """The one line saying why the command could not start, or None for an unexpected error
    (a bug, shown with its traceback)."""
    error = leaf_error(error)
    if isinstance(error, (CliError, SettingsError)):
        return str(error)
    if isinstance(error, StoreError):
        message = error.message
        server = error.details.get("server")
        if isinstance(server, str):
            # The connect's refusal names its server here only (pausemesh.stores.postgres).
            message = message.replace("PostgreSQL:", f"PostgreSQL at {server}:", 1)
        return f"{message} ({error.code})"
    if isinstance(error, PauseMeshError):
        return f"{error.code}: {error.message}"
    if isinstance(error, OSError):
        return _os_error_line(error)
    if isinstance(error, sqlite3.OperationalError):
        return f"SQLite refused the database file ({error}): check --database-path"
    return None


def _os_error_line(error: OSError) -> str | None:  # noqa: PLR0911 - one return per refusal
    name = error.filename
    if name is None:
        return None
    path = Path(os.fsdecode(name))
    if error.errno in {errno.EACCES, errno.EPERM, errno.EROFS}:
        directory = path if path.is_dir() else path.parent
        return (
            f"cannot write {path}: the directory {directory} is not writable"
            " (choose another --database-path or PAUSEMESH_DATA_DIR, or fix its permissions)"
        )
    if error.errno in {errno.EEXIST, errno.ENOTDIR}:
        blocker = _file_in_the_way(path)
        return (
            f"cannot create {path}: {blocker} is a file, not a directory"
            " (choose another --database-path or PAUSEMESH_DATA_DIR)"
        )
    if error.errno == errno.ENOENT:
        if not path.parent.is_dir():
            return f"cannot use {path}: the directory {path.parent} does not exist"
        return f"{path} does not exist"
    if error.errno == errno.ENOSPC:
        return f"cannot write {path}: no space left on its device"
    return None


def _file_in_the_way(path: Path) -> Path:
    """The first of ``path`` and its parents that exists and is not a directory."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate if not candidate.is_dir() else path
    return path


def bind_listener(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (not listening yet), or a ``CliError`` saying why not:
    the port in use, a port the user may not bind, an address not on this machine. Not
    inheritable (Python's default): a child the app spawns (a gateway's stdio upstream) must
    not hold the port after this process dies."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family=family)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise CliError(bind_refusal(host, port, error)) from None
    return sock


def bind_refusal(host: str, port: int, error: OSError) -> str:
    """Why ``host:port`` could not be bound, with what to change."""
    where = f"cannot listen on {host}:{port}"
    if error.errno == errno.EADDRINUSE:
        return f"{where}: port {port} is in use (try --port)"
    if error.errno == errno.EACCES:
        return f"{where}: not allowed to bind port {port} (try --port above 1023)"
    if error.errno in {errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT}:
        return f"{where}: {host} is not an address of this machine (check --host)"
    if isinstance(error, socket.gaierror):
        return f"{where}: {host} is not a known host name (check --host)"
    return f"{where}: {error.strerror or error}"
