"""One awaitable's result, awaited by many callers at once: ``SharedResult``.

A thread's thousand tails wake together and each asks for the same head read and the same log
read. ``asyncio.shield`` around one task per caller does that, but costs each caller an outer
future, two callback closures and three loop callbacks. Here each caller awaits one future of
its own, and the end of the call resolves them all in one callback: one loop callback per
caller (its own task's step), as a plain ``await`` of the task would.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Generic, TypeVar

__all__ = ("SharedResult",)

T = TypeVar("T")


class SharedResult(Generic[T]):
    """The result of ``awaitable`` (run as a task), for every caller of ``get``.

    A caller that is cancelled leaves; the call runs on for the others, as under
    ``asyncio.shield``. A call that fails raises its error in every caller waiting then.
    """

    __slots__ = ("_waiters", "task")

    def __init__(self, awaitable: Awaitable[T]) -> None:
        self.task: asyncio.Future[T] = asyncio.ensure_future(awaitable)
        self._waiters: list[asyncio.Future[T]] = []
        self.task.add_done_callback(self._resolve)

    async def get(self) -> T:
        task = self.task
        if task.done():
            return task.result()
        waiter: asyncio.Future[T] = task.get_loop().create_future()
        self._waiters.append(waiter)
        return await waiter

    def _resolve(self, task: asyncio.Future[T]) -> None:
        waiters, self._waiters = self._waiters, []
        if task.cancelled():
            for waiter in waiters:
                waiter.cancel()
            return
        # Taken here whether or not anyone still waits: a failure nobody awaited any more is
        # not "never retrieved" (each caller that waited has raised it).
        error = task.exception()
        for waiter in waiters:
            if waiter.done():
                continue  # its caller was cancelled
            if error is None:
                waiter.set_result(task.result())
            else:
                waiter.set_exception(error)
