"""The OperationLedger contract: every ledger (memory, SQLite, PostgreSQL) passes the same tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest

from pausemesh.core import ManualClock
from pausemesh.core.errors import (
    InvalidInputError,
    OperationConflictError,
    OutcomeUnknownError,
)
from pausemesh.core.operations import (
    EXECUTE,
    MAX_RESENDS,
    OUTCOME_UNKNOWN,
    RECONCILIATION_ONLY,
    RECOVERED,
    RESEND_SETTLE,
    RESENT,
    OperationLedger,
    TargetAnswer,
    TargetFound,
    TargetNeverSaw,
    operation_id,
    run_once,
    terms_hash,
)
from tests.support.operation_ledgers import LEDGER_FACTORIES, open_ledger

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
LATER = NOW + timedelta(seconds=5)
ARGS: dict[str, Any] = {"flight": "LH123", "passengers": 1}


@pytest.fixture(name="ledger", params=sorted(LEDGER_FACTORIES))
async def ledger_fixture(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[OperationLedger]:
    async with open_ledger(request.param, tmp_path) as ledger:
        yield ledger


def test_operation_id_depends_only_on_domain_and_business_key() -> None:
    assert operation_id("travel", "booking:t1") == operation_id("travel", "booking:t1")
    assert operation_id("travel", "booking:t1") != operation_id("travel", "booking:t2")
    assert operation_id("travel", "booking:t1") != operation_id("hotel", "booking:t1")
    assert operation_id("travel", "booking:t1").startswith("op:")
    assert terms_hash("book", {"a": 1, "b": 2}) == terms_hash("book", {"b": 2, "a": 1})


async def test_first_begin_records_the_attempt_and_says_execute(ledger: OperationLedger) -> None:
    begun = await ledger.begin("travel", "booking:t1", tool="book", arguments=ARGS, now=NOW)
    assert begun.decision == EXECUTE
    record = begun.record
    assert record.operation_id == operation_id("travel", "booking:t1")
    assert (record.tool, record.arguments, record.completed) == ("book", ARGS, False)
    assert await ledger.get(record.operation_id) == record


async def test_an_attempt_without_outcome_is_sticky_outcome_unknown(
    ledger: OperationLedger,
) -> None:
    await ledger.begin("travel", "booking:t1", tool="book", arguments=ARGS, now=NOW)
    for _ in range(3):
        again = await ledger.begin("travel", "booking:t1", tool="book", arguments=ARGS, now=LATER)
        assert again.decision == OUTCOME_UNKNOWN


async def test_completed_operation_reconciles_with_the_recorded_outcome(
    ledger: OperationLedger,
) -> None:
    begun = await ledger.begin("travel", "booking:t1", tool="book", arguments=ARGS, now=NOW)
    done = await ledger.complete(
        begun.record.operation_id,
        attempt_id=begun.record.attempt_id,
        result={"confirmation": "PNR1"},
        now=LATER,
    )
    assert done.completed
    assert done.result == {"confirmation": "PNR1"}
    assert done.completed_at == LATER
    # Argument key order is not a different set of terms.
    again = await ledger.begin(
        "travel",
        "booking:t1",
        tool="book",
        arguments={"passengers": 1, "flight": "LH123"},
        now=LATER,
    )
    assert again.decision == RECONCILIATION_ONLY
    assert again.record == done


async def test_same_key_with_different_terms_is_a_conflict(ledger: OperationLedger) -> None:
    await ledger.begin("travel", "booking:t1", tool="book", arguments=ARGS, now=NOW)
    with pytest.raises(OperationConflictError):
        await ledger.begin(
            "travel", "booking:t1", tool="book", arguments={**ARGS, "flight": "AF456"}, now=NOW
        )
    with pytest.raises(OperationConflictError):
        await ledger.begin("travel", "booking:t1", tool="cancel", arguments=ARGS, now=NOW)


async def test_complete_is_write_once_and_owned_by_the_attempt(ledger: OperationLedger) -> None:
    begun = await ledger.begin("travel", "booking:t1", tool="book", arguments=ARGS, now=NOW)
    op_id, attempt = begun.record.operation_id, begun.record.attempt_id
    with pytest.raises(OperationConflictError):
        await ledger.complete(op_id, attempt_id="someone-else", result={"x": 1}, now=LATER)
    first = await ledger.complete(op_id, attempt_id=attempt, result={"x": 1}, now=LATER)
    # The same outcome again is an idempotent retry; another outcome is refused.
    assert await ledger.complete(op_id, attempt_id=attempt, result={"x": 1}, now=LATER) == first
    with pytest.raises(OperationConflictError):
        await ledger.complete(op_id, attempt_id=attempt, result={"x": 2}, now=LATER)
    assert await ledger.get(op_id) == first


async def test_complete_of_an_unknown_operation_is_refused(ledger: OperationLedger) -> None:
    with pytest.raises(InvalidInputError):
        await ledger.complete("op:nope", attempt_id="a", result=None, now=NOW)


@pytest.mark.parametrize(
    ("domain", "key", "tool", "arguments"),
    [
        ("", "k", "book", {}),
        ("travel", "", "book", {}),
        ("travel", "k", " book", {}),
        ("travel", "k", "book", {"x": float("nan")}),
    ],
    ids=["empty-domain", "empty-key", "edge-whitespace-tool", "non-json-arguments"],
)
async def test_malformed_operations_are_refused_before_anything_is_written(
    ledger: OperationLedger, domain: str, key: str, tool: str, arguments: Any
) -> None:
    with pytest.raises(InvalidInputError):
        await ledger.begin(domain, key, tool=tool, arguments=arguments, now=NOW)
    assert await ledger.list("travel") == []


async def test_list_returns_a_domains_operations_in_attempt_order(ledger: OperationLedger) -> None:
    for key in ("b", "a", "c"):
        await ledger.begin("travel", key, tool="book", arguments={}, now=NOW)
    await ledger.begin("hotel", "a", tool="book", arguments={}, now=NOW)
    assert [r.business_key for r in await ledger.list("travel")] == ["b", "a", "c"]
    assert [r.business_key for r in await ledger.list("travel", limit=2)] == ["b", "a"]
    assert [r.domain for r in await ledger.list("hotel")] == ["hotel"]


async def test_records_round_trip_through_json(ledger: OperationLedger) -> None:
    begun = await ledger.begin("travel", "k", tool="book", arguments=ARGS, now=NOW)
    stored = await ledger.get(begun.record.operation_id)
    assert stored is not None
    assert msgspec.json.decode(msgspec.json.encode(stored), type=type(stored)) == stored


async def test_fifty_concurrent_first_calls_yield_exactly_one_execute(
    ledger: OperationLedger,
) -> None:
    results = await asyncio.gather(
        *(
            ledger.begin("travel", "booking:race", tool="book", arguments=ARGS, now=NOW)
            for _ in range(50)
        )
    )
    decisions = [r.decision for r in results]
    assert decisions.count(EXECUTE) == 1
    assert decisions.count(OUTCOME_UNKNOWN) == 49
    winner = next(r.record for r in results if r.decision == EXECUTE)
    assert await ledger.get(winner.operation_id) == winner


async def test_run_once_dispatches_once_and_replays_the_result(ledger: OperationLedger) -> None:
    calls: list[int] = []

    async def book() -> dict[str, str]:
        calls.append(1)
        return {"confirmation": f"PNR{len(calls)}"}

    clock = ManualClock(NOW)
    first = await run_once(ledger, "travel", "booking:t1", "book", ARGS, book, clock=clock)
    second = await run_once(ledger, "travel", "booking:t1", "book", ARGS, book, clock=clock)
    assert (first.decision, second.decision) == (EXECUTE, RECONCILIATION_ONLY)
    assert first.result == second.result == {"confirmation": "PNR1"}
    assert len(calls) == 1
    with pytest.raises(OperationConflictError):
        await run_once(ledger, "travel", "booking:t1", "book", {"flight": "X"}, book, clock=clock)
    assert len(calls) == 1


async def test_run_once_never_retries_an_action_that_failed_midway(
    ledger: OperationLedger,
) -> None:
    calls: list[int] = []

    async def flaky() -> None:
        calls.append(1)
        raise ConnectionError("lost the reply")

    with pytest.raises(ConnectionError):
        await run_once(ledger, "travel", "booking:t1", "book", ARGS, flaky)
    with pytest.raises(OutcomeUnknownError):
        await run_once(ledger, "travel", "booking:t1", "book", ARGS, flaky)
    assert len(calls) == 1


async def test_concurrent_run_once_calls_dispatch_exactly_once(ledger: OperationLedger) -> None:
    calls: list[int] = []
    started, gate = asyncio.Event(), asyncio.Event()

    async def book() -> str:
        calls.append(1)
        started.set()
        await gate.wait()
        return "PNR"

    async def attempt() -> str:
        try:
            result = await run_once(ledger, "travel", "booking:race", "book", ARGS, book)
        except OutcomeUnknownError:
            return "unknown"
        return str(result.decision)

    tasks = [asyncio.create_task(attempt()) for _ in range(20)]
    await started.wait()
    gate.set()
    outcomes = await asyncio.gather(*tasks)
    assert outcomes.count(EXECUTE) == 1
    assert len(calls) == 1
    after = await run_once(ledger, "travel", "booking:race", "book", ARGS, book)
    assert after.decision == RECONCILIATION_ONLY


class KeyedTarget:
    """A cooperating target: effects keyed by the operation id, and a status lookup. It can
    be told to lose its reply (the effect happens, the caller never hears) or to go silent."""

    def __init__(self) -> None:
        self.effects: dict[str, dict[str, str]] = {}
        self.sends = 0
        self.lose_reply = False
        self.silent = False

    def action(self, key: str) -> Callable[[], Awaitable[dict[str, str]]]:
        async def send() -> dict[str, str]:
            self.sends += 1
            effect = self.effects.setdefault(key, {"confirmation": f"PNR-{len(self.effects)}"})
            if self.lose_reply:
                raise ConnectionError("the reply was lost")
            return effect

        return send

    async def lookup(self, key: str) -> TargetAnswer:
        if self.silent:
            raise TimeoutError("the target does not answer")
        found = self.effects.get(key)
        return TargetNeverSaw() if found is None else TargetFound(result=found)


async def _unknown(ledger: OperationLedger, business_key: str = "booking:t1") -> str:
    """An operation attempted and never completed (its process died mid-dispatch)."""
    begun = await ledger.begin("travel", business_key, tool="book", arguments=ARGS, now=NOW)
    assert begun.decision == EXECUTE
    return begun.record.operation_id


async def test_an_unknown_outcome_the_target_holds_is_recovered_and_audited(
    ledger: OperationLedger,
) -> None:
    target = KeyedTarget()
    op = await _unknown(ledger)
    await target.action(op)()  # the effect happened; the outcome was never recorded
    clock = ManualClock(LATER)
    result = await run_once(
        ledger, "travel", "booking:t1", "book", ARGS, target.action(op), clock=clock,
        lookup=target.lookup,
    )  # fmt: skip
    assert result.decision == RECOVERED
    assert result.result == target.effects[op]
    assert target.sends == 1
    assert [(r.step, r.recorded_at) for r in await ledger.recoveries(op)] == [(RECOVERED, LATER)]
    again = await run_once(ledger, "travel", "booking:t1", "book", ARGS, target.action(op))
    assert (again.decision, again.result) == (RECONCILIATION_ONLY, target.effects[op])
    assert target.sends == 1


async def test_a_target_that_never_saw_the_key_gets_it_once_more_and_only_once(
    ledger: OperationLedger,
) -> None:
    target = KeyedTarget()
    op = await _unknown(ledger)
    target.lose_reply = True  # the resend's reply is lost too
    with pytest.raises(ConnectionError):
        await run_once(
            ledger, "travel", "booking:t1", "book", ARGS, target.action(op), lookup=target.lookup
        )
    assert target.sends == 1
    assert [r.step for r in await ledger.recoveries(op)] == [RESENT]
    # The resend reached the target: the next call recovers it instead of sending again.
    target.lose_reply = False
    recovered = await run_once(
        ledger, "travel", "booking:t1", "book", ARGS, target.action(op), lookup=target.lookup
    )
    assert recovered.decision == RECOVERED
    assert target.sends == 1
    assert [r.step for r in await ledger.recoveries(op)] == [RESENT, RECOVERED]


async def test_a_resend_that_died_is_followed_by_another_only_after_it_settled(
    ledger: OperationLedger,
) -> None:
    target = KeyedTarget()
    op = await _unknown(ledger)
    # Resend 1 was claimed, and its process died before the target saw it.
    assert await ledger.claim_resend(op, attempt_id=await _attempt(ledger, op), number=1, now=NOW)

    async def again(at: datetime) -> str:
        clock = ManualClock(at)
        book = target.action(op)
        result = await run_once(
            ledger, "travel", "booking:t1", "book", ARGS, book, clock=clock, lookup=target.lookup
        )
        return result.decision

    # "Never saw it" while resend 1 may still be on its way settles nothing.
    with pytest.raises(OutcomeUnknownError):
        await again(NOW + RESEND_SETTLE - timedelta(seconds=1))
    assert target.sends == 0
    # Once it settled, a fresh "never saw it" permits resend 2: sent once, under the same key.
    assert await again(NOW + RESEND_SETTLE) == RESENT
    assert target.sends == 1
    steps = await ledger.recoveries(op)
    assert [(r.step, r.number) for r in steps] == [(RESENT, 1), (RESENT, 2)]
    assert await again(NOW + 3 * RESEND_SETTLE) == RECONCILIATION_ONLY
    assert target.sends == 1


async def test_after_the_last_permitted_resend_never_saw_it_sends_nothing(
    ledger: OperationLedger,
) -> None:
    target = KeyedTarget()
    op = await _unknown(ledger)
    attempt = await _attempt(ledger, op)
    for number in range(1, MAX_RESENDS + 1):
        assert await ledger.claim_resend(op, attempt_id=attempt, number=number, now=NOW)
    with pytest.raises(OutcomeUnknownError):
        await run_once(
            ledger, "travel", "booking:t1", "book", ARGS, target.action(op),
            clock=ManualClock(NOW + 100 * RESEND_SETTLE), lookup=target.lookup,
        )  # fmt: skip
    assert target.sends == 0
    assert len(await ledger.recoveries(op)) == MAX_RESENDS


async def test_claim_resend_records_each_number_once_and_only_the_next_one(
    ledger: OperationLedger,
) -> None:
    op = await _unknown(ledger)
    attempt = await _attempt(ledger, op)
    assert not await ledger.claim_resend(op, attempt_id=attempt, number=2, now=NOW)
    assert await ledger.claim_resend(op, attempt_id=attempt, number=1, now=NOW)
    assert not await ledger.claim_resend(op, attempt_id=attempt, number=1, now=LATER)
    assert not await ledger.claim_resend(op, attempt_id=attempt, number=3, now=LATER)
    assert await ledger.claim_resend(op, attempt_id=attempt, number=2, now=LATER)
    steps = await ledger.recoveries(op)
    assert [(r.step, r.number, r.recorded_at) for r in steps] == [
        (RESENT, 1, NOW),
        (RESENT, 2, LATER),
    ]


async def test_a_silent_target_leaves_the_outcome_unknown_and_sends_nothing(
    ledger: OperationLedger,
) -> None:
    target = KeyedTarget()
    op = await _unknown(ledger)
    target.silent = True
    with pytest.raises(OutcomeUnknownError):
        await run_once(
            ledger, "travel", "booking:t1", "book", ARGS, target.action(op), lookup=target.lookup
        )
    assert target.sends == 0
    assert await ledger.recoveries(op) == []
    record = await ledger.get(op)
    assert record is not None
    assert not record.completed


async def test_many_concurrent_recoveries_send_at_most_once(ledger: OperationLedger) -> None:
    target = KeyedTarget()
    op = await _unknown(ledger)

    async def attempt() -> str:
        try:
            result = await run_once(
                ledger, "travel", "booking:t1", "book", ARGS, target.action(op),
                lookup=target.lookup,
            )  # fmt: skip
        except OutcomeUnknownError:
            return "unknown"
        return str(result.decision)

    outcomes = await asyncio.gather(*(attempt() for _ in range(30)))
    assert outcomes.count(RESENT) == 1
    assert target.sends == 1
    assert len(target.effects) == 1
    assert set(outcomes) <= {RESENT, RECOVERED, RECONCILIATION_ONLY, "unknown"}
    final = await ledger.get(op)
    assert final is not None
    assert final.result == target.effects[op]


async def test_claim_resend_is_refused_to_a_foreign_attempt(ledger: OperationLedger) -> None:
    op = await _unknown(ledger)
    with pytest.raises(OperationConflictError):
        await ledger.claim_resend(op, attempt_id="not-the-attempt", number=1, now=NOW)


async def _attempt(ledger: OperationLedger, op: str) -> str:
    record = await ledger.get(op)
    assert record is not None
    return record.attempt_id
