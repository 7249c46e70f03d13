"""N worker processes on one port: each worker's listening socket and its slot.

uvicorn's supervisor spawns N processes, each listening on the port with its own socket
(``listener_for_workers``); each builds its app through an app factory (a spawned process
cannot inherit the parent's app; the CLI's is ``pausemesh.cli.workers:worker_app``) from the
same command line, passed in ``WORKER_ARGV_ENV``. Every worker claims a **slot** (``claim_slot``:
a lock file per slot in the data directory), which names its instance ``<name>.w<slot>``: a
worker that crashed and is replaced takes the same slot and so frees its dead predecessor's run
leases at once, while live siblings never free each other's.
What the workers share is the store: compare-and-swap decides races, each process groups its
own commits, the background jobs run in the one process holding the store's job lock, and live
tails are woken across processes (SQLite: ``stores/sqlite/changes.py``; PostgreSQL: LISTEN).
"""

from __future__ import annotations

import re
import socket
import sys
import time
from pathlib import Path
from typing import Any, Final

from pausemesh.stores.file_lock import FileLock

__all__ = (
    "MIGRATE_REQ",
    "WORKER_ARGV_ENV",
    "WorkerSlot",
    "claim_slot",
    "listener_for_workers",
    "migration_advice",
)

# Not a ``PAUSEMESH_`` name: settings ignore it, and a shell's setting can never leak into it.
WORKER_ARGV_ENV: Final = "_PAUSEMESH_WORKER_ARGV"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


class _ListenerPerWorker(socket.socket):
    """The port's socket in the supervisor; each worker gets a new socket bound beside it.

    With one listening socket shared by every worker, every idle worker is woken by a new
    connection and the first one to run accepts all that are waiting: the bench's 16 keep-alive
    connections, opened together, all landed on one worker (16 of 16, three runs of
    ``bench/http.py --workers 2``) and the other worker idled. Each worker listening on its own
    ``SO_REUSEPORT`` socket lets the kernel spread new connections over the workers instead.
    uvicorn's supervisor hands its sockets to each spawned worker by pickling them, so this
    socket pickles as "bind a new one at this address" (``_bind_beside``).
    """

    def __reduce__(self) -> tuple[Any, tuple[int, Any]]:
        return _bind_beside, (int(self.family), self.getsockname())


def _bind_reusing_port(sock: socket.socket, address: Any) -> socket.socket:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(address)
    return sock


def _bind_beside(family: int, address: Any) -> socket.socket:
    """In a worker: its own listening socket on the supervisor's address (uvicorn listens)."""
    return _bind_reusing_port(socket.socket(family=family), address)


def listener_for_workers(host: str, port: int) -> socket.socket | None:
    """The supervisor's socket for N workers on ``host:port``, or None where the kernel does not
    spread connections over ``SO_REUSEPORT`` sockets (not Linux: uvicorn's one shared socket).

    The port is first bound without ``SO_REUSEPORT``, so a port already served (by another
    PauseMesh too) is refused here instead of joined; the supervisor then holds it, bound and
    not listening (so no connection waits on it), until it exits.
    """
    if sys.platform != "linux" or not hasattr(socket, "SO_REUSEPORT"):
        return None
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family=family) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((host, port))
        address = probe.getsockname()
    return _bind_reusing_port(_ListenerPerWorker(family=family), address)


MIGRATE_REQ: Final = Path("/proc/sys/net/ipv4/tcp_migrate_req")


def migration_advice(setting: Path = MIGRATE_REQ) -> str | None:
    """What to tell the operator when connections queued at a worker that dies would be reset.

    Each worker has its own ``SO_REUSEPORT`` socket and accept queue; Linux hands a closed
    socket's queue to a sibling only with ``net.ipv4.tcp_migrate_req = 1``
    (``bench/reuseport_migrate.py`` shows both). None when it is on or not there to read.
    """
    try:
        value = setting.read_text().strip()
    except OSError:
        return None
    if value != "0":
        return None
    return (
        "net.ipv4.tcp_migrate_req is 0: connections waiting for a worker that dies are reset"
        " (clients retry); `sysctl -w net.ipv4.tcp_migrate_req=1` hands them to a sibling"
    )


class WorkerSlot:
    """This process's slot among the workers of one server (held until the process exits)."""

    def __init__(self, index: int, lock: FileLock) -> None:
        self.index = index
        self._lock = lock


def claim_slot(directory: Path, name: str, workers: int) -> WorkerSlot:
    """The first free slot of ``workers`` for the server named ``name`` (``host:port``)."""
    stem = _UNSAFE.sub("_", name)
    # A replacement may start before the supervisor reaped the dead worker's lock: try a while.
    for index in range(workers * 50):
        lock = FileLock(directory / f"worker-{stem}.{index % workers}.lock")
        if lock.try_acquire():
            return WorkerSlot(index % workers, lock)
        if index % workers == workers - 1:
            time.sleep(0.1)
    msg = f"no free worker slot of {workers} for {name}"
    raise RuntimeError(msg)
