# ruff: noqa: E402 - sys.path is fixed before the imports (see below)
"""How often a tail on one worker misses a run another worker served (SQLite, two workers).

Starts ``pausemesh demo --workers 2`` on a fresh SQLite file for each ``--sync`` setting, then
``--checks`` times: a question run on worker B, a tail opened on worker A, B's answer run; the
tail must receive every frame of the answer, each within ``--bound`` seconds (the same check as
``tests/reliability/test_workers.py``, keep-alives off so only the change watcher can wake the
tail). ``--load N`` runs N busy processes beside it, as a loaded CI machine would: a miss is a
race (a wake-up lost between a commit's word and the moment the commit shows), rarer on a quiet
machine. Prints the misses per setting; counts, never assertions.

Usage: .venv/bin/python bench/cross_worker_tails.py [--checks 300] [--sync commit,ack] [--load 2]
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse
import contextlib
import multiprocessing
import queue
import tempfile
import threading
import time
from collections.abc import Iterator

from tests.reliability.test_workers import (
    QUIET_TAILS,
    assert_tail_on_one_worker_sees_the_run_of_the_other,
)
from tests.support.server import ServerProcess


def _busy() -> None:
    while True:
        pass


@contextlib.contextmanager
def busy_processes(count: int) -> Iterator[None]:
    processes = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(count)]
    for process in processes:
        process.start()
    try:
        yield
    finally:
        for process in processes:
            process.kill()
            process.join()


def run_setting(sync: str, checks: int, bound: float) -> int:
    """The number of checks whose tail missed a frame, of ``checks``."""
    misses = 0
    with tempfile.TemporaryDirectory() as directory:
        args = ["demo", "--no-browser", "--workers", "2", "--database-path"]
        env = {"PAUSEMESH_LOG_LEVEL": "warning", "PAUSEMESH_SQLITE_SYNC": sync, **QUIET_TAILS}
        with ServerProcess(
            [*args, f"{directory}/demo.db"], env=env, ready_path="/readyz"
        ) as server:
            started = time.monotonic()
            for index in range(1, checks + 1):
                try:
                    assert_tail_on_one_worker_sees_the_run_of_the_other(server, stuck=bound)
                except queue.Empty:
                    misses += 1
                    print(f"  {sync}: check {index} missed a frame for {bound:g} s", flush=True)
                if index % 50 == 0 or index == checks:
                    elapsed = time.monotonic() - started
                    print(
                        f"  {sync}: {index} checks, {misses} missed ({elapsed:.0f} s)", flush=True
                    )
    return misses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=300)
    parser.add_argument("--sync", default="commit,ack", help="PAUSEMESH_SQLITE_SYNC values")
    parser.add_argument("--load", type=int, default=2, help="busy processes beside the server")
    parser.add_argument("--bound", type=float, default=5.0, help="seconds a tail may wait")
    args = parser.parse_args()
    # A missed tail's reader ends when its client is closed: that is counted, not reported.
    threading.excepthook = lambda _args: None
    results: dict[str, int] = {}
    with busy_processes(args.load):
        for sync in args.sync.split(","):
            results[sync] = run_setting(sync, args.checks, args.bound)
    for sync, misses in results.items():
        print(f"{sync}: {misses} of {args.checks} tails missed a frame (load {args.load})")


if __name__ == "__main__":
    main()
