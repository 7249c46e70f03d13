"""The EventStore contract: every store (memory, SQLite, PostgreSQL) passes these unchanged."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import msgspec
import pytest

from pausemesh.core.errors import (
    ContinuationIdMismatchError,
    InvalidInputError,
    StoreError,
    VersionConflictError,
)
from pausemesh.core.model import ContinuationCreated, ContinuationResumed
from pausemesh.core.ports import EventStore
from tests.support.events import T0, cancelled, created, resumed


async def test_load_of_unknown_stream_is_empty(event_store: EventStore) -> None:
    assert list(await event_store.load("nope")) == []


async def test_append_at_version_zero_creates_and_load_returns_equal_events(
    event_store: EventStore,
) -> None:
    event = created("c1")
    await event_store.append("c1", 0, [event])
    assert list(await event_store.load("c1")) == [event]


async def test_append_is_compare_and_swap_on_expected_version(event_store: EventStore) -> None:
    await event_store.append("c1", 0, [created("c1")])
    with pytest.raises(VersionConflictError) as info:
        await event_store.append("c1", 0, [created("c1")])
    assert info.value.actual_version == 1
    with pytest.raises(VersionConflictError):
        await event_store.append("c1", 2, [cancelled("c1", version=3)])
    await event_store.append("c1", 1, [resumed("c1")])
    assert [e.version for e in await event_store.load("c1")] == [1, 2]


async def test_batch_is_all_or_nothing(event_store: EventStore) -> None:
    await event_store.append("c1", 0, [created("c1"), resumed("c1")])
    assert len(await event_store.load("c1")) == 2
    with pytest.raises(VersionConflictError):
        await event_store.append("c2", 0, [created("c2"), resumed("c2", version=3)])
    assert list(await event_store.load("c2")) == []


async def test_foreign_event_in_batch_is_refused_before_writing(event_store: EventStore) -> None:
    with pytest.raises(ContinuationIdMismatchError):
        await event_store.append("c1", 0, [created("other")])
    assert list(await event_store.load("c1")) == []
    assert list(await event_store.load("other")) == []


async def test_stream_must_start_with_created(event_store: EventStore) -> None:
    with pytest.raises(InvalidInputError):
        await event_store.append("c1", 0, [resumed("c1", version=1)])
    assert list(await event_store.load("c1")) == []


async def test_negative_expected_version_is_refused(event_store: EventStore) -> None:
    with pytest.raises(InvalidInputError):
        await event_store.append("c1", -1, [created("c1")])


async def test_empty_batch_checks_version_without_writing(event_store: EventStore) -> None:
    await event_store.append("c1", 0, [])
    assert list(await event_store.load("c1")) == []
    await event_store.append("c1", 0, [created("c1")])
    await event_store.append("c1", 1, [])
    with pytest.raises(VersionConflictError):
        await event_store.append("c1", 0, [])


async def test_many_concurrent_appends_on_one_stream_have_exactly_one_winner(
    event_store: EventStore,
) -> None:
    await event_store.append("c1", 0, [created("c1")])
    results = await asyncio.gather(
        *(event_store.append("c1", 1, [resumed("c1", key=f"k{i}")]) for i in range(60)),
        return_exceptions=True,
    )
    winners = [r for r in results if r is None]
    assert len(winners) == 1
    assert all(isinstance(r, VersionConflictError) for r in results if r is not None)
    events = await event_store.load("c1")
    assert len(events) == 2


async def test_concurrent_appends_to_distinct_streams_all_land(event_store: EventStore) -> None:
    ids = [f"c{i}" for i in range(100)]
    await asyncio.gather(*(event_store.append(i, 0, [created(i)]) for i in ids))
    loaded = await asyncio.gather(*(event_store.load(i) for i in ids))
    assert all(len(events) == 1 for events in loaded)


async def test_list_due_returns_only_pending_streams_past_their_deadline(
    event_store: EventStore,
) -> None:
    await event_store.append("soon", 0, [created("soon", expires_in=10)])
    await event_store.append("later", 0, [created("later", expires_in=1000)])
    await event_store.append("settled", 0, [created("settled", expires_in=5)])
    await event_store.append("settled", 1, [cancelled("settled")])
    due = await event_store.list_due(T0 + timedelta(seconds=60), 10)
    assert list(due) == ["soon"]
    assert list(await event_store.list_due(T0, 10)) == []


async def test_readiness_passes_while_open(event_store: EventStore) -> None:
    await event_store.check_readiness()


async def test_closed_store_refuses_work_with_store_error(event_store: EventStore) -> None:
    await event_store.close()
    with pytest.raises(StoreError):
        await event_store.load("c1")
    with pytest.raises(StoreError):
        await event_store.check_readiness()


def _asked(continuation_id: str, thread_id: str, owner: str | None) -> ContinuationCreated:
    return msgspec.structs.replace(
        created(continuation_id),
        correlation_id=thread_id,
        owner=owner,
        metadata={"agent": {"offered": ["PM101", "PM202"]}},
    )


async def test_erase_correlated_removes_what_the_owners_questions_asked_and_were_answered(
    event_store: EventStore,
) -> None:
    await event_store.append("c1", 0, [_asked("c1", "t1", "alice"), resumed("c1")])
    await event_store.append("c2", 0, [_asked("c2", "t1", "alice"), cancelled("c2")])
    await event_store.append("c3", 0, [_asked("c3", "t1", "bob"), resumed("c3")])
    await event_store.append("c4", 0, [_asked("c4", "t2", "alice")])

    erased = await event_store.erase_correlated("t1", owner="alice", now=T0)

    assert erased == 2
    asked, answered = await event_store.load("c1")
    assert isinstance(asked, ContinuationCreated)
    assert isinstance(answered, ContinuationResumed)
    assert (asked.payload, asked.metadata, answered.resume_payload) == (None, {}, None)
    # What it was stays: ids, versions, kinds, times, the token hash, the key.
    assert asked == msgspec.structs.replace(_asked("c1", "t1", "alice"), payload=None, metadata={})
    assert answered == msgspec.structs.replace(resumed("c1"), resume_payload=None)
    question, withdrawn = await event_store.load("c2")
    assert isinstance(question, ContinuationCreated)
    assert question.payload is None
    assert withdrawn == cancelled("c2")
    # Another owner's continuation with the same correlation id, and another thread's: kept.
    assert list(await event_store.load("c3")) == [_asked("c3", "t1", "bob"), resumed("c3")]
    assert list(await event_store.load("c4")) == [_asked("c4", "t2", "alice")]


async def test_erase_correlated_is_idempotent_and_matches_ownerless_continuations(
    event_store: EventStore,
) -> None:
    await event_store.append("c1", 0, [_asked("c1", "t1", None)])
    await event_store.append("c2", 0, [_asked("c2", "t1", "alice")])

    assert await event_store.erase_correlated("t1", owner=None, now=T0) == 1
    assert await event_store.erase_correlated("t1", owner=None, now=T0) == 0

    [first] = await event_store.load("c1")
    assert isinstance(first, ContinuationCreated)
    assert first.payload is None
    [other] = await event_store.load("c2")
    assert other == _asked("c2", "t1", "alice")
