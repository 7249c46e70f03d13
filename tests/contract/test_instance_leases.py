"""The leases the expiry sweep and A2A follow-ups take follow the process, on every thread store.

Each is an instance lease of the process's keeper (``core/leases.py``): under the instance's
holder, with the short TTL, renewed while held. So a dead instance's lease is free once its
TTL passes without renewal, and a restarted replica (same instance name) frees its
predecessor's at once; what the dead holder still tries to write is refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, NamedTuple, cast

import msgspec
import pytest

from pausemesh.a2a.follow_ups import FollowUpGate
from pausemesh.a2a.store import task_thread_id
from pausemesh.agui.run.expiry import EXPIRED_EVENT, close_lapsed
from pausemesh.core import ContinuationService, ManualClock
from pausemesh.core.errors import LeaseLostError, ThreadBusyError
from pausemesh.core.leases import LeaseKeeper
from pausemesh.core.threads import (
    CohortReceipt,
    IssuedCohort,
    ReceiptInterrupt,
    ThreadStore,
    lease_holder,
)
from pausemesh.stores.memory import InMemoryEventStore

TTL = timedelta(seconds=5)


def _keeper(threads: ThreadStore, clock: ManualClock, name: str, instance: str) -> LeaseKeeper:
    return LeaseKeeper(threads, clock=clock, ttl=TTL, holder=lease_holder(name, instance))


async def _held_lease(threads: ThreadStore, thread_id: str) -> tuple[str, Any]:
    record = await threads.get(thread_id)
    assert record is not None
    assert record.lease is not None
    return record.lease.lease_id, record.lease.expires_at


# -- A2A follow-ups ----------------------------------------------------------------------


async def _task_thread(threads: ThreadStore, clock: ManualClock) -> str:
    thread_id = task_thread_id("task-1")
    await threads.create_or_load(thread_id, owner="alice", now=clock.now())
    return thread_id


async def test_a_follow_up_holds_an_instance_lease_that_a_restart_of_its_replica_frees_at_once(
    threads: ThreadStore,
) -> None:
    clock = ManualClock()
    thread_id = await _task_thread(threads, clock)
    old = _keeper(threads, clock, "replica-a:8787", "i1")
    restarted = _keeper(threads, clock, "replica-a:8787", "i2")
    async with FollowUpGate(lambda: old).hold("task-1", run_id="m1"):
        lease_id, expires_at = await _held_lease(threads, thread_id)
        assert lease_id.startswith(old.holder)
        assert expires_at == clock.now() + TTL  # the short TTL, renewed while held
        assert old.held == {thread_id: lease_id}
        # The replica died here and starts again: its new instance frees the old leases.
        assert await threads.release_instance_leases("replica-a:8787", keep=restarted.holder)
        async with (
            asyncio.timeout(10),  # the gate polls; without the freeing it would wait for ever
            FollowUpGate(lambda: restarted).hold("task-1", run_id="m2"),
        ):
            assert (await _held_lease(threads, thread_id))[0].startswith(restarted.holder)
    assert old.held == {}
    assert restarted.held == {}
    record = await threads.get(thread_id)
    assert record is not None
    assert record.lease is None


async def test_a_follow_up_whose_instance_stopped_renewing_frees_the_task_after_the_ttl(
    threads: ThreadStore,
) -> None:
    clock = ManualClock()
    thread_id = await _task_thread(threads, clock)
    dead = _keeper(threads, clock, "replica-a:8787", "i1")
    other = _keeper(threads, clock, "replica-b:8787", "i1")
    async with FollowUpGate(lambda: dead).hold("task-1", run_id="m1"):
        lease_id, _ = await _held_lease(threads, thread_id)
        dead.drop(thread_id, lease_id)  # its process is gone: nobody renews the lease
        now = clock.now()
        with pytest.raises(ThreadBusyError):  # live until its TTL has passed
            await threads.acquire_lease(
                thread_id, lease_id="probe", run_id="m2", now=now, expires_at=now + TTL
            )
        clock.advance(TTL.total_seconds())
        async with (
            asyncio.timeout(10),
            FollowUpGate(lambda: other).hold("task-1", run_id="m2"),
        ):
            assert (await _held_lease(threads, thread_id))[0].startswith(other.holder)


# -- the expiry sweep ----------------------------------------------------------------------


class _PausedAppends:
    """The store under test, with its appends held at a gate (to look inside a close)."""

    def __init__(self, threads: ThreadStore) -> None:
        self.threads = threads
        self.reached = asyncio.Event()
        self.go = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.threads, name)

    async def append_events(
        self,
        thread_id: str,
        *,
        lease_id: str,
        run_id: str,
        events: Sequence[str],
        release: bool = False,
    ) -> list[int]:
        self.reached.set()
        await self.go.wait()
        return await self.threads.append_events(
            thread_id, lease_id=lease_id, run_id=run_id, events=events, release=release
        )


async def _lapsed_thread(
    threads: ThreadStore, clock: ManualClock
) -> tuple[str, ContinuationService]:
    """A thread whose one open question has expired (nobody can answer it any more)."""
    service = ContinuationService(store=InMemoryEventStore(), clock=clock)
    expires_at = clock.now() + timedelta(minutes=1)
    created = await service.create(payload={"q": 1}, owner="alice", expires_at=expires_at)
    cid = created.continuation.continuation_id
    cohort = IssuedCohort(
        receipt=CohortReceipt(
            schema_version=1,
            cohort_id="agui-cohort:t1",
            thread_id="t1",
            run_id="r1",
            interrupts=(
                ReceiptInterrupt(
                    continuation_id=cid,
                    expires_at=expires_at.isoformat(),
                    issued_version=1,
                    payload_hash="0" * 64,
                ),
            ),
        ),
        interrupts=({"id": cid, "reason": "input_required"},),
    )
    record = await threads.create_or_load("t1", owner="alice", now=clock.now())
    await threads.save(msgspec.structs.replace(record, open_receipt=cohort), now=clock.now())
    clock.advance(120)
    return "t1", service


class _StalledClose(NamedTuple):
    clock: ManualClock
    thread_id: str
    keeper: LeaseKeeper
    paused: _PausedAppends
    closing: asyncio.Task[bool]
    lease_id: str


async def _close_stalled_at_its_append(threads: ThreadStore) -> _StalledClose:
    """An expiry close by replica-a's instance i1, held at its append under its lease."""
    clock = ManualClock()
    thread_id, service = await _lapsed_thread(threads, clock)
    paused = _PausedAppends(threads)
    keeper = _keeper(cast("ThreadStore", paused), clock, "replica-a:8787", "i1")
    closing = asyncio.create_task(close_lapsed(keeper, service, thread_id))
    await asyncio.wait_for(paused.reached.wait(), 10)
    lease_id, _ = await _held_lease(threads, thread_id)
    return _StalledClose(clock, thread_id, keeper, paused, closing, lease_id)


