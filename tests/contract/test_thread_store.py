"""The ThreadStore contract: every store kind (memory, SQLite, PostgreSQL) passes the same tests."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from pausemesh.core.errors import (
    LeaseLostError,
    ThreadBusyError,
    ThreadNotFoundError,
    VersionConflictError,
)
from pausemesh.core.threads import (
    CohortReceipt,
    IssuedCohort,
    ReceiptInterrupt,
    RunLease,
    ThreadStore,
)

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
LATER = NOW + timedelta(minutes=2)
COHORT = IssuedCohort(
    receipt=CohortReceipt(
        schema_version=1,
        cohort_id="agui-cohort:x",
        thread_id="t1",
        run_id="r1",
        interrupts=(
            ReceiptInterrupt(
                continuation_id="c1",
                expires_at="2026-01-01T12:15:00.000Z",
                issued_version=1,
                payload_hash="0" * 64,
            ),
        ),
    ),
    interrupts=({"id": "c1", "reason": "input_required", "message": "Which?"},),
)


async def _leased(threads: ThreadStore, thread_id: str = "t1", lease_id: str = "L1") -> None:
    await threads.create_or_load(thread_id, owner="alice", now=NOW)
    await threads.acquire_lease(
        thread_id, lease_id=lease_id, run_id="r1", now=NOW, expires_at=LATER
    )


async def test_create_or_load_creates_an_empty_record_once(threads: ThreadStore) -> None:
    first = await threads.create_or_load("t1", owner="alice", now=NOW)
    again = await threads.create_or_load("t1", owner="bob", now=LATER)
    assert first.thread_id == "t1"
    assert first.owner == "alice"
    assert (first.messages, first.state, first.open_receipt) == ([], {}, None)
    assert (first.version, first.last_sequence, first.lease) == (1, 0, None)
    assert again == first


async def test_get_returns_none_for_an_unknown_thread(threads: ThreadStore) -> None:
    assert await threads.get("nope") is None


async def test_save_is_a_compare_and_swap_on_version(threads: ThreadStore) -> None:
    record = await threads.create_or_load("t1", owner=None, now=NOW)
    receipt = COHORT
    changed = msgspec.structs.replace(
        record,
        messages=[{"id": "m1", "role": "user", "content": "hi"}],
        state={"n": 1},
        open_receipt=receipt,
    )
    saved = await threads.save(changed, now=LATER)
    assert saved.version == 2
    assert saved.messages == [{"id": "m1", "role": "user", "content": "hi"}]
    assert saved.state == {"n": 1}
    assert saved.open_receipt == receipt
    assert await threads.get("t1") == saved
    with pytest.raises(VersionConflictError):
        await threads.save(changed, now=LATER)
    cleared = await threads.save(
        msgspec.structs.replace(saved, open_receipt=None, closed_receipt=receipt), now=LATER
    )
    assert cleared.open_receipt is None
    assert cleared.closed_receipt == receipt
    assert cleared.version == 3


async def test_concurrent_saves_from_one_version_have_exactly_one_winner(
    threads: ThreadStore,
) -> None:
    record = await threads.create_or_load("t1", owner=None, now=NOW)
    results = await asyncio.gather(
        *(
            threads.save(msgspec.structs.replace(record, state={"by": i}), now=NOW)
            for i in range(30)
        ),
        return_exceptions=True,
    )
    winners = [r for r in results if not isinstance(r, BaseException)]
    assert len(winners) == 1
    assert all(isinstance(r, VersionConflictError) for r in results if isinstance(r, BaseException))
    stored = await threads.get("t1")
    assert stored is not None
    assert stored.state == winners[0].state


async def test_save_of_an_unknown_thread_is_not_found(threads: ThreadStore) -> None:
    record = await threads.create_or_load("t1", owner=None, now=NOW)
    with pytest.raises(ThreadNotFoundError):
        await threads.save(msgspec.structs.replace(record, thread_id="other"), now=NOW)


async def test_state_may_be_any_json_including_null(threads: ThreadStore) -> None:
    record = await threads.create_or_load("t1", owner=None, now=NOW)
    saved = await threads.save(msgspec.structs.replace(record, state=None), now=NOW)
    assert saved.state is None
    fetched = await threads.get("t1")
    assert fetched is not None
    assert fetched.state is None


async def test_a_second_lease_is_refused_while_the_first_is_live(threads: ThreadStore) -> None:
    await _leased(threads)
    with pytest.raises(ThreadBusyError):
        await threads.acquire_lease("t1", lease_id="L2", run_id="r1", now=NOW, expires_at=LATER)


async def test_the_holder_renews_and_an_expired_lease_is_taken_over(threads: ThreadStore) -> None:
    await _leased(threads)
    renewed = await threads.acquire_lease(
        "t1", lease_id="L1", run_id="r1", now=NOW, expires_at=LATER + timedelta(minutes=1)
    )
    assert renewed.lease is not None
    assert renewed.lease.expires_at == LATER + timedelta(minutes=1)
    taken = await threads.acquire_lease(
        "t1",
        lease_id="L2",
        run_id="r2",
        now=LATER + timedelta(minutes=1),
        expires_at=LATER + timedelta(minutes=5),
    )
    assert taken.lease is not None
    assert (taken.lease.lease_id, taken.lease.run_id) == ("L2", "r2")


async def test_release_frees_the_thread_and_a_stale_release_is_ignored(
    threads: ThreadStore,
) -> None:
    await _leased(threads)
    await threads.release_lease("t1", lease_id="someone-else")
    with pytest.raises(ThreadBusyError):
        await threads.acquire_lease("t1", lease_id="L2", run_id="r2", now=NOW, expires_at=LATER)
    await threads.release_lease("t1", lease_id="L1")
    record = await threads.get("t1")
    assert record is not None
    assert record.lease is None
    await threads.acquire_lease("t1", lease_id="L2", run_id="r2", now=NOW, expires_at=LATER)


async def test_many_contenders_for_one_lease_yield_exactly_one_holder(threads: ThreadStore) -> None:
    await threads.create_or_load("t1", owner=None, now=NOW)
    results = await asyncio.gather(
        *(
            threads.acquire_lease(
                "t1", lease_id=f"L{i}", run_id="same-run", now=NOW, expires_at=LATER
            )
            for i in range(40)
        ),
        return_exceptions=True,
    )
    holders = [r for r in results if not isinstance(r, BaseException)]
    assert len(holders) == 1
    assert all(isinstance(r, ThreadBusyError) for r in results if isinstance(r, BaseException))


async def _lease_of(threads: ThreadStore, thread_id: str) -> RunLease:
    record = await threads.get(thread_id)
    assert record is not None
    assert record.lease is not None
    return record.lease


async def test_renew_leases_extends_only_the_leases_still_held(threads: ThreadStore) -> None:
    await _leased(threads, "t1", "A@1/x")
    await _leased(threads, "t2", "A@1/y")
    await _leased(threads, "t3", "B@2/z")
    later = LATER + timedelta(minutes=5)
    # t2's lease was taken over after it lapsed; t3 is not ours; "nope" does not exist.
    await threads.acquire_lease("t2", lease_id="C@3/w", run_id="r9", now=LATER, expires_at=later)
    asked = {"t1": "A@1/x", "t2": "A@1/y", "nope": "A@1/q"}
    renewed = await threads.renew_leases(asked, expires_at=later)
    assert renewed == {"t1"}
    leases = {t: await _lease_of(threads, t) for t in ("t1", "t2", "t3")}
    assert leases["t1"].expires_at == later
    assert leases["t2"].lease_id == "C@3/w"
    assert leases["t3"].expires_at == LATER
    assert await threads.renew_leases({}, expires_at=later) == set()


async def test_a_restarted_instance_frees_its_predecessors_leases_and_no_others(
    threads: ThreadStore,
) -> None:
    await _leased(threads, "t1", "host:8787@old/a")
    await _leased(threads, "t2", "host:8787@old/b")
    await _leased(threads, "t3", "host:8787@new/c")
    await _leased(threads, "t4", "host:8788@old/d")
    # A name with LIKE wildcards must match itself only.
    await _leased(threads, "t5", "host_8787@old/e")
    freed = await threads.release_instance_leases("host:8787", keep="host:8787@new/")
    assert freed == 2
    leases = {t: (await threads.get(t)) for t in ("t1", "t2", "t3", "t4", "t5")}
    assert {t for t, r in leases.items() if r is not None and r.lease is None} == {"t1", "t2"}
    # The freed threads take a new run at once, without waiting for the TTL.
    await threads.acquire_lease("t1", lease_id="L9", run_id="r9", now=NOW, expires_at=LATER)
    assert await threads.release_instance_leases("host%", keep="x@y/") == 0


async def test_lease_on_an_unknown_thread_is_not_found(threads: ThreadStore) -> None:
    with pytest.raises(ThreadNotFoundError):
        await threads.acquire_lease("nope", lease_id="L1", run_id="r1", now=NOW, expires_at=LATER)


async def test_appends_get_dense_increasing_sequences_and_read_back_in_order(
    threads: ThreadStore,
) -> None:
    await _leased(threads)
    assert await threads.append_events(
        "t1", lease_id="L1", run_id="r1", events=['{"a":1}', '{"a":2}']
    ) == [1, 2]
    assert await threads.append_events("t1", lease_id="L1", run_id="r1", events=['{"a":3}']) == [3]
    assert await threads.append_events("t1", lease_id="L1", run_id="r1", events=[]) == []
    entries = await threads.read_events("t1", after_sequence=0)
    assert [(e.sequence, e.run_id, e.event_json) for e in entries] == [
        (1, "r1", '{"a":1}'),
        (2, "r1", '{"a":2}'),
        (3, "r1", '{"a":3}'),
    ]
    assert [e.sequence for e in await threads.read_events("t1", after_sequence=1, limit=1)] == [2]
    assert await threads.read_events("t1", after_sequence=3) == []
    record = await threads.get("t1")
    assert record is not None
    assert record.last_sequence == 3
    assert record.version == 1  # appends are not content changes


async def test_concurrent_appends_never_share_a_sequence(threads: ThreadStore) -> None:
    await _leased(threads)
    batches = await asyncio.gather(
        *(
            threads.append_events("t1", lease_id="L1", run_id="r1", events=[f'{{"i":{i}}}'] * 3)
            for i in range(25)
        )
    )
    flat = sorted(s for batch in batches for s in batch)
    assert flat == list(range(1, 76))
    for batch in batches:
        assert batch == list(range(batch[0], batch[0] + 3))
    assert [
        e.sequence for e in await threads.read_events("t1", after_sequence=0, limit=500)
    ] == flat


async def test_append_without_the_lease_is_refused_and_writes_nothing(threads: ThreadStore) -> None:
    await _leased(threads)
    with pytest.raises(LeaseLostError):
        await threads.append_events("t1", lease_id="L2", run_id="r2", events=['{"x":1}'])
    await threads.release_lease("t1", lease_id="L1")
    with pytest.raises(LeaseLostError):
        await threads.append_events("t1", lease_id="L1", run_id="r1", events=['{"x":1}'])
    assert await threads.read_events("t1", after_sequence=0) == []


async def test_an_append_that_ends_the_run_gives_the_lease_back_in_the_same_write(
    threads: ThreadStore,
) -> None:
    await _leased(threads)
    sequences = await threads.append_events(
        "t1", lease_id="L1", run_id="r1", events=['{"a":1}', '{"end":1}'], release=True
    )
    record = await threads.get("t1")
    assert record is not None
    assert (record.lease, record.last_sequence) == (None, 2)
    assert sequences == [1, 2]
    # The next run takes the thread at once; the ended run can write nothing more.
    await threads.acquire_lease("t1", lease_id="L2", run_id="r2", now=NOW, expires_at=LATER)
    with pytest.raises(LeaseLostError):
        await threads.append_events(
            "t1", lease_id="L1", run_id="r1", events=['{"late":1}'], release=True
        )
    held = await threads.get("t1")
    assert held is not None
    assert held.lease is not None
    assert held.lease.lease_id == "L2"
    assert [e.event_json for e in await threads.read_events("t1", after_sequence=0)] == [
        '{"a":1}',
        '{"end":1}',
    ]


async def test_an_ending_append_with_no_events_still_gives_the_lease_back(
    threads: ThreadStore,
) -> None:
    await _leased(threads)
    assert (
        await threads.append_events("t1", lease_id="L1", run_id="r1", events=[], release=True) == []
    )
    record = await threads.get("t1")
    assert record is not None
    assert record.lease is None


async def test_logs_of_different_threads_are_independent(threads: ThreadStore) -> None:
    await _leased(threads, "t1")
    await _leased(threads, "t2")
    await threads.append_events("t1", lease_id="L1", run_id="r1", events=['{"t":1}'])
    assert await threads.append_events("t2", lease_id="L1", run_id="r1", events=['{"t":2}']) == [1]
    assert [e.event_json for e in await threads.read_events("t2", after_sequence=0)] == ['{"t":2}']


async def test_wait_for_events_returns_at_once_when_the_log_is_ahead(threads: ThreadStore) -> None:
    await _leased(threads)
    await threads.append_events("t1", lease_id="L1", run_id="r1", events=['{"a":1}'])
    assert await threads.wait_for_events("t1", after_sequence=0, wait_seconds=30) is True


async def test_wait_for_events_times_out_without_new_events(threads: ThreadStore) -> None:
    await _leased(threads)
    assert await threads.wait_for_events("t1", after_sequence=0, wait_seconds=0.05) is False


async def test_stop_waiting_ends_every_wait_now_and_every_later_one_at_once(
    threads: ThreadStore,
) -> None:
    await _leased(threads)
    waiting = asyncio.create_task(threads.wait_for_events("t1", after_sequence=0, wait_seconds=30))
    await asyncio.sleep(0.05)  # let it wait
    threads.stop_waiting()
    async with asyncio.timeout(20):  # liveness only: without the stop each wait takes 30 s
        assert await waiting is False
        assert await threads.wait_for_events("t1", after_sequence=0, wait_seconds=30) is False
        await threads.append_events("t1", lease_id="L1", run_id="r1", events=['{"a":1}'])
        assert await threads.wait_for_events("t1", after_sequence=0, wait_seconds=30) is True


async def test_wait_for_events_wakes_on_an_append(threads: ThreadStore) -> None:
    await _leased(threads)
    waiters = [
        asyncio.create_task(threads.wait_for_events("t1", after_sequence=0, wait_seconds=30))
        for _ in range(5)
    ]
    await asyncio.sleep(0)
    await threads.append_events("t1", lease_id="L1", run_id="r1", events=['{"a":1}'])
    assert await asyncio.gather(*waiters) == [True] * 5


async def test_records_returned_are_copies(threads: ThreadStore) -> None:
    record = await threads.create_or_load("t1", owner=None, now=NOW)
    record.messages.append({"id": "sneaky"})
    fetched = await threads.get("t1")
    assert fetched is not None
    assert fetched.messages == []


async def test_list_records_pages_one_owners_prefixed_records_newest_first(
    threads: ThreadStore,
) -> None:
    for n, at in enumerate([NOW, LATER, LATER, NOW + timedelta(minutes=1)]):
        await threads.create_or_load(f"p:{n}", owner="alice", now=at)
    await threads.create_or_load("p:bob", owner="bob", now=LATER)
    await threads.create_or_load("p:nobody", owner=None, now=LATER)
    await threads.create_or_load("q:0", owner="alice", now=LATER)
    await threads.create_or_load("p%_:x", owner="alice", now=NOW - timedelta(minutes=1))

    first = await threads.list_records("p:", owner="alice", before=None, limit=3)
    last = first[-1]
    rest = await threads.list_records(
        "p:", owner="alice", before=(last.updated_at, last.thread_id), limit=3
    )

    assert [r.thread_id for r in first] == ["p:2", "p:1", "p:3"]
    assert [r.thread_id for r in rest] == ["p:0"]
    assert [
        r.thread_id for r in await threads.list_records("p%", owner="alice", before=None, limit=9)
    ] == ["p%_:x"]
    assert [
        r.thread_id for r in await threads.list_records("p:", owner=None, before=None, limit=9)
    ] == ["p:nobody"]


async def test_a_wait_with_a_keep_alive_writer_has_it_write_the_keep_alives_and_wakes_on_an_append(
    threads: ThreadStore,
) -> None:
    await _leased(threads)
    written = asyncio.Event()

    def write_keep_alive() -> bool:
        written.set()
        return True

    waiting = asyncio.create_task(
        threads.wait_for_events(
            "t1", after_sequence=0, wait_seconds=0.05, keep_alive=write_keep_alive
        )
    )
    async with asyncio.timeout(20):  # liveness only
        await written.wait()
        assert not waiting.done()  # the keep-alive went out without ending the wait
        await threads.append_events("t1", lease_id="L1", run_id="r1", events=['{"a":1}'])
        assert await waiting is True
