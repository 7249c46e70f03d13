"""``pausemesh serve|demo --workers N``: N worker processes on one port, one shared store.

uvicorn's supervisor binds the port once and spawns N processes that accept on it; each builds
its app through ``worker_app`` (an app factory: a spawned process cannot inherit the parent's
app) from the same command line, passed in ``WORKER_ARGV_ENV``. Every worker claims a **slot**
(``claim_slot``: a lock file per slot in the data directory), which names its instance
``<name>.w<slot>``: a worker that crashed and is replaced takes the same slot and so frees its
dead predecessor's run leases at once, while live siblings never free each other's.
What the workers share is the store: compare-and-swap decides races, each process groups its
own commits, the background jobs run in the one process holding the store's job lock, and live
tails are woken across processes (SQLite: ``stores/sqlite/changes.py``; PostgreSQL: LISTEN).
"""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path
from typing import Any, Final

from pausemesh.stores.file_lock import FileLock

__all__ = ("WORKER_ARGV_ENV", "WorkerSlot", "claim_slot", "worker_app", "worker_slot")

# Not a ``PAUSEMESH_`` name: settings ignore it, and a shell's setting can never leak into it.
WORKER_ARGV_ENV: Final = "_PAUSEMESH_WORKER_ARGV"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


class WorkerSlot:
    """This process's slot among the workers of one server (held until the process exits)."""

    def __init__(self, index: int, lock: FileLock) -> None:
        self.index = index
        self._lock = lock


_slot: WorkerSlot | None = None


def worker_slot() -> int | None:
    """The slot of this worker process, or None when the process is not one of N workers."""
    return None if _slot is None else _slot.index


def claim_slot(directory: Path, name: str, workers: int) -> WorkerSlot:
    """The first free slot of ``workers`` for the server named ``name`` (``host:port``)."""
    stem = _UNSAFE.sub("_", name)
    # A replacement may start before the supervisor reaped the dead worker's lock: try a while.
    for index in range(workers * 50):
        lock = FileLock(directory / f"worker-{stem}.{index % workers}.lock")
        if lock.try_acquire():
            return WorkerSlot(index % workers, lock)
        if index % workers == workers - 1:
            import time  # noqa: PLC0415 - only a crowded restart waits

            time.sleep(0.1)
    msg = f"no free worker slot of {workers} for {name}"
    raise RuntimeError(msg)


def worker_app() -> Any:
    """uvicorn's app factory in each worker process: the parent's command, built here."""
    global _slot  # noqa: PLW0603 - one slot per process, claimed once at start
    from pausemesh.cli import build_parser, prepare_command  # noqa: PLC0415 - import cycle
    from pausemesh.gc_tuning import tune_for_serving  # noqa: PLC0415
    from pausemesh.settings import with_overrides  # noqa: PLC0415

    argv = json.loads(os.environ[WORKER_ARGV_ENV])
    args = build_parser().parse_args(argv)
    prepared = prepare_command(args, worker=True)
    settings = prepared.settings
    base = settings.instance_name or f"{socket.gethostname()}:{settings.port}"
    _slot = claim_slot(settings.resolved_data_dir, base, settings.workers)
    settings = with_overrides(settings, instance_name=f"{base}.w{_slot.index}")
    app = prepared.build_app(settings, first_worker=_slot.index == 0)
    tune_for_serving()
    return app
