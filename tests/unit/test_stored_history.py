"""``ctx.messages`` read when looked at (``agui/run/history.py``): a synchronous look inside a
step of the agent waits for the store's read on the event loop; the read's failure and the
run's cancellation reach the agent where it looked; outside a step a look is refused."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from pausemesh.agui.events import Message, UserMessage
from pausemesh.agui.run.history import HistoryOutsideRunError, StoredHistory, step

STORED = [UserMessage(id=f"u{n}", content=f"turn {n}") for n in range(5)]
RUN = contextvars.ContextVar("RUN", default="none")


def _history(
    read_started: asyncio.Event | None = None, gate: asyncio.Event | None = None, fail: bool = False
) -> tuple[StoredHistory, list[tuple[int, int]]]:
    reads: list[tuple[int, int]] = []

    async def read(start: int, end: int) -> list[Message]:
        reads.append((start, end))
        if read_started is not None:
            read_started.set()
        if gate is not None:
            await gate.wait()
        await asyncio.sleep(0)  # a real wait on the loop, as a store read has
        if fail:
            msg = "the store is down"
            raise OSError(msg)
        return list(STORED[start:end])

    added = [UserMessage(id="mine", content="now")]
    return StoredHistory(len(STORED), added, read), reads


async def test_a_look_inside_a_step_waits_for_the_read_and_sees_the_runs_context() -> None:
    history, reads = _history()
    RUN.set("r1")

    async def agent() -> list[str]:
        await asyncio.sleep(0)
        seen = [history[-2].id, RUN.get()]
        await asyncio.sleep(0)
        return [*seen, *(m.id for m in history)]

    assert await step(agent()) == ["u4", "r1", "u0", "u1", "u2", "u3", "u4", "mine"]
    assert reads == [(4, 5), (0, 4)]
    assert history.whole


async def test_cancelling_the_run_while_a_read_waits_cancels_it_where_the_agent_looked() -> None:
    started, gate = asyncio.Event(), asyncio.Event()
    history, _ = _history(started, gate)
    where: list[str] = []

    async def agent() -> None:
        try:
            history[0]
        except asyncio.CancelledError:
            where.append("at the look")
            raise

    task = asyncio.create_task(step(agent()))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert where == ["at the look"]
    assert not history.whole


async def test_a_failed_read_raises_where_the_agent_looked() -> None:
    history, _ = _history(fail=True)

    async def agent() -> str:
        try:
            return history[0].id
        except OSError as error:
            return f"caught: {error}"

    assert await step(agent()) == "caught: the store is down"


async def test_a_look_outside_a_step_is_refused_and_what_needs_no_read_is_not() -> None:
    history, reads = _history()
    assert len(history) == 6
    assert history[-1].id == "mine"
    with pytest.raises(HistoryOutsideRunError):
        history[0]
    assert reads == []
