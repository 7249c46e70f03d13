"""Four-eyes approvals and owed runs, over every store (memory, SQLite, PostgreSQL).

A pause that names approvers is decided only by them, never by its owner (the requester)
unless it allows the requester; entries are typed (a principal never matches a role or an
operation entry however it is spelled) and stored typed, while rows written before typed
approvers still read as their text says; the approvals inbox lists what a caller may decide;
an out-of-band decision records the thread it continues in the same write (``owed_runs``)
until that run is settled.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from pausemesh.core import ContinuationService, ManualClock
from pausemesh.core.approvers import Approver
from pausemesh.core.errors import (
    ContinuationNotFoundError,
    InvalidInputError,
    NotAnApproverError,
    TokenAlreadyUsedError,
)
from pausemesh.core.model import Continuation, ContinuationCreated, CreatedContinuation
from pausemesh.core.ports import EventStore
from pausemesh.core.resume import NamedApprover, OperationWatcher, Resume, TokenHolder, TrustedHost
from pausemesh.core.tokens import KeyedTokenIssuer
from tests.support.legacy_rows import stored_created, write_legacy_created

PAYLOAD = {"kind": "input", "message": "Approve flight PM404 (640 EUR)?"}
MANAGERS = frozenset({"manager"})
MANAGER = Approver.role("manager")


@pytest.fixture(name="keyed")
def keyed_fixture(event_store: EventStore, clock: ManualClock) -> ContinuationService:
    issuer = KeyedTokenIssuer({"k1": b"k" * 32}, "k1")
    return ContinuationService(store=event_store, clock=clock, keyed_issuer=issuer)


async def _ask(
    service: ContinuationService, *, approvers: Any = (MANAGER,), **kwargs: Any
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
    carol = Approver.principal("carol")
    created = await _ask(keyed, approvers=[MANAGER, carol, carol])
    # Shown in their text form: one reading each (no principal id starts with role:).
    assert created.continuation.approvers == ("role:manager", "carol")
    stored = await keyed.get(created.continuation.continuation_id, principal="alice")
    assert stored.approvers == ("role:manager", "carol")
    assert stored.allow_requester is False


async def test_the_approvers_are_stored_typed(
    keyed: ContinuationService, event_store: EventStore
) -> None:
    approvers = [MANAGER, Approver.principal("key:billing-bot"), Approver.operation("op-1")]
    created = await _ask(keyed, approvers=approvers, allow_requester=True)
    cid = created.continuation.continuation_id

    raw = await stored_created(event_store, cid)

    assert raw["approvers"] == [
        {"kind": "role", "name": "manager"},
        {"kind": "principal", "name": "key:billing-bot"},
        {"kind": "operation", "name": "op-1"},
    ]
    assert raw["allowRequester"] is True
    [event, *_] = await event_store.load(cid)
    assert isinstance(event, ContinuationCreated)
    assert event.approvers == tuple(approvers)


async def test_rows_written_before_typed_approvers_read_as_their_text_says(
    keyed: ContinuationService, event_store: EventStore, store_kind: str
) -> None:
    if store_kind == "memory":
        pytest.skip("a memory store starts empty: it never holds rows written before")
    template = await _ask(keyed, continuation_id="c-template")
    assert keyed.keyed_issuer is not None
    token = keyed.keyed_issuer.issue("c-legacy")  # its own keyed token, as if created so
    legacy = await write_legacy_created(
        event_store,
        template.continuation.continuation_id,
        "c-legacy",
        ["role:manager", "carol", "operation:op-9"],
        resumeTokenHash=token.token_hash,
        tokenKeyId=token.key_id,
        tokenNonce=token.nonce,
    )

    [event] = await event_store.load(legacy)
    assert isinstance(event, ContinuationCreated)
    assert event.approvers == (MANAGER, Approver.principal("carol"), Approver.operation("op-9"))
    assert event.allow_requester is False
    # The inbox finds it by each kind, and by nothing spelled like one.
    assert legacy in _ids(await keyed.pending_approvals(principal="bob", roles=MANAGERS))
    assert legacy in _ids(await keyed.pending_approvals(principal="carol"))
    assert legacy in _ids(await keyed.pending_operation_waits("op-9"))
    assert legacy not in _ids(await keyed.pending_approvals(principal="role:manager"))
    assert legacy not in _ids(await keyed.pending_approvals(principal="operation:op-9"))
    with pytest.raises(NotAnApproverError):  # its owner, even holding the role
        await keyed.resume(
            Resume(
                continuation_id=legacy,
                idempotency_key="k",
                payload={},
                by=NamedApprover("alice", roles=MANAGERS),
            )
        )
    decided = (
        await keyed.resume(
            Resume(
                continuation_id=legacy,
                idempotency_key="k",
                payload={},
                by=NamedApprover("bob", roles=MANAGERS),
            )
        )
    ).continuation
    assert decided.resolved_by == "bob"


def _ids(continuations: list[Continuation]) -> list[str]:
    return [c.continuation_id for c in continuations]


async def test_a_principal_spelled_like_a_role_or_an_operation_matches_neither(
    keyed: ContinuationService,
) -> None:
    for_managers = (await _ask(keyed)).continuation.continuation_id
    for_operation = (
        await _ask(keyed, approvers=[Approver.operation("op-1")])
    ).continuation.continuation_id

    for impostor, target in (("role:manager", for_managers), ("operation:op-1", for_operation)):
        assert await keyed.pending_approvals(principal=impostor) == []
        with pytest.raises(ContinuationNotFoundError):
            await keyed.get_for_approver(target, principal=impostor)
        with pytest.raises(ContinuationNotFoundError):
            await keyed.resume(
                Resume(
                    continuation_id=target,
                    idempotency_key="k",
                    payload={},
                    by=NamedApprover(impostor),
                )
            )
    # A role named like an operation is no operation either.
    assert await keyed.pending_approvals(principal="x", roles=frozenset({"operation:op-1"})) == []
    # The operation's own door decides it, and only for that operation.
    assert _ids(await keyed.pending_operation_waits("op-1")) == [for_operation]
    assert await keyed.pending_operation_waits("op-2") == []
    with pytest.raises(ContinuationNotFoundError):
        await keyed.resume(
            Resume(
                continuation_id=for_operation,
                idempotency_key="k",
                payload={},
                by=OperationWatcher("op-2"),
            )
        )
    with pytest.raises(ContinuationNotFoundError):
        await keyed.resume(
            Resume(
                continuation_id=for_managers,
                idempotency_key="k",
                payload={},
                by=OperationWatcher("op-1"),
            )
        )
    outcome = await keyed.resume(
        Resume(
            continuation_id=for_operation,
            idempotency_key="k",
            payload={},
            by=OperationWatcher("op-1"),
        )
    )
    assert outcome.continuation.resolved_by == "operation:op-1"
    assert outcome.continues_thread == "thread-1"


async def test_only_an_approver_decides_and_resolved_by_names_them(
    keyed: ContinuationService,
) -> None:
    cid = (await _ask(keyed)).continuation.continuation_id
    # The owner knows the pause exists: both doors tell it it is no approver.
    with pytest.raises(NotAnApproverError):
        await keyed.resume(
            Resume(continuation_id=cid, idempotency_key="k", payload={}, by=NamedApprover("alice"))
        )
    with pytest.raises(NotAnApproverError):
        await keyed.resume(
            Resume(continuation_id=cid, idempotency_key="k", payload={}, by=TrustedHost("alice"))
        )
    # Someone without the role does not see it at all.
    with pytest.raises(ContinuationNotFoundError):
        await keyed.get_for_approver(cid, principal="dave")
    decided = (
        await keyed.resume(
            Resume(
                continuation_id=cid,
                idempotency_key="approve-1",
                payload={"decision": "approve"},
                by=NamedApprover("bob", roles=MANAGERS),
            )
        )
    ).continuation
    assert decided.status == "resumed"
    assert decided.resolved_by == "bob"
    # An exact retry returns the stored outcome; another key is refused.
    again = (
        await keyed.resume(
            Resume(
                continuation_id=cid,
                idempotency_key="approve-1",
                payload={"decision": "approve"},
                by=NamedApprover("bob", roles=MANAGERS),
            )
        )
    ).continuation
    assert again == decided
    with pytest.raises(TokenAlreadyUsedError):
        await keyed.resume(
            Resume(
                continuation_id=cid,
                idempotency_key="approve-2",
                payload={"decision": "approve"},
                by=NamedApprover("erin", roles=MANAGERS),
            )
        )


async def test_the_owner_never_decides_a_pause_that_names_approvers_even_holding_the_role(
    keyed: ContinuationService,
) -> None:
    listed = [Approver.principal("alice"), MANAGER]
    for approvers in ([MANAGER], listed):
        cid = (await _ask(keyed, approvers=approvers)).continuation.continuation_id
        with pytest.raises(NotAnApproverError):
            await keyed.resume(
                Resume(
                    continuation_id=cid,
                    idempotency_key="k",
                    payload={},
                    by=TrustedHost("alice", roles=MANAGERS),
                )
            )
        with pytest.raises(NotAnApproverError):
            await keyed.resume(
                Resume(
                    continuation_id=cid,
                    idempotency_key="k",
                    payload={},
                    by=NamedApprover("alice", roles=MANAGERS),
                )
            )
        with pytest.raises(NotAnApproverError):
            await keyed.get_for_approver(cid, principal="alice", roles=MANAGERS)
        assert cid not in _ids(await keyed.pending_approvals(principal="alice", roles=MANAGERS))
        # Another manager still decides it: the refusals were about who asked.
        assert cid in _ids(await keyed.pending_approvals(principal="bob", roles=MANAGERS))


async def test_a_pause_that_allows_the_requester_lets_an_owner_who_is_an_approver_decide(
    keyed: ContinuationService,
) -> None:
    by_role = (await _ask(keyed, allow_requester=True)).continuation
    assert by_role.allow_requester is True
    cid = by_role.continuation_id
    # Allowed, the owner is still only an approver if named (by id or by a role it holds).
    with pytest.raises(NotAnApproverError):
        await keyed.resume(
            Resume(continuation_id=cid, idempotency_key="k", payload={}, by=NamedApprover("alice"))
        )
    assert cid in _ids(await keyed.pending_approvals(principal="alice", roles=MANAGERS))
    decided = (
        await keyed.resume(
            Resume(
                continuation_id=cid,
                idempotency_key="k",
                payload={},
                by=NamedApprover("alice", roles=MANAGERS),
            )
        )
    ).continuation
    assert decided.resolved_by == "alice"

    by_name = await _ask(keyed, approvers=[Approver.principal("alice")], allow_requester=True)
    resumed = (
        await keyed.resume(
            Resume(
                continuation_id=by_name.continuation.continuation_id,
                idempotency_key="k",
                payload={"ok": True},
                by=TrustedHost("alice"),
            )
        )
    ).continuation
    assert resumed.status == "resumed"
    # Without approvers there is nothing to waive: the flag is not kept.
    plain = await keyed.create(payload=PAYLOAD, owner="alice", keyed=True, allow_requester=True)
    assert plain.continuation.allow_requester is False


async def test_bad_approvers_are_refused_before_anything_is_written(
    keyed: ContinuationService, event_store: EventStore
) -> None:
    for bad in ("role:manager", ["role:manager"], ["carol"], [7], {"kind": "role"}, [None]):
        with pytest.raises(InvalidInputError) as info:
            await _ask(keyed, approvers=bad, continuation_id="c-bad")
        assert info.value.code == "INVALID_APPROVERS"
        assert "Approver" in info.value.message
    too_many = [Approver.principal(f"p-{i}") for i in range(33)]
    with pytest.raises(InvalidInputError, match="at most 32"):
        await _ask(keyed, approvers=too_many, continuation_id="c-bad")
    assert list(await event_store.load("c-bad")) == []


async def test_the_inbox_lists_what_the_caller_may_decide_scoped_and_paginated(
    keyed: ContinuationService,
) -> None:
    for_managers = [(await _ask(keyed)).continuation.continuation_id for _ in range(5)]
    for_carol = (
        await _ask(keyed, approvers=[Approver.principal("carol")])
    ).continuation.continuation_id
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
    await keyed.resume(
        Resume(
            continuation_id=decided,
            idempotency_key="k",
            payload={"decision": "reject"},
            by=NamedApprover("bob", roles=MANAGERS),
        )
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
    await keyed.resume(
        Resume(
            continuation_id=by_inbox,
            idempotency_key="k",
            payload={"decision": "approve"},
            by=NamedApprover("bob", roles=MANAGERS),
        )
    )
    await keyed.resume(
        Resume(
            continuation_id=by_token.continuation.continuation_id,
            idempotency_key="k",
            payload={},
            by=TokenHolder(by_token.resume_token, principal="alice"),
        )
    )
    # The in-process host runs the agent itself: nothing is owed.
    await keyed.resume(
        Resume(
            continuation_id=in_process.continuation.continuation_id,
            idempotency_key="k",
            payload={},
            by=TrustedHost("alice"),
        )
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
            await keyed.resume(
                Resume(
                    continuation_id=cid,
                    idempotency_key=f"k-{i}",
                    payload={"decision": "approve"},
                    by=NamedApprover(f"manager-{i % 2}", roles=MANAGERS),
                )
            )
        except TokenAlreadyUsedError:
            return "lost"
        return "won"

    results = await asyncio.gather(*(decide(i) for i in range(20)))
    assert results.count("won") == 1
    state = await keyed.get_for_approver(cid, principal="bob", roles=MANAGERS)
    assert state.resolved_by in {"manager-0", "manager-1"}