async def test_an_expiry_close_holds_an_instance_lease_and_writes_nothing_once_a_restart_freed_it(
    threads: ThreadStore,
) -> None:
    clock, thread_id, sweeper, paused, closing, lease_id = await _close_stalled_at_its_append(
        threads
    )
    _, expires_at = await _held_lease(threads, thread_id)
    assert lease_id.startswith(sweeper.holder)
    assert expires_at == clock.now() + TTL  # the short TTL, not a fixed 30 s
    assert sweeper.held == {thread_id: lease_id}
    # The sweeping replica starts again: its predecessor's lease is freed at once, and a run
    # on another replica takes the thread.
    restarted = lease_holder("replica-a:8787", "i2")
    assert await threads.release_instance_leases("replica-a:8787", keep=restarted) == 1
    now = clock.now()
    await threads.acquire_lease(
        thread_id, lease_id="replica-b/run", run_id="r2", now=now, expires_at=now + TTL
    )
    paused.go.set()
    with pytest.raises(LeaseLostError):
        await closing  # the old close writes nothing
    assert await threads.read_events(thread_id, after_sequence=0) == []
    record = await threads.get(thread_id)
    assert record is not None
    assert record.open_receipt is not None
    assert record.lease is not None
    assert record.lease.lease_id == "replica-b/run"
    assert sweeper.held == {}


async def test_an_expiry_close_whose_instance_died_frees_the_thread_after_the_ttl(
    threads: ThreadStore,
) -> None:
    clock, thread_id, dead, _, closing, lease_id = await _close_stalled_at_its_append(threads)
    dead.drop(thread_id, lease_id)  # its process is gone: nobody renews the lease
    now = clock.now()
    with pytest.raises(ThreadBusyError):  # live until its TTL has passed
        await threads.acquire_lease(
            thread_id, lease_id="replica-b/run", run_id="r2", now=now, expires_at=now + TTL
        )
    clock.advance(TTL.total_seconds())
    now = clock.now()
    await threads.acquire_lease(
        thread_id, lease_id="replica-b/run", run_id="r2", now=now, expires_at=now + TTL
    )
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing


async def test_an_expiry_close_takes_and_releases_an_instance_lease(threads: ThreadStore) -> None:
    clock = ManualClock()
    thread_id, service = await _lapsed_thread(threads, clock)
    sweeper = _keeper(threads, clock, "replica-a:8787", "i1")
    assert await close_lapsed(sweeper, service, thread_id)
    log = await threads.read_events(thread_id, after_sequence=0)
    assert [EXPIRED_EVENT in e.event_json for e in log] == [False, True, False]
    record = await threads.get(thread_id)
    assert record is not None
    assert record.open_receipt is None
    assert record.lease is None
    assert sweeper.held == {}
