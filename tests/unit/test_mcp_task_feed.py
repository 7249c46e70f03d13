"""``pausemesh.mcp.task_feed`` and the GET-stream writer of ``pausemesh.web.mcp_sessions``.

The in-memory stores stand in for the real ones (the feed runs end to end across SQLite and
PostgreSQL in ``tests/protocols/test_mcp_tasks.py`` and
``tests/reliability/test_postgres_mcp_tasks.py``).
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any, cast

import pytest
from litestar.types import Scope

from pausemesh.core import ContinuationService, KeyedTokenIssuer, ManualClock
from pausemesh.core.instance import ProcessInstance
from pausemesh.core.leases import LeaseKeeper
from pausemesh.mcp.task_feed import TaskFeed, TaskStatusObserver, feed_thread_id
from pausemesh.mcp.tasks import McpTasks, TaskEntry
from pausemesh.observability.observer import CollectingObserver
from pausemesh.stores.memory import InMemoryEventStore, InMemoryThreadStore
from pausemesh.web.mcp_sessions import SessionStream

QUESTION = {"kind": "input", "message": "Which flight?", "responseSchema": {"type": "object"}}


@pytest.fixture(name="threads")
def threads_fixture() -> InMemoryThreadStore:
    return InMemoryThreadStore()


@pytest.fixture(name="clock")
def clock_fixture() -> ManualClock:
    return ManualClock()


def _keeper(
    threads: InMemoryThreadStore, clock: ManualClock, instance: ProcessInstance
) -> LeaseKeeper:
    return LeaseKeeper(threads, clock=clock, ttl=timedelta(seconds=3), holder=instance.holder)


def _feed(
    threads: InMemoryThreadStore, clock: ManualClock, keeper: LeaseKeeper | None = None
) -> TaskFeed:
    keeper = keeper or _keeper(threads, clock, ProcessInstance.start(None))
    return TaskFeed(lambda: threads, lambda: clock, lambda: keeper)


@pytest.fixture(name="feed")
def feed_fixture(threads: InMemoryThreadStore, clock: ManualClock) -> TaskFeed:
    return _feed(threads, clock)


@pytest.fixture(name="service")
def service_fixture(clock: ManualClock, feed: TaskFeed) -> ContinuationService:
    service = ContinuationService(
        store=InMemoryEventStore(),
        clock=clock,
        keyed_issuer=KeyedTokenIssuer({"k1": b"k" * 32}, active_key_id="k1"),
    )
    service.observer = TaskStatusObserver(CollectingObserver(), feed)
    return service


async def _task(service: ContinuationService, threads: InMemoryThreadStore, owner: str) -> str:
    created = await service.create(
        payload=QUESTION,
        correlation_id="mcp:test",
        expires_at=service.clock.now() + timedelta(minutes=5),
        owner=owner,
        keyed=True,
    )
    cid = created.continuation.continuation_id
    entry = TaskEntry(tool="t", arguments={}, continuation_id=cid, request_state="s", key="k")
    await McpTasks(lambda: service, lambda: threads).open(owner, entry)
    return cid


async def _following(
    feed: TaskFeed, threads: InMemoryThreadStore, owner: str
) -> asyncio.Task[list[str]]:
    """The first batch ``owner``'s feed yields, once the follower has read the feed's head."""
    follower = feed.follow(owner)
    batch = asyncio.ensure_future(anext(follower))
    # The store has no event for "a follower read the head": yield until its record exists.
    while await threads.get(feed_thread_id(owner)) is None:  # noqa: ASYNC110 - see above
        await asyncio.sleep(0)
    return batch


async def test_the_expiry_of_a_tasks_pause_is_hinted_on_its_owners_feed(
    service: ContinuationService, threads: InMemoryThreadStore, feed: TaskFeed, clock: ManualClock
) -> None:
    task_id = await _task(service, threads, "alice")
    batch = await _following(feed, threads, "alice")

    clock.advance(301)
    await service.expire_due()

    assert await asyncio.wait_for(batch, timeout=10) == [task_id]
    await feed.close()


async def test_a_cancel_hints_only_the_owners_feed(
    service: ContinuationService, threads: InMemoryThreadStore, feed: TaskFeed
) -> None:
    alices = await _task(service, threads, "alice")
    bobs = await _task(service, threads, "bob")
    alice = await _following(feed, threads, "alice")
    bob = await _following(feed, threads, "bob")

    await service.cancel(continuation_id=bobs, reason="r", principal="bob")
    await service.cancel(continuation_id=alices, reason="r", principal="alice")

    assert await asyncio.wait_for(alice, timeout=10) == [alices]
    assert await asyncio.wait_for(bob, timeout=10) == [bobs]
    await feed.close()


class _DyingThreads(InMemoryThreadStore):
    """The in-memory thread store; while ``dying``, a lease given back never arrives (the
    process was killed before it gave it back)."""

    dying = True

    async def release_lease(self, thread_id: str, *, lease_id: str) -> None:
        if not self.dying:
            await super().release_lease(thread_id, lease_id=lease_id)


async def test_a_publisher_that_died_holding_a_feed_does_not_block_its_restarted_replica(
    clock: ManualClock,
) -> None:
    threads = _DyingThreads()
    before = ProcessInstance.start("replica-a")
    await _feed(threads, clock, _keeper(threads, clock, before)).publish("task-1", "alice")
    record = await threads.get(feed_thread_id("alice"))
    assert record is not None
    assert record.lease is not None  # the dead process's lease, under its instance
    # The replica restarts under the same name and frees its predecessor's leases at once
    # (the clock does not move: nothing lapsed), so the next hint goes through.
    threads.dying = False
    after = ProcessInstance.start("replica-a")
    assert await threads.release_instance_leases("replica-a", keep=after.holder) == 1
    feed = _feed(threads, clock, _keeper(threads, clock, after))
    await feed.publish("task-2", "alice")
    hints = await threads.read_events(feed_thread_id("alice"), after_sequence=0)
    assert [json.loads(h.event_json)["taskId"] for h in hints] == ["task-1", "task-2"]
    await feed.close()


def test_each_owner_has_its_own_fixed_size_feed() -> None:
    ids = {feed_thread_id(owner) for owner in ("alice", "bob", None, "x" * 5000)}

    assert len(ids) == 4
    assert len({len(thread_id) for thread_id in ids}) == 1


async def test_a_notice_goes_into_the_stream_only_between_two_events() -> None:
    sent: list[dict[str, Any]] = []

    async def send(message: Any) -> None:
        sent.append(message)

    stream = SessionStream(send, cast("Scope", {"type": "http"}))
    await stream.sdk_send({"type": "http.response.start", "status": 200, "headers": []})
    await stream.sdk_send({"type": "http.response.body", "body": b"data: one", "more_body": True})
    await stream.write(b"data: notice\n\n")
    await stream.sdk_send({"type": "http.response.body", "body": b"\n\n", "more_body": True})
    await stream.write(b"data: again\n\n")
    await stream.sdk_send({"type": "http.response.body", "body": b"", "more_body": False})
    await stream.write(b"data: too late\n\n")

    bodies = [m.get("body") for m in sent if m["type"] == "http.response.body"]
    assert bodies == [b"data: one", b"\n\n", b"data: notice\n\n", b"data: again\n\n", b""]


class _CountingThreads(InMemoryThreadStore):
    """The in-memory thread store, counting the records it is asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.gets = 0

    async def get(self, thread_id: str, *, tail: int | None = None, state: bool = True) -> Any:
        self.gets += 1
        return await super().get(thread_id, tail=tail, state=state)


async def test_a_pause_that_is_not_mcps_costs_the_feed_no_read_when_it_changes(
    clock: ManualClock,
) -> None:
    threads = _CountingThreads()
    feed = _feed(threads, clock)
    service = ContinuationService(
        store=InMemoryEventStore(),
        clock=clock,
        keyed_issuer=KeyedTokenIssuer({"k1": b"k" * 32}, active_key_id="k1"),
    )
    service.observer = TaskStatusObserver(CollectingObserver(), feed)
    rest = await service.create(payload=QUESTION, correlation_id="order:1", owner="alice")
    mcp = await service.create(payload=QUESTION, correlation_id="mcp:1", owner="alice")

    await service.cancel(continuation_id=rest.continuation.continuation_id, principal="alice")
    for _ in range(5):
        await asyncio.sleep(0)
    assert threads.gets == 0

    await service.cancel(continuation_id=mcp.continuation.continuation_id, principal="alice")
    for _ in range(5):
        await asyncio.sleep(0)
    assert threads.gets == 1  # the MCP pause is looked up: it may be a task's
    await feed.close()
