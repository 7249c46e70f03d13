"""Trying again for something that failed: one schedule for every such wait.

``attempts`` is used on a writer thread (never the event loop): the SQLite write turn among
processes (``file_lock.WriteTurn``) and SQLite's own write lock (``SqliteDatabase._begin``).
``retry_delay`` spaces the attempts of a delivery that failed (the A2A push outbox): doubling,
capped, with jitter so that many deliveries failing together do not come back together.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator

__all__ = ("attempts", "retry_delay")


def attempts(within: float, first: float, longest: float) -> Iterator[None]:
    """Yield once per attempt: at once, then after pauses doubling from ``first`` up to
    ``longest``, until ``within`` seconds passed (``within=0``: a single attempt)."""
    deadline = time.monotonic() + within
    pause = first
    yield
    while time.monotonic() < deadline:
        time.sleep(pause)
        pause = min(pause * 2, longest)
        yield


def retry_delay(
    failures: int,
    first: float,
    longest: float,
    *,
    uniform: Callable[[float, float], float] = random.uniform,
) -> float:
    """Seconds to wait after the ``failures``-th failure in a row: ``first`` doubling per
    failure up to ``longest``, then drawn from its upper half ("equal jitter": never less
    than half the step, so a failing target is never hammered)."""
    step = min(first * 2 ** max(failures - 1, 0), longest)
    return uniform(step / 2, step)
