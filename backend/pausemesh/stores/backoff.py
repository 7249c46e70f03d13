"""Trying again for something another process holds: one schedule for every such wait.

Used on a writer thread (never the event loop): the SQLite write turn among processes
(``file_lock.WriteTurn``) and SQLite's own write lock (``SqliteDatabase._begin``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

__all__ = ("attempts",)


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
