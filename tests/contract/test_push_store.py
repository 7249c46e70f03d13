"""The push store (A2A push configurations and the outbox) on every store kind.

A notice is queued with the task write that caused it, one delivery per live webhook, or not
at all when that write loses its CAS; a claimed delivery is leased to one holder, taken again
under the same id once the lease lapses, retried when told, given up when told; webhooks are
scoped to their owner and a retired one gets no new deliveries. Through the A2A task store, a
notice is queued when a task enters a state a client is told about, and only then.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from a2a.server.cluster import TaskVersion
from a2a.server.context import ServerCallContext
from a2a.types import Task, TaskState, TaskStatus

from pausemesh.a2a.store import PRINCIPAL_STATE_KEY, ThreadBackedTaskStore, task_thread_id
from pausemesh.core.errors import VersionConflictError
from pausemesh.core.push import PushConfigRecord, PushNotice, PushStore
from pausemesh.core.threads import ThreadStore
from tests.support.push_stores import PUSH_STORE_FACTORIES, open_push_store

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LEASE = timedelta(seconds=30)


@pytest.fixture(name="stores", params=sorted(PUSH_STORE_FACTORIES))
async def stores_fixture(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[ThreadStore, PushStore]]:
    async with open_push_store(request.param, tmp_path) as stores:
        yield stores


def hook(config_id: str, *, task_id: str = "t1", owner: str | None = "alice") -> PushConfigRecord:
    url = f"https://hooks.example/{config_id}"
    return PushConfigRecord(
        task_id=task_id, config_id=config_id, owner=owner, config={"id": config_id, "url": url}
    )


def notice(event_id: str = "e1", task_id: str = "t1") -> PushNotice:
    return PushNotice(event_id=event_id, task_id=task_id, payload={"id": task_id, "n": event_id})


async def change(
    threads: ThreadStore, push: PushStore, event: str = "e1", task_id: str = "t1"
) -> None:
    record = await threads.create_or_load(task_thread_id(task_id), owner="alice", now=T0)
    await push.save_task(record, now=T0, notice=notice(event, task_id))


async def test_a_notice_queues_one_delivery_per_live_webhook_with_the_task_write(
    stores: tuple[ThreadStore, PushStore],
) -> None:
    threads, push = stores
    for config_id in ("a", "b", "c"):
        await push.set_config(hook(config_id), now=T0)
    await push.set_config(hook("other", task_id="t2"), now=T0)
    await push.delete_config("t1", "alice", "c", now=T0)
    before = await threads.create_or_load(task_thread_id("t1"), owner="alice", now=T0)

    saved = await push.save_task(before, now=T0, notice=notice())
    claimed = await push.claim(now=T0, holder="h1", lease_until=T0 + LEASE, limit=10)

    assert saved.version == before.version + 1
    assert sorted(d.config["id"] for d in claimed) == ["a", "b"]
    assert {d.payload["n"] for d in claimed} == {"e1"}
    assert {d.attempts for d in claimed} == {1}
    assert len({d.delivery_id for d in claimed}) == 2


async def test_a_task_write_that_loses_its_cas_queues_nothing(
    stores: tuple[ThreadStore, PushStore],
) -> None:
    threads, push = stores
    await push.set_config(hook("a"), now=T0)
    stale = await threads.create_or_load(task_thread_id("t1"), owner="alice", now=T0)
    await push.save_task(stale, now=T0, notice=None)

    with pytest.raises(VersionConflictError):
        await push.save_task(stale, now=T0, notice=notice("lost"))

    assert await push.claim(now=T0, holder="h1", lease_until=T0 + LEASE, limit=10) == []


async def test_a_leased_delivery_is_taken_again_under_the_same_id_once_the_lease_lapses(
    stores: tuple[ThreadStore, PushStore],
) -> None:
    threads, push = stores
    await push.set_config(hook("a"), now=T0)
    await change(threads, push)
    [first] = await push.claim(now=T0, holder="dead", lease_until=T0 + LEASE, limit=10)

    during = await push.claim(now=T0 + LEASE / 2, holder="h2", lease_until=T0 + LEASE, limit=10)
    [again] = await push.claim(now=T0 + LEASE, holder="h2", lease_until=T0 + 2 * LEASE, limit=10)
    late = await push.settle(
        first.delivery_id, holder="dead", now=T0 + LEASE, delivered=True, retry_at=None, error=None
    )
    settled = await push.settle(
        again.delivery_id, holder="h2", now=T0 + LEASE, delivered=True, retry_at=None, error=None
    )

    assert during == []
    assert (again.delivery_id, again.attempts) == (first.delivery_id, 2)
    assert (late, settled) == (False, True)
    assert await push.delivery_state(first.delivery_id) == (2, True, None)
    assert await push.claim(now=T0 + 9 * LEASE, holder="h3", lease_until=T0, limit=10) == []


async def test_a_failed_attempt_is_retried_when_scheduled_and_given_up_without_a_retry(
    stores: tuple[ThreadStore, PushStore],
) -> None:
    threads, push = stores
    await push.set_config(hook("a"), now=T0)
    await change(threads, push)
    [first] = await push.claim(now=T0, holder="h", lease_until=T0 + LEASE, limit=10)
    retry_at = T0 + timedelta(seconds=5)
    await push.settle(
        first.delivery_id, holder="h", now=T0, delivered=False, retry_at=retry_at, error="HTTP 503"
    )

    early = await push.claim(now=T0, holder="h", lease_until=T0 + LEASE, limit=10)
    [second] = await push.claim(now=retry_at, holder="h", lease_until=retry_at + LEASE, limit=10)
    await push.settle(
        second.delivery_id, holder="h", now=retry_at, delivered=False, retry_at=None, error="gone"
    )

    assert early == []
    assert second.attempts == 2
    assert await push.delivery_state(first.delivery_id) == (2, False, "gone")
    assert await push.claim(now=T0 + 9 * LEASE, holder="h", lease_until=T0, limit=10) == []


async def test_webhooks_are_scoped_to_their_owner_and_a_retired_one_gets_nothing_new(
    stores: tuple[ThreadStore, PushStore],
) -> None:
    threads, push = stores
    await push.set_config(hook("a"), now=T0)
    await push.set_config(hook("b", owner=None), now=T0)
    await push.delete_config("t1", "mallory", None, now=T0)  # not hers: nothing happens

    alices = await push.configs("t1", "alice")
    anonymous = await push.configs("t1", None)
    await push.delete_config("t1", "alice", None, now=T0)
    await change(threads, push)
    claimed = await push.claim(now=T0, holder="h", lease_until=T0 + LEASE, limit=10)

    assert [c.config_id for c in alices] == ["a"]
    assert [c.config_id for c in anonymous] == ["b"]
    assert await push.configs("t1", "alice") == []
    assert [d.config["id"] for d in claimed] == ["b"]


async def test_concurrent_claims_give_each_delivery_to_exactly_one_holder(
    stores: tuple[ThreadStore, PushStore],
) -> None:
    threads, push = stores
    for task_number in range(10):
        await push.set_config(hook("a", task_id=f"t{task_number}"), now=T0)
        await change(threads, push, event=f"e{task_number}", task_id=f"t{task_number}")

    rounds = await asyncio.gather(
        *(push.claim(now=T0, holder=f"h{n}", lease_until=T0 + LEASE, limit=3) for n in range(20))
    )

    claimed = [d.delivery_id for batch in rounds for d in batch]
    assert len(claimed) == 10
    assert len(set(claimed)) == 10


def caller() -> ServerCallContext:
    return ServerCallContext(state={PRINCIPAL_STATE_KEY: "alice"})


async def test_the_task_store_queues_a_notice_when_a_task_enters_a_notified_state(
    stores: tuple[ThreadStore, PushStore],
) -> None:
    threads, push = stores
    woken: list[int] = []
    tasks = ThreadBackedTaskStore(
        lambda: threads, push=lambda: push, on_notice=lambda: woken.append(1)
    )
    await push.set_config(hook("a"), now=T0)
    version = TaskVersion.MISSING
    states = [
        TaskState.TASK_STATE_WORKING,
        TaskState.TASK_STATE_INPUT_REQUIRED,
        TaskState.TASK_STATE_INPUT_REQUIRED,  # rewritten with more history: no new notice
        TaskState.TASK_STATE_WORKING,
        TaskState.TASK_STATE_COMPLETED,
    ]
    for state in states:
        task = Task(id="t1", context_id="c1", status=TaskStatus(state=state))
        version = await tasks.save(
            task, event=None, prev=None, prev_version=version, context=caller()
        )

    claimed = await push.claim(now=datetime.now(UTC), holder="h", lease_until=T0 + LEASE, limit=10)

    assert sorted(d.payload["status"]["state"] for d in claimed) == [
        "TASK_STATE_COMPLETED",
        "TASK_STATE_INPUT_REQUIRED",
    ]
    assert len(woken) == 2
