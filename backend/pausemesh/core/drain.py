"""Draining: what a process does between SIGTERM and its exit.

``Drain.begin(grace)`` (the server calls it when it is asked to stop) turns new runs and
streams away (``SERVER_SHUTTING_DOWN``), ends live tails at once with a clean end of stream
(their clients reconnect elsewhere with ``Last-Event-ID``), and gives in-flight runs ``grace``
seconds before they end with ``RUN_ERROR`` ``SERVER_SHUTTING_DOWN``. The runs and tails watch
the deadline and the event; nothing here cancels a task.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ("Drain",)


class Drain:
    """One process's shutdown state (never un-set: a drained process exits)."""

    __slots__ = ("_event", "_wakers", "deadline")

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._wakers: set[Callable[[], None]] = set()
        self.deadline: float | None = None
        """The loop time in-flight runs must end by (None until the drain begins)."""

    @property
    def draining(self) -> bool:
        return self.deadline is not None

    def begin(self, grace_seconds: float) -> None:
        """Start draining now (idempotent: the first call sets the deadline)."""
        if self.deadline is not None:
            return
        self.deadline = asyncio.get_running_loop().time() + grace_seconds
        self._event.set()
        for wake in list(self._wakers):
            wake()

    def seconds_left(self) -> float | None:
        """Seconds until the deadline (<= 0 once it passed); None while not draining."""
        if self.deadline is None:
            return None
        return self.deadline - asyncio.get_running_loop().time()

    async def wait(self) -> None:
        await self._event.wait()

    def watch(self, wake: Callable[[], None]) -> Callable[[], None]:
        """Call ``wake`` when the drain begins; returns the function that stops watching."""
        self._wakers.add(wake)
        return lambda: self._wakers.discard(wake)
