"""``Conversations`` over every thread store: pages and cursors, erasure that cancels the open
questions, and the retention purge with its dry run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from pausemesh.agui.conversations import ERASE_REASON, Conversations, decode_cursor
from pausemesh.core import ContinuationService, ManualClock
from pausemesh.core.errors import (
    ContinuationCancelledError,
    InvalidInputError,
    ThreadNotFoundError,
)
from pausemesh.core.resume import Resume, TokenHolder
from pausemesh.core.threads import CohortReceipt, IssuedCohort, ReceiptInterrupt, ThreadStore
from pausemesh.stores.memory import InMemoryEventStore

START = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(name="clock")
def clock_fixture() -> ManualClock:
    return ManualClock(START)


@pytest.fixture(name="conversations")
def conversations_fixture(threads: ThreadStore, clock: ManualClock) -> Conversations:
    service = ContinuationService(store=InMemoryEventStore(), clock=clock)
    return Conversations(threads=threads, service=service)


async def _thread(
    conversations: Conversations, thread_id: str, *, owner: str = "alice", question: bool = False
) -> tuple[str, str] | None:
    """A saved thread at the clock's time; with ``question``, an open cohort of one pause
    (then its continuation id and resume token)."""
    now = conversations.clock.now()
    threads, service = conversations.threads, conversations.service
    record = await threads.create_or_load(thread_id, owner=owner, now=now)
    cohort = None
    pause = None
    if question:
        created = await service.create(
            payload={"kind": "input", "message": "Which flight?"},
            correlation_id=thread_id,
            owner=owner,
        )
        continuation_id = created.continuation.continuation_id
        pause = (continuation_id, created.resume_token)
        cohort = IssuedCohort(
            receipt=CohortReceipt(
                schema_version=1,
                cohort_id=f"agui-cohort:{thread_id}",
                thread_id=thread_id,
                run_id="r1",
                interrupts=(
                    ReceiptInterrupt(
                        continuation_id=continuation_id,
                        expires_at="2026-01-01T00:15:00.000Z",
                        issued_version=1,
                        payload_hash="0" * 64,
                    ),
                ),
            ),
            interrupts=({"id": continuation_id, "reason": "input_required"},),
        )
    messages = [{"id": "m1", "role": "user", "content": f"hello from {thread_id}"}]
    await threads.save(
        msgspec.structs.replace(record, messages=messages, open_receipt=cohort), now=now
    )
    return pause


async def test_pages_follow_the_cursor_to_the_end(
    conversations: Conversations, clock: ManualClock
) -> None:
    for i in range(5):
        await _thread(conversations, f"t{i}")
        clock.advance(1)
    first = await conversations.page("alice", limit=2)
    assert [t.thread_id for t in first.threads] == ["t4", "t3"]
    assert first.threads[0].title == "hello from t4"
    assert first.next_cursor is not None
    second = await conversations.page("alice", limit=2, cursor=first.next_cursor)
    third = await conversations.page("alice", limit=2, cursor=second.next_cursor)
    assert [t.thread_id for t in second.threads] == ["t2", "t1"]
    assert ([t.thread_id for t in third.threads], third.next_cursor) == (["t0"], None)
    assert (await conversations.page("bob")).threads == []


@pytest.mark.parametrize("cursor", ["", "%%%", "bm90IGpzb24", "WzEsMl0", "x" * 2000])
def test_a_cursor_the_server_did_not_make_is_refused(cursor: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        decode_cursor(cursor)
    assert caught.value.code == "INVALID_CURSOR"


async def test_delete_cancels_the_open_question_and_erases_the_thread(
    conversations: Conversations,
) -> None:
    pause = await _thread(conversations, "t1", question=True)
    assert pause is not None
    continuation_id, token = pause
    with pytest.raises(ThreadNotFoundError):
        await conversations.delete("t1", "bob")

    await conversations.delete("t1", "alice")

    state = await conversations.service.get(continuation_id, principal="alice")
    assert (state.status, state.reason) == ("cancelled", ERASE_REASON)
    with pytest.raises(ContinuationCancelledError):
        await conversations.service.resume(
            Resume(
                continuation_id=continuation_id,
                idempotency_key="k",
                payload={},
                by=TokenHolder(token, principal="alice"),
            )
        )
    assert await conversations.threads.get("t1") is None
    with pytest.raises(ThreadNotFoundError):
        await conversations.delete("t1", "alice")


async def test_purge_erases_only_threads_idle_past_the_cutoff_and_reports_progress(
    conversations: Conversations, clock: ManualClock
) -> None:
    old_question = await _thread(conversations, "old-1", question=True)
    await _thread(conversations, "old-2", owner="bob")
    clock.advance(timedelta(days=10).total_seconds())
    await _thread(conversations, "recent")
    clock.advance(timedelta(days=1).total_seconds())

    dry = await conversations.purge(older_than=timedelta(days=5), dry_run=True)
    assert (dry.thread_ids, dry.dry_run) == (("old-1", "old-2"), True)
    assert await conversations.threads.get("old-1") is not None

    counts: list[int] = []
    report = await conversations.purge(older_than=timedelta(days=5), progress=counts.append)

    assert report.thread_ids == ("old-1", "old-2")
    assert counts == [2]
    assert report.cutoff == clock.now() - timedelta(days=5)
    assert await conversations.threads.get("old-1") is None
    assert await conversations.threads.get("old-2") is None
    assert await conversations.threads.get("recent") is not None
    assert old_question is not None
    # Ten days on, the old question had expired: erasing its thread leaves it settled.
    state = await conversations.service.get(old_question[0], principal="alice")
    assert state.status == "expired"
    again = await conversations.purge(older_than=timedelta(days=5))
    assert again.thread_ids == ()
