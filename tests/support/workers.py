"""Worker processes for the cross-process tests (``tests.support.sqlite_worker`` and friends).

A worker prints ``ready`` once it is set up and then waits for ``go`` on stdin, so several
can be released back to back to race on one file; a racer prints its outcome counts as JSON
on its last line.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

from tests.support.server import REPO_ROOT

__all__ = ("race", "release", "spawn_worker")


def spawn_worker(module: str, *args: str) -> subprocess.Popen[str]:
    """Start ``python -m module *args`` from the repository root; return once it is ready."""
    process = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=REPO_ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready"
    return process


def release(process: subprocess.Popen[str]) -> None:
    assert process.stdin is not None
    process.stdin.write("go\n")
    process.stdin.flush()


def race(workers: list[subprocess.Popen[str]]) -> Counter[str]:
    """Release every ready worker at once; the sum of their outcome counts once all exit 0."""
    for worker in workers:
        release(worker)
    total: Counter[str] = Counter()
    for worker in workers:
        out, _ = worker.communicate(timeout=60)
        assert worker.returncode == 0
        total.update(json.loads(out.strip().splitlines()[-1]))
    return total
