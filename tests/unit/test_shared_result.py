"""``SharedResult``: one call's result for every caller waiting on it, as ``asyncio.shield``
around one task gave, with one loop callback per caller."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from pausemesh.core.shared_result import SharedResult

# Liveness bound: only a stuck caller gets near it (never a timing assertion).
STUCK = 30.0


class Call:
    """An awaitable call that runs until released, and counts how often it was started."""

    def __init__(self) -> None:
        self.started = 0
        self.release = asyncio.Event()
        self.error: BaseException | None = None

    async def __call__(self) -> int:
        self.started += 1
        await self.release.wait()
        if self.error is not None:
            raise self.error
        return 42


async def test_every_caller_waiting_gets_the_one_calls_result() -> None:
    call = Call()
    shared = SharedResult(call())
    callers = [asyncio.create_task(shared.get()) for _ in range(20)]
    await asyncio.sleep(0)
    call.release.set()
    async with asyncio.timeout(STUCK):
        assert await asyncio.gather(*callers) == [42] * 20
    assert call.started == 1
    assert await shared.get() == 42  # a caller after the end takes the result as it is


async def test_a_caller_that_goes_away_leaves_the_call_to_the_others() -> None:
    call = Call()
    shared = SharedResult(call())
    leaving = asyncio.create_task(shared.get())
    staying = asyncio.create_task(shared.get())
    await asyncio.sleep(0)
    leaving.cancel()
    await asyncio.sleep(0)
    assert leaving.cancelled()
    assert not shared.task.done()
    call.release.set()
    async with asyncio.timeout(STUCK):
        assert await staying == 42


async def test_a_failed_call_raises_its_error_in_every_caller_waiting() -> None:
    call = Call()
    call.error = OSError("database restarting")
    shared = SharedResult(call())
    callers = [asyncio.create_task(shared.get()) for _ in range(3)]
    await asyncio.sleep(0)
    call.release.set()
    async with asyncio.timeout(STUCK):
        results = await asyncio.gather(*callers, return_exceptions=True)
    assert all(isinstance(r, OSError) and str(r) == "database restarting" for r in results)


async def test_a_failure_no_caller_waited_for_any_more_is_not_reported_as_never_retrieved() -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: reported.append(context))
    try:
        call = Call()
        call.error = OSError("gone")
        shared = SharedResult(call())
        caller = asyncio.create_task(shared.get())
        await asyncio.sleep(0)
        caller.cancel()
        call.release.set()
        async with asyncio.timeout(STUCK):
            while not shared.task.done():  # noqa: ASYNC110 - awaiting it would retrieve it
                await asyncio.sleep(0)
        await asyncio.sleep(0)  # its done-callbacks run
        del shared, caller
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(previous)
    # Only this call's failure counts: the collector may also meet other tests' leftovers.
    assert [c for c in reported if c.get("exception") is call.error] == []


async def test_a_cancelled_call_cancels_its_waiting_callers() -> None:
    call = Call()
    shared = SharedResult(call())
    caller = asyncio.create_task(shared.get())
    await asyncio.sleep(0)
    shared.task.cancel()
    async with asyncio.timeout(STUCK):
        with pytest.raises(asyncio.CancelledError):
            await caller
