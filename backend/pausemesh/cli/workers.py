"""``pausemesh serve|demo --workers N``, in each worker: ``worker_app``, uvicorn's app factory.

The supervisor (``pausemesh.cli.serve``) passes its command line in ``WORKER_ARGV_ENV`` and
names this factory by its import string, ``pausemesh.cli.workers:worker_app``; nothing imports
this module otherwise. Each worker parses the same command line, claims its slot
(``pausemesh.serving.workers``: the sockets and slots) and builds its own app.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any

from pausemesh.cli.main import build_parser
from pausemesh.cli.serve import prepare_command
from pausemesh.serving.process_tuning import tune_for_serving
from pausemesh.serving.workers import WORKER_ARGV_ENV, WorkerSlot, claim_slot
from pausemesh.settings import with_overrides

__all__ = ("worker_app", "worker_slot")

_slot: WorkerSlot | None = None


def worker_slot() -> int | None:
    """The slot of this worker process, or None when the process is not one of N workers."""
    return None if _slot is None else _slot.index


def worker_app() -> Any:
    """uvicorn's app factory in each worker process: the parent's command, built here."""
    global _slot  # noqa: PLW0603 - one slot per process, claimed once at start
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
