"""The A2A task store (an a2a-sdk ``VersionedTaskStore``) and the follow-up gate on every thread
store kind: versions are compare-and-set, a terminal task takes no further write, tasks are
scoped to their principal, and follow-ups to one task take turns."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from a2a.server.cluster import ConcurrentTaskModificationError, TaskVersion
from a2a.server.context import ServerCallContext
from a2a.types import Task, TaskState, TaskStatus

from pausemesh.a2a.follow_ups import FollowUpGate
from pausemesh.a2a.store import PRINCIPAL_STATE_KEY, ThreadBackedTaskStore
from pausemesh.core.clock import SystemClock
from pausemesh.core.leases import LeaseKeeper
from pausemesh.core.threads import ThreadStore, lease_holder


def caller(principal: str | None = "alice") -> ServerCallContext:
    return ServerCallContext(state={PRINCIPAL_STATE_KEY: principal})


def task(state: TaskState = TaskState.TASK_STATE_INPUT_REQUIRED) -> Task:
    return Task(id="task-1", context_id="ctx-1", status=TaskStatus(state=state))


async def saved(
    store: ThreadBackedTaskStore, new: Task, prev_version: TaskVersion = TaskVersion.MISSING
) -> TaskVersion:
    return await store.save(new, event=None, prev=None, prev_version=prev_version, context=caller())


async def test_a_saved_task_reads_back_with_the_version_the_save_returned(
    threads: ThreadStore,
) -> None:
    store = ThreadBackedTaskStore(lambda: threads)
    version = await saved(store, task())

    stored = await store.get("task-1", caller())

    assert stored is not None
    assert stored.task == task()
    assert stored.version == version
    assert not version.is_missing


async def test_a_write_from_a_stale_read_is_a_concurrent_modification(
    threads: ThreadStore,
) -> None:
    store = ThreadBackedTaskStore(lambda: threads)
    first = await saved(store, task())
    second = await saved(store, task(TaskState.TASK_STATE_WORKING), first)

    with pytest.raises(ConcurrentTaskModificationError):
        await saved(store, task(TaskState.TASK_STATE_COMPLETED), first)
    with pytest.raises(ConcurrentTaskModificationError):
        await saved(store, task())  # a "first write" onto an existing task

    stored = await store.get("task-1", caller())
    assert stored is not None
    assert (stored.task.status.state, stored.version) == (TaskState.TASK_STATE_WORKING, second)


@pytest.mark.parametrize(
    "terminal",
    [
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    ],
)
async def test_a_terminal_task_takes_no_further_write_even_at_its_current_version(
    threads: ThreadStore, terminal: TaskState
) -> None:
    store = ThreadBackedTaskStore(lambda: threads)
    done = await saved(store, task(terminal), await saved(store, task()))

    for later in (TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_CANCELED):
        with pytest.raises(ConcurrentTaskModificationError):
            await saved(store, task(later), done)

    stored = await store.get("task-1", caller())
    assert stored is not None
    assert (stored.task.status.state, stored.version) == (terminal, done)


async def test_a_cancel_overrides_any_live_state_without_a_version_check(
    threads: ThreadStore,
) -> None:
    store = ThreadBackedTaskStore(lambda: threads)
    first = await saved(store, task())
    await saved(store, task(TaskState.TASK_STATE_WORKING), first)

    await saved(store, task(TaskState.TASK_STATE_CANCELED), first)

    stored = await store.get("task-1", caller())
    assert stored is not None
    assert stored.task.status.state == TaskState.TASK_STATE_CANCELED


async def test_a_cancel_of_a_task_that_does_not_exist_is_refused(threads: ThreadStore) -> None:
    store = ThreadBackedTaskStore(lambda: threads)
    with pytest.raises(ConcurrentTaskModificationError):
        await saved(store, task(TaskState.TASK_STATE_CANCELED))


async def test_another_principal_does_not_see_the_task(threads: ThreadStore) -> None:
    store = ThreadBackedTaskStore(lambda: threads)
    await saved(store, task())

    assert await store.get("task-1", caller("bob")) is None
    assert await store.get("task-1", caller(None)) is None
    with pytest.raises(PermissionError):
        await store.save(
            task(TaskState.TASK_STATE_COMPLETED),
            event=None,
            prev=None,
            prev_version=TaskVersion.MISSING,
            context=caller("bob"),
        )


async def test_follow_ups_to_one_task_take_turns(threads: ThreadStore) -> None:
    store = ThreadBackedTaskStore(lambda: threads)
    await saved(store, task())
    keeper = LeaseKeeper(
        threads, clock=SystemClock(), ttl=timedelta(seconds=5), holder=lease_holder("a", "i1")
    )
    gate = FollowUpGate(lambda: keeper)
    inside: list[int] = []
    overlaps: list[int] = []

    async def follow_up(n: int) -> None:
        async with gate.hold("task-1", run_id=f"m{n}"):
            if inside:
                overlaps.append(n)
            inside.append(n)
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            inside.remove(n)

    await asyncio.gather(*(follow_up(n) for n in range(8)))

    assert overlaps == []
    record = await threads.get("a2a-task:task-1")
    assert record is not None
    assert record.lease is None


async def test_the_gate_lets_an_unknown_task_through(threads: ThreadStore) -> None:
    keeper = LeaseKeeper(
        threads, clock=SystemClock(), ttl=timedelta(seconds=5), holder=lease_holder("a", "i1")
    )
    gate = FollowUpGate(lambda: keeper)
    async with gate.hold("no-such-task", run_id="m1"):
        pass
    assert await threads.get("a2a-task:no-such-task") is None
