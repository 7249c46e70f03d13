"""``ctx.state`` read when first looked at (``agui/run/state.py``): a plain value read once
inside a step of the agent, each look a copy the agent may change freely; outside a step the
first look is refused."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pausemesh.agui.agent import RunContext
from pausemesh.agui.run.history import HistoryOutsideRunError, step
from pausemesh.agui.run.state import StoredState
from pausemesh.core.threads import UNREAD_STATE


def _state() -> tuple[StoredState, list[int]]:
    reads: list[int] = []

    async def read() -> Any:
        reads.append(1)
        await asyncio.sleep(0)  # a real wait on the loop, as a store read has
        return {"count": 1}

    return StoredState(UNREAD_STATE, read), reads


def _context(state: StoredState) -> RunContext:
    return RunContext(
        thread_id="t", run_id="r", messages=[], state=state.for_agent(), principal=None
    )


async def test_a_look_inside_a_step_reads_the_state_once_as_a_plain_dict() -> None:
    state, reads = _state()
    ctx = _context(state)
    assert reads == []

    async def agent() -> list[Any]:
        await asyncio.sleep(0)
        first = ctx.state
        first["count"] = 99  # the agent's own copy: the run's state is unchanged
        return [type(ctx.state), ctx.state["count"]]

    assert await step(agent()) == [dict, 99]
    assert reads == [1]
    assert state.working_copy() == {"count": 1}
    assert await state.load() == {"count": 1}
    assert reads == [1]


async def test_a_known_state_needs_no_read_and_the_agent_gets_a_copy() -> None:
    async def never() -> Any:
        raise AssertionError

    known = {"count": 2}
    state = StoredState(known, never)
    ctx = _context(state)

    assert ctx.state == known
    assert ctx.state is not known
    assert state.working_copy() is not known


async def test_a_first_look_outside_a_step_is_refused_and_names_the_state() -> None:
    state, reads = _state()
    ctx = _context(state)

    with pytest.raises(HistoryOutsideRunError, match=r"ctx\.state"):
        _ = ctx.state
    assert reads == []
