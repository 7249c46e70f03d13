"""The run queue contract (double texting, ``core/run_queue.py``) on every store: memory, a
SQLite file, a PostgreSQL schema. The same tests, unchanged, for each."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pausemesh.core.run_queue import QueuedInput, QueueKind, RunQueue
from pausemesh.stores.memory.run_queue import InMemoryRunQueue
from pausemesh.stores.postgres.run_queue import PostgresRunQueue
from pausemesh.stores.sqlite import SqliteDatabase
from pausemesh.stores.sqlite.run_queue import SqliteRunQueue
from tests.support.postgres import migrated_database

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


@pytest.fixture(name="queue", params=["memory", "sqlite", "postgres"])
async def queue_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RunQueue]:
    if request.param == "memory":
        yield InMemoryRunQueue()
    elif request.param == "sqlite":
        sqlite = await SqliteDatabase(tmp_path / "queue.db").open()
        try:
            yield SqliteRunQueue(sqlite)
        finally:
            await sqlite.close()
    else:
        async with migrated_database(max_size=4) as postgres:
            yield PostgresRunQueue(postgres)


def entry(
    entry_id: str,
    *,
    thread_id: str = "t1",
    kind: QueueKind = "enqueue",
    roles: tuple[str, ...] = (),
) -> QueuedInput:
    return QueuedInput(
        entry_id=entry_id,
        thread_id=thread_id,
        kind=kind,
        run_id=f"run-{entry_id}",
        input_json='{"threadId":"t1","runId":"r","messages":[]}',
        principal="alice",
        roles=roles,
        message_ids=(f"m-{entry_id}",),
        after_sequence=7,
        queued_at=NOW,
    )


async def test_entries_come_back_in_the_order_queued_with_what_was_stored(queue: RunQueue) -> None:
    first = await queue.enqueue(entry("a", roles=("manager",)), limit=10)
    second = await queue.enqueue(entry("b"), limit=10)
    assert first is not None
    assert second is not None
    assert first.position < second.position
    head = await queue.head("t1")
    assert head == first
    assert (head.roles, head.message_ids) == (("manager",), ("m-a",))
    assert (head.principal, head.after_sequence, head.queued_at) == ("alice", 7, NOW)
    await queue.remove("t1", "a")
    assert await queue.head("t1") == second
    await queue.remove("t1", "b")
    assert await queue.head("t1") is None


async def test_an_interrupting_entry_runs_before_the_entries_queued_earlier(
    queue: RunQueue,
) -> None:
    await queue.enqueue(entry("a"), limit=10)
    await queue.enqueue(entry("b", kind="interrupt"), limit=10)
    await queue.enqueue(entry("c", kind="rollback"), limit=10)
    order = []
    while (head := await queue.head("t1")) is not None:
        order.append(head.entry_id)
        await queue.remove("t1", head.entry_id)
    assert order == ["b", "c", "a"]


async def test_a_full_queue_refuses_and_writes_nothing(queue: RunQueue) -> None:
    assert await queue.enqueue(entry("a"), limit=2) is not None
    assert await queue.enqueue(entry("b"), limit=2) is not None
    assert await queue.enqueue(entry("c"), limit=2) is None
    assert not await queue.contains("t1", "c")
    # Another thread has its own bound.
    assert await queue.enqueue(entry("d", thread_id="t2"), limit=2) is not None


async def test_queueing_the_same_entry_again_returns_the_stored_one(queue: RunQueue) -> None:
    first = await queue.enqueue(entry("a"), limit=1)
    again = await queue.enqueue(entry("a"), limit=1)
    assert again == first


async def test_interrupting_names_only_the_interrupting_entries_of_the_threads_asked(
    queue: RunQueue,
) -> None:
    await queue.enqueue(entry("a"), limit=10)
    await queue.enqueue(entry("b", kind="interrupt"), limit=10)
    await queue.enqueue(entry("c", thread_id="t2", kind="rollback"), limit=10)
    await queue.enqueue(entry("d", thread_id="t3", kind="interrupt"), limit=10)
    found = await queue.interrupting(["t1", "t2", "t4"])
    assert {t: [(s.entry_id, s.kind) for s in signals] for t, signals in found.items()} == {
        "t1": [("b", "interrupt")],
        "t2": [("c", "rollback")],
    }
    assert await queue.interrupting([]) == {}


async def test_waiting_threads_and_discard(queue: RunQueue) -> None:
    await queue.enqueue(entry("a"), limit=10)
    await queue.enqueue(entry("b"), limit=10)
    await queue.enqueue(entry("c", thread_id="t2"), limit=10)
    assert sorted(await queue.waiting_threads(limit=10)) == ["t1", "t2"]
    assert await queue.discard("t1") == 2
    assert await queue.head("t1") is None
    assert await queue.waiting_threads(limit=10) == ["t2"]
    assert await queue.contains("t2", "c")
    await queue.remove("t2", "missing")  # nothing to remove: no error
    assert await queue.contains("t2", "c")
