"""``pausemesh.mcp.tasks``: task status derived from the pause, scoping, pagination, outcomes.

The in-memory stores stand in for the real ones here (the same rules run end to end on SQLite
and PostgreSQL in ``tests/protocols/test_mcp_tasks.py`` and
``tests/reliability/test_postgres_mcp_tasks.py``).
"""

from __future__ import annotations

from datetime import timedelta

import msgspec
import pytest
from mcp.shared.exceptions import MCPError

from pausemesh.core import ContinuationService, KeyedTokenIssuer, ManualClock
from pausemesh.core.model import Continuation
from pausemesh.core.resume import Resume, TrustedHost
from pausemesh.mcp.tasks import McpTasks, TaskEntry
from pausemesh.stores.memory import InMemoryEventStore, InMemoryThreadStore

QUESTION = {"kind": "input", "message": "Which flight?", "responseSchema": {"type": "object"}}


@pytest.fixture(name="clock")
def clock_fixture() -> ManualClock:
    return ManualClock()


@pytest.fixture(name="service")
def service_fixture(clock: ManualClock) -> ContinuationService:
    return ContinuationService(
        store=InMemoryEventStore(),
        clock=clock,
        keyed_issuer=KeyedTokenIssuer({"k1": b"k" * 32}, active_key_id="k1"),
    )


@pytest.fixture(name="tasks")
def tasks_fixture(service: ContinuationService) -> McpTasks:
    threads = InMemoryThreadStore()
    return McpTasks(lambda: service, lambda: threads)


async def paused(
    service: ContinuationService, tasks: McpTasks, principal: str = "alice"
) -> tuple[str, Continuation]:
    created = await service.create(
        payload=QUESTION,
        correlation_id="mcp:test",
        expires_at=service.clock.now() + timedelta(minutes=5),
        owner=principal,
        keyed=True,
    )
    cid = created.continuation.continuation_id
    entry = TaskEntry(tool="t", arguments={}, continuation_id=cid, request_state="s", key="k")
    view = await tasks.open(principal, entry)
    return view.task_id, created.continuation


async def test_a_pending_pause_is_input_required_with_its_question(
    service: ContinuationService, tasks: McpTasks
) -> None:
    task_id, continuation = await paused(service, tasks)

    view = await tasks.view(task_id, "alice")

    assert task_id == continuation.continuation_id
    assert (view.status, view.message) == ("input_required", "Which flight?")
    assert view.to_wire()["ttl"] is None


async def test_an_expired_pause_is_a_failed_task_even_before_expiry_is_recorded(
    service: ContinuationService, tasks: McpTasks, clock: ManualClock
) -> None:
    task_id, _ = await paused(service, tasks)
    clock.advance(301)

    view = await tasks.view(task_id, "alice")

    assert (view.status, view.message) == ("failed", "the question expired unanswered")


async def test_an_answered_pause_is_working_until_the_finisher_records_one_outcome(
    service: ContinuationService, tasks: McpTasks
) -> None:
    task_id, continuation = await paused(service, tasks)
    await service.resume(
        Resume(
            continuation_id=task_id,
            idempotency_key="k",
            payload={"flight": "PM101"},
            by=TrustedHost("alice"),
        )
    )
    runs: list[str] = []

    async def finish(entry: TaskEntry, settled: Continuation) -> TaskEntry:
        runs.append(settled.status)
        return msgspec.structs.replace(entry, result={"content": [], "isError": False})

    before = await tasks.view(task_id, "alice")
    done = await tasks.view(task_id, "alice", finish)
    again = await tasks.view(task_id, "alice", finish)

    assert continuation.status == "pending"
    assert before.status == "working"
    assert done.status == "completed"
    assert again.status == "completed"
    assert runs == ["resumed"]


async def test_the_first_recorded_outcome_stays(
    service: ContinuationService, tasks: McpTasks
) -> None:
    task_id, _ = await paused(service, tasks)
    first = TaskEntry(tool="t", arguments={}, continuation_id=task_id, result={"isError": False})
    second = TaskEntry(tool="t", arguments={}, continuation_id=task_id, error={"code": -1})

    await tasks.settle(task_id, "alice", first)
    view = await tasks.settle(task_id, "alice", second)

    assert view.status == "completed"
    assert view.entry.error is None


async def test_a_tool_error_result_is_a_failed_task(
    service: ContinuationService, tasks: McpTasks
) -> None:
    task_id, _ = await paused(service, tasks)
    entry = TaskEntry(tool="t", arguments={}, continuation_id=task_id, result={"isError": True})

    view = await tasks.settle(task_id, "alice", entry)

    assert view.status == "failed"


async def test_cancel_is_refused_once_the_pause_was_answered(
    service: ContinuationService, tasks: McpTasks
) -> None:
    task_id, _ = await paused(service, tasks)
    await service.resume(
        Resume(continuation_id=task_id, idempotency_key="k", payload={}, by=TrustedHost("alice"))
    )

    with pytest.raises(MCPError) as refused:
        await tasks.cancel(task_id, "alice")

    assert refused.value.error.code == -32602
    assert (await service.get(task_id, principal="alice")).status == "resumed"


async def test_another_principal_is_told_the_task_does_not_exist(
    service: ContinuationService, tasks: McpTasks
) -> None:
    task_id, _ = await paused(service, tasks)

    for call in (tasks.view(task_id, "bob"), tasks.cancel(task_id, "bob")):
        with pytest.raises(MCPError) as refused:
            await call
        assert refused.value.error.message == "Failed to retrieve task: Task not found"
    listed, _ = await tasks.list("bob", None)
    assert listed == []


async def test_list_pages_through_every_task_of_the_caller_once(
    service: ContinuationService, tasks: McpTasks, clock: ManualClock
) -> None:
    opened = set()
    for _ in range(53):
        opened.add((await paused(service, tasks))[0])
        clock.advance(1)
    await paused(service, tasks, "bob")

    first, cursor = await tasks.list("alice", None)
    second, end = await tasks.list("alice", cursor)

    assert len(first) == 50
    assert end is None
    assert {view.task_id for view in first + second} == opened
    assert len(first + second) == 53


@pytest.mark.parametrize("cursor", ["zz", 5, "00", "5b2278222c2279225d", "x" * 2000])
async def test_a_cursor_that_is_not_ours_is_invalid_params(tasks: McpTasks, cursor: object) -> None:
    with pytest.raises(MCPError) as refused:
        await tasks.list("alice", cursor)

    assert (refused.value.error.code, refused.value.error.message) == (-32602, "Invalid cursor")
