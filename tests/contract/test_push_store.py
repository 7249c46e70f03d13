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
from pausemesh.core.push import (
    NO_OUTCOME,
    PushClaim,
    PushConfigRecord,
    PushDelivery,
    PushDeliveryState,
    PushNotice,
    PushStore,
)
from pausemesh.core.threads import ThreadStore
from tests.support.push_stores import (
    PUSH_STORE_FACTORIES,
    PUSH_STORE_REOPENERS,
    open_push_store,
    reopen_push_store,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LEASE = timedelta(seconds=30)


@pytest.fixture(name="stores", params=sorted(PUSH_STORE_FACTORIES))
async def stores_fixture(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[ThreadStore, PushStore]]:
    async with open_push_store(request.param, tmp_path) as stores:
        yield stores


async def claim(
    push: PushStore,
    now: datetime,
    *,
    holder: str = "h",
    lease_until: datetime | None = None,
    limit: int = 10,
    max_attempts: int = 12,
    per_key: int = 10,
) -> list[PushDelivery]:
    """The deliveries one claim leased (``claim_all`` for what it gave up too)."""
    taken = await claim_all(
        push,
        now,
        holder=holder,
        lease_until=lease_until,
        limit=limit,
        max_attempts=max_attempts,
        per_key=per_key,
    )
    return taken.deliveries


async def claim_all(
    push: PushStore,
    now: datetime,
    *,
    holder: str = "h",
    lease_until: datetime | None = None,
    limit: int = 10,
    max_attempts: int = 12,
    per_key: int = 10,
) -> PushClaim:
    return await push.claim(
        now=now,
        holder=holder,
        lease_until=now + LEASE if lease_until is None else lease_until,
        limit=limit,
        max_attempts=max_attempts,
        per_key=per_key,
    )


def hook(
    config_id: str, *, task_id: str = "t1", owner: str | None = "alice", url: str | None = None
) -> PushConfigRecord:
    url = url or f"https://hooks.example/{config_id}"
    return PushConfigRecord(
        task_id=task_id, config_id=config_id, owner=owner, config={"id": config_id, "url": url}
    )


def notice(event_id: str = "e1", task_id: str = "t1") -> PushNotice:
    return PushNotice(event_id=event_id, task_id=task_id, payload={"id": task_id, "n": event_id})


async def change(
    threads: ThreadStore,
    push: PushStore,
    event: str = "e1",
    task_id: str = "t1",
    *,
    at: datetime = T0,
) -> None:
    record = await threads.create_or_load(task_thread_id(task_id), owner="alice", now=at)
    await push.save_task(record, now=at, notice=notice(event, task_id))


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
    claimed = await claim(push, T0, holder="h1")

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

    assert await claim(push, T0, holder="h1") == []


async def test_a_leased_delivery_is_taken_again_under_the_same_id_once_the_lease_lapses(
    stores: tuple[ThreadStore, PushStore],
) -> None:
    threads, push = stores
    await push.set_config(hook("a"), now=T0)
    await change(threads, push)
    [first] = await claim(push, T0, holder="dead")

    during = await claim(push, T0 + LEASE / 2, holder="h2")
    [again] = await claim(push, T0 + LEASE, holder="h2")
    late = await push.settle(
        first.delivery_id, holder="dead", now=T0 + LEASE, delivered=True, retry_at=None, error=None
    )
    settled = await push.settle(
        again.delivery_id, holder="h2", now=T0 + LEASE, delivered=True, retry_at=None, error=None
    )

    assert during == []
    assert (again.delivery_id, again.attempts) == (first.delivery_id, 2)
    assert (late, settled) == (False, True)
    assert await push.delivery_state(first.delivery_id) == PushDeliveryState(
        attempts=2, status="delivered", last_error=None
    )
    assert await claim(push, T0 + 9 * LEASE, holder="h3") == []


async def test_a_failed_attempt_is_retried_when_scheduled_and_given_up_without_a_retry(
    stores: tuple[ThreadStore, PushStore],
) -> None:
    threads, push = stores
    await push.set_config(hook("a"), now=T0)
    await change(threads, push)
    [first] = await claim(push, T0)
    retry_at = T0 + timedelta(seconds=5)
    await push.settle(
        first.delivery_id, holder="h", now=T0, delivered=False, retry_at=retry_at, error="HTTP 503"
    )

    early = await claim(push, T0)
    [second] = await claim(push, retry_at)
    await push.settle(
        second.delivery_id, holder="h", now=retry_at, delivered=False, retry_at=None, error="gone"
    )

    assert early == []
    assert second.attempts == 2
    assert await push.delivery_state(first.delivery_id) == PushDeliveryState(
        attempts=2, status="failed", last_error="gone"
    )
    assert await claim(push, T0 + 9 * LEASE) == []


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
    claimed = await claim(push, T0)

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

    rounds = await asyncio.gather(*(claim(push, T0, holder=f"h{n}", limit=3) for n in range(20)))
    # A racing claim may pass over a row another claim has locked and then not taken (it
    # is due again for the next claim, as the dispatcher's next round makes): claim on until
    # nothing is left. What must hold is that no delivery has two holders.
    while later := await claim(push, T0, holder="after", limit=10):
        rounds.append(later)

    claimed = [d.delivery_id for batch in rounds for d in batch]
    assert len(claimed) == 10
    assert len(set(claimed)) == 10
    assert len(rounds[20:]) <= 1  # what the race left is taken by one claim


async def test_a_delivery_is_given_up_once_it_had_its_attempts_and_never_claimed_again(
    stores: tuple[ThreadStore, PushStore],
) -> None:
    threads, push = stores
    await push.set_config(hook("a"), now=T0)
    await change(threads, push)
    now = T0
    for _ in range(3):  # each sender dies before it settles: the lease lapses
        [taken] = await claim(push, now, max_attempts=3)
        now += LEASE

    after = await claim_all(push, now, max_attempts=3)
    later = await claim_all(push, now + 100 * LEASE, max_attempts=3)

    assert after.deliveries == []
    assert [(f.delivery_id, f.attempts, f.error) for f in after.given_up] == [
        (taken.delivery_id, 3, NO_OUTCOME)
    ]
    assert later == PushClaim(deliveries=[], given_up=[])
    assert await push.delivery_state(taken.delivery_id) == PushDeliveryState(
        attempts=3, status="failed", last_error=NO_OUTCOME
    )


async def test_a_delivery_already_past_a_lowered_cap_is_given_up_with_its_last_error(
    stores: tuple[ThreadStore, PushStore],
) -> None:
    threads, push = stores
    await push.set_config(hook("a"), now=T0)
    await change(threads, push)
    now = T0
    for _ in range(5):  # attempts made under a higher cap (or before there was one)
        [taken] = await claim(push, now, max_attempts=100)
        await push.settle(
            taken.delivery_id, holder="h", now=now, delivered=False, retry_at=now, error="HTTP 503"
        )

    after = await claim_all(push, now, max_attempts=3)

    assert after.deliveries == []
    assert [(f.attempts, f.error) for f in after.given_up] == [(5, "HTTP 503")]
    assert await claim(push, now + LEASE, max_attempts=100) == []


@pytest.mark.parametrize("kind", sorted(PUSH_STORE_REOPENERS))
async def test_a_delivery_out_of_attempts_is_not_claimed_after_the_store_is_reopened(
    kind: str, tmp_path: Path
) -> None:
    async with open_push_store(kind, tmp_path) as (threads, push):
        await push.set_config(hook("a"), now=T0)
        await change(threads, push)
        [first] = await claim(push, T0, max_attempts=2)
        [last] = await claim(push, T0 + LEASE, max_attempts=2)  # then the process dies
        async with reopen_push_store(kind, tmp_path, threads, push) as (_, reopened):
            after = await claim_all(reopened, T0 + 3 * LEASE, max_attempts=2)
            later = await claim(reopened, T0 + 9 * LEASE, max_attempts=2)
            state = await reopened.delivery_state(first.delivery_id)

    assert last.attempts == 2
    assert after.deliveries == []
    assert [f.delivery_id for f in after.given_up] == [first.delivery_id]
    assert later == []
    assert state == PushDeliveryState(attempts=2, status="failed", last_error=NO_OUTCOME)


async def test_a_claimed_delivery_that_is_never_settled_waits_behind_the_ones_due_before_its_lease_end(
    stores: tuple[ThreadStore, PushStore],
) -> None:
    threads, push = stores
    await push.set_config(hook("a", task_id="stuck"), now=T0)
    await push.set_config(hook("b", task_id="next"), now=T0)
    await change(threads, push, "e1", "stuck", at=T0)
    await change(threads, push, "e2", "next", at=T0 + timedelta(seconds=1))
    [stuck] = await claim(push, T0 + timedelta(seconds=1), limit=1)

    [after_lapse] = await claim(push, T0 + LEASE + timedelta(seconds=1), limit=1)
    [again] = await claim(push, T0 + 2 * LEASE, limit=1)

    assert stuck.task_id == "stuck"
    assert after_lapse.task_id == "next"
    assert (again.delivery_id, again.attempts) == (stuck.delivery_id, 2)


async def test_one_task_with_many_deliveries_due_takes_at_most_its_share_of_a_claim(
    stores: tuple[ThreadStore, PushStore],
) -> None:
    threads, push = stores
    for n in range(8):
        await push.set_config(hook(f"busy{n}", task_id="busy"), now=T0)
    await push.set_config(hook("quiet", task_id="quiet"), now=T0)
    await change(threads, push, "e1", "busy", at=T0)
    await change(threads, push, "e2", "quiet", at=T0 + timedelta(seconds=1))
    now = T0 + timedelta(seconds=2)

    rounds = [await claim(push, now, limit=4, per_key=2) for _ in range(5)]

    assert [sorted(d.task_id for d in batch) for batch in rounds] == [
        ["busy", "busy", "quiet"],
        ["busy", "busy"],
        ["busy", "busy"],
        ["busy", "busy"],
        [],
    ]


async def test_one_url_with_many_deliveries_due_takes_at_most_its_share_of_a_claim(
    stores: tuple[ThreadStore, PushStore],
) -> None:
    threads, push = stores
    shared = "https://hooks.example/shared"
    for n in range(6):
        await push.set_config(hook("a", task_id=f"t{n}", url=shared), now=T0)
        await change(threads, push, f"e{n}", f"t{n}", at=T0)
    await push.set_config(hook("b", task_id="other"), now=T0)
    await change(threads, push, "e9", "other", at=T0 + timedelta(seconds=1))
    now = T0 + timedelta(seconds=2)

    first = await claim(push, now, limit=4, per_key=2)
    rest = await claim(push, now, limit=10, per_key=2)

    assert sorted(d.config["url"] for d in first) == ["https://hooks.example/b", shared, shared]
    assert [d.config["url"] for d in rest] == [shared, shared]


async def test_behind_a_long_backlog_a_claim_still_takes_the_oldest_share_of_each_url(
    stores: tuple[ThreadStore, PushStore],
) -> None:
    # A claim may look at the first due rows only when they hold all it can take (the SQLite
    # store does): the same deliveries as ranking the whole backlog, oldest first.
    threads, push = stores
    shared = "https://hooks.example/shared"
    for n in range(60):
        await push.set_config(hook("a", task_id=f"t{n:02}", url=shared), now=T0)
        await change(threads, push, f"e{n}", f"t{n:02}", at=T0 + timedelta(milliseconds=n))
    await push.set_config(hook("b", task_id="other"), now=T0)
    await change(threads, push, "e99", "other", at=T0 + timedelta(seconds=1))
    now = T0 + timedelta(seconds=2)

    enough = await claim(push, now, limit=2, per_key=2)  # two of the first rows suffice
    short = await claim(push, now, limit=4, per_key=2)  # the other URL is at the very end

    assert sorted(d.task_id for d in enough) == ["t00", "t01"]
    assert sorted(d.task_id for d in short) == ["other", "t02", "t03"]


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

    claimed = await claim(push, datetime.now(UTC))

    assert sorted(d.payload["status"]["state"] for d in claimed) == [
        "TASK_STATE_COMPLETED",
        "TASK_STATE_INPUT_REQUIRED",
    ]
    assert len(woken) == 2
