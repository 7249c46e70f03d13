"""Tails of one thread share each read of its log in a process: one read per wake-up, each
tail gets exactly its own events in order, and a failed read fails every tail that took it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from datetime import UTC, datetime

import pytest

from pausemesh.agui.agent import AgentOutput, RunContext
from pausemesh.agui.run import RunHost
from pausemesh.core import ContinuationService, KeyedTokenIssuer, ManualClock
from pausemesh.core.errors import StoreError
from pausemesh.core.threads import ThreadLogEntry
from pausemesh.stores.memory import InMemoryEventStore, InMemoryThreadStore

# Liveness bound: only a stuck tail gets near it (never a timing assertion).
STUCK = 30.0
NOW = datetime(2026, 1, 1, tzinfo=UTC)


class CountedThreads(InMemoryThreadStore):
    """The in-memory store, counting the reads of the log."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    async def read_events(
        self, thread_id: str, *, after_sequence: int, limit: int = 1000
    ) -> list[ThreadLogEntry]:
        self.reads += 1
        return await super().read_events(thread_id, after_sequence=after_sequence, limit=limit)


async def _idle(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    return
    yield


def _host(threads: InMemoryThreadStore) -> RunHost:
    clock = ManualClock()
    service = ContinuationService(
        store=InMemoryEventStore(),
        clock=clock,
        keyed_issuer=KeyedTokenIssuer({"k1": b"k" * 32}, "k1"),
    )
    return RunHost(agent=_idle, service=service, threads=threads, clock=clock)


async def _thread_with(threads: InMemoryThreadStore, count: int) -> None:
    await threads.create_or_load("t1", owner="alice", now=NOW)
    await threads.acquire_lease("t1", lease_id="l1", run_id="r1", now=NOW, expires_at=NOW)
    await _append(threads, count)


async def _append(threads: InMemoryThreadStore, count: int) -> None:
    await threads.append_events(
        "t1", lease_id="l1", run_id="r1", events=[f'{{"n":{n}}}' for n in range(count)]
    )


async def _ids(tail: AsyncGenerator[bytes, None], until: int) -> list[int]:
    """The ``id:`` of every frame the tail sends up to sequence ``until`` (keep-alives skipped)."""
    seen: list[int] = []
    async for chunk in tail:
        seen += [int(line[4:]) for line in chunk.decode().split("\n") if line.startswith("id: ")]
        if seen and seen[-1] >= until:
            return seen
    return seen


async def test_tails_with_different_marks_each_get_exactly_their_events_in_order() -> None:
    threads = InMemoryThreadStore()
    host = _host(threads)
    await _thread_with(threads, 3)
    early = asyncio.create_task(_ids(host.tail("t1", after_sequence=0), until=6))
    late = asyncio.create_task(_ids(host.tail("t1", after_sequence=2), until=6))
    caught_up = asyncio.create_task(_ids(host.tail("t1", after_sequence=3), until=6))
    await asyncio.sleep(0.01)  # let them catch up and wait
    await _append(threads, 2)
    await _append(threads, 1)
    async with asyncio.timeout(STUCK):
        assert await early == [1, 2, 3, 4, 5, 6]
        assert await late == [3, 4, 5, 6]
        assert await caught_up == [4, 5, 6]


async def test_one_event_is_read_once_for_every_waiting_tail_of_its_thread() -> None:
    threads = CountedThreads()
    host = _host(threads)
    await _thread_with(threads, 1)
    tails = [
        asyncio.create_task(_ids(host.tail("t1", after_sequence=1), until=2)) for _ in range(50)
    ]
    await asyncio.sleep(0.01)  # every tail read (nothing past its mark) and now waits
    before = threads.reads
    await _append(threads, 1)
    async with asyncio.timeout(STUCK):
        assert await asyncio.gather(*tails) == [[2]] * 50
    assert threads.reads - before == 1


async def test_every_tail_that_took_a_failed_read_gets_its_error() -> None:
    threads = InMemoryThreadStore()
    host = _host(threads)
    await _thread_with(threads, 2)
    await threads.close()
    tails = [host.tail("t1", after_sequence=0) for _ in range(3)]
    async with asyncio.timeout(STUCK):
        results = await asyncio.gather(*(anext(t) for t in tails), return_exceptions=True)
    assert all(isinstance(r, StoreError) for r in results)
    assert {r.code for r in results if isinstance(r, StoreError)} == {"STORE_UNAVAILABLE"}


async def test_a_tail_that_goes_away_mid_read_leaves_the_read_to_the_others() -> None:
    threads = InMemoryThreadStore()
    host = _host(threads)
    await _thread_with(threads, 2)
    leaving = asyncio.create_task(anext(host.tail("t1", after_sequence=0)))
    staying = asyncio.create_task(_ids(host.tail("t1", after_sequence=0), until=2))
    await asyncio.sleep(0)  # both asked: one read in flight
    leaving.cancel()
    async with asyncio.timeout(STUCK):
        assert await staying == [1, 2]
    with pytest.raises(asyncio.CancelledError):
        await leaving
