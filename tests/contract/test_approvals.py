"""Four-eyes approvals and owed runs, over every store (memory, SQLite, PostgreSQL).

A pause that names approvers is decided only by them (the owner too only if listed); the
approvals inbox lists what a caller may decide; an out-of-band decision records the thread it
continues in the same write (``owed_runs``) until that run is settled.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from pausemesh.core import ContinuationService, ManualClock
from pausemesh.core.errors import (
    ContinuationNotFoundError,
    InvalidInputError,
    NotAnApproverError,
    TokenAlreadyUsedError,
)
from pausemesh.core.model import CreatedContinuation
from pausemesh.core.ports import EventStore
from pausemesh.core.tokens import KeyedTokenIssuer

PAYLOAD = {"kind": "input", "message": "Approve flight PM404 (640 EUR)?"}
MANAGERS = frozenset({"manager"})


@pytest.fixture(name="keyed")
def keyed_fixture(event_store: EventStore, clock: ManualClock) -> ContinuationService:
    issuer = KeyedTokenIssuer({"k1": b"k" * 32}, "k1")
    return ContinuationService(store=event_store, clock=clock, keyed_issuer=issuer)


async def _ask(
    service: ContinuationService, *, approvers: Any = ("role:manager",), **kwargs: Any
) -> CreatedContinuation:
    return await service.create(
        payload=PAYLOAD,
        owner="alice",
        correlation_id="thread-1",
        keyed=True,
        approvers=approvers,
        **kwargs,
    )


async def test_the_approvers_are_kept_with_the_continuation(keyed: ContinuationService) -> None:
    created = await _ask(keyed, approvers=["role:manager", "carol", "carol"])
    assert created.continuation.approvers == ("role:manager", "carol")
    stored = await keyed.get(created.continuation.continuation_id, principal="alice")
    assert stored.approvers == ("role:manager", "carol")


async def test_only_an_approver_decides_and_resolved_by_names_them(
    keyed: ContinuationService,
) -> None:
    cid = (await _ask(keyed)).continuation.continuation_id
    # The owner is not listed: the inbox hides it (404) and the in-process resume refuses it.
    with pytest.raises(ContinuationNotFoundError):
        await keyed.decide(continuation_id=cid, idempotency_key="k", payload={}, principal="alice")
    with pytest.raises(NotAnApproverError):
        await keyed.resume_trusted(
            continuation_id=cid, idempotency_key="k", payload={}, principal="alice"
        )
    # Someone without the role does not see it at all.
    with pytest.raises(ContinuationNotFoundError):
        await keyed.get_for_approver(cid, principal="dave")
    decided = await keyed.decide(
        continuation_id=cid,
        idempotency_key="approve-1",
        payload={"decision": "approve"},
        principal="bob",
        roles=MANAGERS,
    )
    assert decided.status == "resumed"
    assert decided.resolved_by == "bob"
    # An exact retry returns the stored outcome; another key is refused.
    again = await keyed.decide(
        continuation_id=cid,
        idempotency_key="approve-1",
        payload={"decision": "approve"},
        principal="bob",
        roles=MANAGERS,
    )
    assert again == decided
    with pytest.raises(TokenAlreadyUsedError):
        await keyed.decide(
            continuation_id=cid,
            idempotency_key="approve-2",
            payload={"decision": "approve"},
            principal="erin",
            roles=MANAGERS,
        )


async def test_a_listed_owner_may_decide_its_own_pause(keyed: ContinuationService) -> None:
    cid = (await _ask(keyed, approvers=["alice", "role:manager"])).continuation.continuation_id
    decided = await keyed.resume_trusted(
        continuation_id=cid, idempotency_key="k", payload={"ok": True}, principal="alice"
    )
    assert decided.status == "resumed"


async def test_bad_approvers_are_refused_before_anything_is_written(
    keyed: ContinuationService, event_store: EventStore
) -> None:
    for bad in ("role:manager", ["role:"], [""], [7]):
        with pytest.raises(InvalidInputError) as info:
            await _ask(keyed, approvers=bad, continuation_id="c-bad")
        assert info.value.code in {"INVALID_APPROVERS", "INVALID_INPUT", "INVALID_ID"}
    assert list(await event_store.load("c-bad")) == []


async def test_the_inbox_lists_what_the_caller_may_decide_scoped_and_paginated(
    keyed: ContinuationService,
) -> None:
    for_managers = [(await _ask(keyed)).continuation.continuation_id for _ in range(5)]
    for_carol = (await _ask(keyed, approvers=["carol"])).continuation.continuation_id
    await keyed.create(payload=PAYLOAD, owner="alice", keyed=True)  # no approvers: not listed

    seen: list[str] = []
    before: str | None = None
    while True:
        page = await keyed.pending_approvals(
            principal="bob", roles=MANAGERS, before=before, limit=2
        )
        if not page:
            break
        seen += [c.continuation_id for c in page]
        before = page[-1].continuation_id
    assert seen == sorted(for_managers, reverse=True)  # newest first, no gaps or duplicates
    carol = await keyed.pending_approvals(principal="carol")
    assert [c.continuation_id for c in carol] == [for_carol]
    assert await keyed.pending_approvals(principal="alice") == []
    assert await keyed.pending_approvals(principal="dave", roles=frozenset({"intern"})) == []


async def test_decided_and_expired_pauses_leave_the_inbox(
    keyed: ContinuationService, clock: ManualClock
) -> None:
    decided = (await _ask(keyed)).continuation.continuation_id
    lapsing = (await _ask(keyed, expires_at=clock.now() + timedelta(seconds=5))).continuation
    staying = (await _ask(keyed)).continuation.continuation_id
    await keyed.decide(
        continuation_id=decided,
        idempotency_key="k",
        payload={"decision": "reject"},
        principal="bob",
        roles=MANAGERS,
    )
    clock.advance(6)
    listed = await keyed.pending_approvals(principal="bob", roles=MANAGERS)
    assert [c.continuation_id for c in listed] == [staying]
    assert lapsing.continuation_id not in [c.continuation_id for c in listed]


async def test_an_out_of_band_decision_is_recorded_with_its_owed_run_until_settled(
    keyed: ContinuationService, event_store: EventStore
) -> None:
    by_inbox = (await _ask(keyed)).continuation.continuation_id
    by_token = await keyed.create(payload=PAYLOAD, owner="alice", correlation_id="t2", keyed=True)
    in_process = await keyed.create(payload=PAYLOAD, owner="alice", correlation_id="t3", keyed=True)
    await keyed.decide(
        continuation_id=by_inbox,
        idempotency_key="k",
        payload={"decision": "approve"},
        principal="bob",
        roles=MANAGERS,
    )
    await keyed.resume(
        continuation_id=by_token.continuation.continuation_id,
        resume_token=by_token.resume_token,
        idempotency_key="k",
        payload={},
        principal="alice",
    )
    # The in-process host runs the agent itself: nothing is owed.
    await keyed.resume_trusted(
        continuation_id=in_process.continuation.continuation_id,
        idempotency_key="k",
        payload={},
        principal="alice",
    )
    owed = sorted(await event_store.owed_runs(limit=10))
    assert owed == sorted([(by_inbox, "thread-1"), (by_token.continuation.continuation_id, "t2")])
    await event_store.settle_owed([by_inbox])
    assert list(await event_store.owed_runs(limit=10)) == [
        (by_token.continuation.continuation_id, "t2")
    ]


async def test_concurrent_decisions_from_many_approvers_have_one_winner(
    keyed: ContinuationService,
) -> None:
    cid = (await _ask(keyed)).continuation.continuation_id

    async def decide(i: int) -> str:
        try:
            await keyed.decide(
                continuation_id=cid,
                idempotency_key=f"k-{i}",
                payload={"decision": "approve"},
                principal=f"manager-{i % 2}",
                roles=MANAGERS,
            )
        except TokenAlreadyUsedError:
            return "lost"
        return "won"

    results = await asyncio.gather(*(decide(i) for i in range(20)))
    assert results.count("won") == 1
    state = await keyed.get_for_approver(cid, principal="bob", roles=MANAGERS)
    assert state.resolved_by in {"manager-0", "manager-1"}
