"""In-process wake-ups for the thread live tail (memory and SQLite stores)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

__all__ = ("ThreadNotifier",)


class ThreadNotifier:
    """One ``asyncio.Event`` per watched thread, swapped out on every notification.

    A waiter grabs the current event *before* re-checking the log, so an append that commits
    between the check and the wait still wakes it.
    """

    def __init__(self) -> None:
        self._events: dict[str, asyncio.Event] = {}

    def current(self, thread_id: str) -> asyncio.Event:
        event = self._events.get(thread_id)
        if event is None:
            event = self._events[thread_id] = asyncio.Event()
        return event

    @property
    def watching(self) -> bool:
        """Whether some thread has (or recently had) a waiter."""
        return bool(self._events)

    def notify(self, thread_id: str) -> None:
        event = self._events.pop(thread_id, None)
        if event is not None:
            event.set()

    @staticmethod
    async def wait(event: asyncio.Event, wait_seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait_seconds):
                await event.wait()

    async def wait_past(
        self,
        thread_id: str,
        after_sequence: int,
        wait_seconds: float,
        head: Callable[[], Awaitable[int]],
    ) -> bool:
        """``wait_for_events`` over ``head`` (the thread's last sequence, read from the log)."""
        event = self.current(thread_id)
        if await head() > after_sequence:
            return True
        await self.wait(event, wait_seconds)
        return await head() > after_sequence
