"""Thread list, titles, erasure and retention reads: the same contract on every thread store."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from pausemesh.core.errors import ThreadNotFoundError
from pausemesh.core.threads import (
    CohortReceipt,
    IssuedCohort,
    ReceiptInterrupt,
    ThreadCursor,
    ThreadStore,
    ThreadSummary,
)
from pausemesh.stores.memory import InMemoryThreadStore
from pausemesh.stores.postgres import PostgresThreadStore
from pausemesh.stores.sqlite import SqliteThreadStore

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def _at(minutes: int) -> datetime:
    return NOW + timedelta(minutes=minutes)


def _cohort(thread_id: str, *ids: str) -> IssuedCohort:
    return IssuedCohort(
        receipt=CohortReceipt(
            schema_version=1,
            cohort_id=f"agui-cohort:{thread_id}",
            thread_id=thread_id,
            run_id="r1",
            interrupts=tuple(
                ReceiptInterrupt(
                    continuation_id=i,
                    expires_at="2026-01-01T12:15:00.000Z",
                    issued_version=1,
                    payload_hash="0" * 64,
                )
                for i in ids
            ),
        ),
        interrupts=tuple({"id": i, "reason": "input_required"} for i in ids),
    )


async def _touch(
    threads: ThreadStore, thread_id: str, at: datetime, *, owner: str | None = "alice"
) -> None:
    record = await threads.create_or_load(thread_id, owner=owner, now=at)
    await threads.save(record, now=at)


async def _all_pages(threads: ThreadStore, owner: str | None, limit: int) -> list[ThreadSummary]:
    seen: list[ThreadSummary] = []
    after: ThreadCursor | None = None
    while True:
        page = await threads.list_threads(owner, limit=limit, after=after)
        seen += page
        if len(page) < limit:
            return seen
        after = ThreadCursor(updated_at=page[-1].updated_at, thread_id=page[-1].thread_id)


async def test_list_threads_is_most_recently_updated_first_with_counts(
    threads: ThreadStore,
) -> None:
    for i, thread_id in enumerate(("t1", "t2", "t3")):
        await _touch(threads, thread_id, _at(i))
    record = await threads.create_or_load("t1", owner="alice", now=_at(0))
    await threads.save(
        msgspec.structs.replace(record, open_receipt=_cohort("t1", "c1", "c2")), now=_at(9)
    )

    listed = await threads.list_threads("alice", limit=10)

    assert [s.thread_id for s in listed] == ["t1", "t3", "t2"]
    assert [s.pending_interrupts for s in listed] == [2, 0, 0]
    assert listed[0].updated_at == _at(9)
    assert listed[0].created_at == _at(0)
    assert listed[0].last_sequence == 0


async def test_list_threads_breaks_ties_on_thread_id_and_pages_without_overlap(
    threads: ThreadStore,
) -> None:
    for thread_id in ("a", "b", "c", "d", "e"):
        await _touch(threads, thread_id, NOW)  # one timestamp: only the id orders them

    first = await threads.list_threads("alice", limit=2)
    after = ThreadCursor(updated_at=first[-1].updated_at, thread_id=first[-1].thread_id)
    second = await threads.list_threads("alice", limit=2, after=after)

    assert [s.thread_id for s in first] == ["e", "d"]
    assert [s.thread_id for s in second] == ["c", "b"]


async def test_list_threads_is_scoped_to_the_owner_and_skips_protocol_threads(
    threads: ThreadStore,
) -> None:
    await _touch(threads, "mine", NOW)
    await _touch(threads, "bobs", NOW, owner="bob")
    await _touch(threads, "anon", NOW, owner=None)
    await _touch(threads, "a2a-task:1", NOW)

    assert [s.thread_id for s in await threads.list_threads("alice", limit=10)] == ["mine"]
    assert [s.thread_id for s in await threads.list_threads("bob", limit=10)] == ["bobs"]
    assert [s.thread_id for s in await threads.list_threads(None, limit=10)] == ["anon"]


async def _walk_while_writing(
    threads: ThreadStore, next_page: Callable[[], Awaitable[list[ThreadSummary]]]
) -> tuple[list[str], list[str], set[str]]:
    """Page through alice's 40 threads, 7 at a time; between pages, move one thread not yet
    listed and one already listed to the top (a save) and add a new thread. Return the ids
    listed, the threads there before the walk, and the ones touched during it."""
    old = [f"old-{i:03d}" for i in range(40)]
    for i, thread_id in enumerate(old):
        await _touch(threads, thread_id, _at(i))
    listed: list[str] = []
    touched: set[str] = set()
    step = 0
    while True:
        page = await next_page()
        listed += [s.thread_id for s in page]
        if len(page) < 7:
            return listed, old, touched
        unseen = [t for t in old if t not in listed and t not in touched]
        seen = [t for t in listed if t in old and t not in touched]
        for thread_id in (unseen[len(unseen) // 2], seen[0]):
            step += 1
            await _touch(threads, thread_id, _at(100 + step))  # now the most recent
            touched.add(thread_id)
        step += 1
        await _touch(threads, f"new-{step:03d}", _at(100 + step))


async def test_pagination_has_no_duplicates_or_gaps_while_threads_are_written(
    threads: ThreadStore,
) -> None:
    after: ThreadCursor | None = None

    async def next_page() -> list[ThreadSummary]:
        nonlocal after
        page = await threads.list_threads("alice", limit=7, after=after)
        if page:
            after = ThreadCursor(updated_at=page[-1].updated_at, thread_id=page[-1].thread_id)
        return page

    listed, old, touched = await _walk_while_writing(threads, next_page)

    assert len(touched) > 6  # the walk really moved threads past the cursor, both ways
    assert len(listed) == len(set(listed)), "a thread was listed twice"
    # Every thread there before the walk and not touched during it is listed, once.
    assert set(old) - touched <= set(listed), "a thread was skipped"


async def test_the_same_writes_would_list_threads_twice_under_an_offset_cursor(
    threads: ThreadStore,
) -> None:
    # The walk above is one an offset cursor fails: each thread moved to the top from below
    # the cursor pushes an already listed one back into the next page.
    offset = 0

    async def next_page() -> list[ThreadSummary]:
        nonlocal offset
        rows = await threads.list_threads("alice", limit=offset + 7)
        page = rows[offset:]
        offset += len(page)
        return page

    listed, _, _ = await _walk_while_writing(threads, next_page)

    assert len(listed) != len(set(listed))


async def test_title_comes_from_the_first_user_message_shortened(threads: ThreadStore) -> None:
    record = await threads.create_or_load("t1", owner="alice", now=NOW)
    assert record.title is None
    long_text = "Book me  a flight\n to Lisbon " + "please " * 20
    messages = [
        {"id": "s", "role": "system", "content": "be nice"},
        {"id": "m1", "role": "user", "content": long_text},
    ]
    saved = await threads.save(msgspec.structs.replace(record, messages=messages), now=_at(1))

    assert saved.title is not None
    assert saved.title.startswith("Book me a flight to Lisbon please")
    assert len(saved.title) <= 60
    assert saved.title.endswith("\u2026")

    # A later message never renames it.
    more = [*messages, {"id": "m2", "role": "user", "content": "something else"}]
    again = await threads.save(msgspec.structs.replace(saved, messages=more), now=_at(2))
    assert again.title == saved.title
    assert (await threads.list_threads("alice", limit=1))[0].title == saved.title


async def test_a_title_set_by_the_owner_survives_later_saves(threads: ThreadStore) -> None:
    record = await threads.create_or_load("t1", owner="alice", now=NOW)
    await threads.set_title("t1", "Trip to Lisbon")
    # A save from a run that loaded the record before the rename keeps the new title.
    messages = [{"id": "m1", "role": "user", "content": "hello"}]
    saved = await threads.save(msgspec.structs.replace(record, messages=messages), now=_at(1))

    assert saved.title == "Trip to Lisbon"
    assert saved.version == 2  # a rename is outside the CAS


async def test_an_agent_title_replaces_the_derived_one_and_an_earlier_agent_title(
    threads: ThreadStore,
) -> None:
    record = await threads.create_or_load("t1", owner="alice", now=NOW)
    messages = [{"id": "m1", "role": "user", "content": "hello there"}]
    derived = await threads.save(msgspec.structs.replace(record, messages=messages), now=_at(1))
    assert (derived.title, derived.title_source) == ("hello there", "derived")

    named = await threads.save(derived, now=_at(2), agent_title="Trip to Lisbon")
    assert (named.title, named.title_source) == ("Trip to Lisbon", "agent")

    # A later save without one keeps it (the derived title never comes back)...
    kept = await threads.save(named, now=_at(3))
    assert (kept.title, kept.title_source) == ("Trip to Lisbon", "agent")
    # ...and the agent may name the thread again.
    renamed = await threads.save(kept, now=_at(4), agent_title="Trip to Porto")
    assert (renamed.title, renamed.title_source) == ("Trip to Porto", "agent")
    assert (await threads.list_threads("alice", limit=1))[0].title == "Trip to Porto"


async def test_an_agent_title_on_a_thread_without_messages_is_taken(
    threads: ThreadStore,
) -> None:
    record = await threads.create_or_load("t1", owner="alice", now=NOW)

    saved = await threads.save(record, now=_at(1), agent_title="Untitled plans")

    assert (saved.title, saved.title_source) == ("Untitled plans", "agent")


async def test_an_agent_title_never_replaces_the_owners(threads: ThreadStore) -> None:
    record = await threads.create_or_load("t1", owner="alice", now=NOW)
    messages = [{"id": "m1", "role": "user", "content": "hello"}]
    named = await threads.save(
        msgspec.structs.replace(record, messages=messages), now=_at(1), agent_title="By agent"
    )
    # The owner renames while a run that loaded the record before is still going.
    await threads.set_title("t1", "Mine")

    saved = await threads.save(named, now=_at(2), agent_title="Agent again")

    assert (saved.title, saved.title_source) == ("Mine", "owner")
    assert (await threads.get("t1")) == saved
    assert (await threads.list_threads("alice", limit=1))[0].title == "Mine"


async def _store_a_title_of_unknown_source(threads: ThreadStore, thread_id: str) -> None:
    """What a thread titled before migration 12 holds: a title, no ``title_source``."""
    if isinstance(threads, InMemoryThreadStore):
        record = await threads.get(thread_id)
        assert record is not None
        threads._records[thread_id] = msgspec.structs.replace(record, title="Old name")
    elif isinstance(threads, SqliteThreadStore):

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE agui_threads SET title = 'Old name', title_source = NULL"
                " WHERE thread_id = ?",
                (thread_id,),
            )

        await threads.database.write(op)
    else:
        assert isinstance(threads, PostgresThreadStore)
        await threads.database.fetchrow(
            f"UPDATE {threads.database.q}.agui_threads"  # noqa: S608 - the test's own schema
            " SET title = 'Old name', title_source = NULL WHERE thread_id = $1",
            thread_id,
        )


async def test_a_title_stored_before_its_source_was_recorded_is_kept_like_the_owners(
    threads: ThreadStore,
) -> None:
    record = await threads.create_or_load("t1", owner="alice", now=NOW)
    await _store_a_title_of_unknown_source(threads, "t1")

    saved = await threads.save(record, now=_at(1), agent_title="From the agent")

    assert (saved.title, saved.title_source) == ("Old name", None)


async def test_set_title_on_an_unknown_thread_is_not_found(threads: ThreadStore) -> None:
    with pytest.raises(ThreadNotFoundError):
        await threads.set_title("nope", "x")


async def test_erase_removes_the_record_and_log_and_the_id_is_never_reused(
    threads: ThreadStore,
) -> None:
    await threads.create_or_load("t1", owner="alice", now=NOW)
    await threads.acquire_lease("t1", lease_id="L", run_id="r1", now=NOW, expires_at=_at(1))
    await threads.append_events("t1", lease_id="L", run_id="r1", events=['{"a":1}', '{"b":2}'])
    await _touch(threads, "t2", NOW)

    assert await threads.erase("t1", now=_at(1)) is True

    assert await threads.get("t1") is None
    assert await threads.read_events("t1", after_sequence=0) == []
    assert [s.thread_id for s in await threads.list_threads("alice", limit=10)] == ["t2"]
    with pytest.raises(ThreadNotFoundError):
        await threads.create_or_load("t1", owner="alice", now=_at(2))
    assert await threads.erase("t1", now=_at(3)) is False
    assert (await threads.get("t2")) is not None


async def test_idle_threads_lists_the_oldest_first_up_to_a_limit(threads: ThreadStore) -> None:
    for i, thread_id in enumerate(("t1", "t2", "t3", "t4")):
        await _touch(threads, thread_id, _at(i * 10))
    await _touch(threads, "a2a-task:9", NOW)

    assert await threads.idle_threads(updated_before=_at(25), limit=10) == ["t1", "t2", "t3"]
    assert await threads.idle_threads(updated_before=_at(25), limit=2) == ["t1", "t2"]
    assert await threads.idle_threads(updated_before=NOW, limit=10) == []


async def test_lapsed_cohorts_lists_threads_whose_every_question_is_past_its_deadline(
    threads: ThreadStore,
) -> None:
    def cohort(thread_id: str, *deadlines: str) -> IssuedCohort:
        base = _cohort(thread_id, *(f"{thread_id}-c{i}" for i in range(len(deadlines))))
        interrupts = tuple(
            msgspec.structs.replace(i, expires_at=d)
            for i, d in zip(base.receipt.interrupts, deadlines, strict=True)
        )
        return msgspec.structs.replace(
            base, receipt=msgspec.structs.replace(base.receipt, interrupts=interrupts)
        )

    plans = {
        "early": cohort("early", "2026-01-01T12:05:00.000Z"),
        "late": cohort("late", "2026-01-01T12:03:00.000Z", "2026-01-01T12:20:00.000Z"),
        "mixed": cohort("mixed", "2026-01-01T12:01:00.000Z", "2026-01-01T12:06:00.000Z"),
    }
    for thread_id, planned in plans.items():
        record = await threads.create_or_load(thread_id, owner="alice", now=NOW)
        await threads.save(msgspec.structs.replace(record, open_receipt=planned), now=NOW)
    await _touch(threads, "none", NOW)

    assert await threads.lapsed_cohorts(now=_at(4), limit=10) == []
    assert await threads.lapsed_cohorts(now=_at(10), limit=10) == ["early", "mixed"]
    assert await threads.lapsed_cohorts(now=_at(10), limit=1) == ["early"]
    assert await threads.lapsed_cohorts(now=_at(30), limit=10) == ["early", "mixed", "late"]
    # A closed cohort leaves the listing.
    early = await threads.get("early")
    assert early is not None
    await threads.save(msgspec.structs.replace(early, open_receipt=None), now=_at(30))
    assert await threads.lapsed_cohorts(now=_at(30), limit=10) == ["mixed", "late"]
