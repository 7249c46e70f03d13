"""The resume command: one value naming the pause, the answer and who decides it.

``ContinuationService.resume(Resume(..., by=...))`` on the in-memory store: each kind of decider
records who decided and whether the decision owes the conversation a run; the raw token never
shows in a repr; anything but a decider is refused before the pause is touched. The rules every
store keeps (tokens, four eyes, races) are in ``tests/contract/test_service.py`` and
``tests/contract/test_approvals.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from msgspec import UNSET, UnsetType

from pausemesh.core import ContinuationService, ManualClock
from pausemesh.core.approvers import Approver
from pausemesh.core.model import CreatedContinuation
from pausemesh.core.resume import (
    Decider,
    NamedApprover,
    OperationWatcher,
    Resume,
    TokenHolder,
    TrustedHost,
)
from pausemesh.core.tokens import KeyedTokenIssuer
from pausemesh.stores.memory import InMemoryEventStore

PAYLOAD = {"kind": "input", "message": "Book flight PM101?"}
TOKEN = "raw-resume-token-0123456789abcdef"


def _service() -> ContinuationService:
    return ContinuationService(
        store=InMemoryEventStore(),
        clock=ManualClock(),
        keyed_issuer=KeyedTokenIssuer({"k1": b"k" * 32}, "k1"),
    )


def test_a_token_holder_keeps_its_token_out_of_its_repr() -> None:
    command = Resume(
        continuation_id="c1",
        idempotency_key="k",
        payload={},
        by=TokenHolder(TOKEN, principal="alice"),
    )

    assert TOKEN not in repr(command)
    assert "alice" in repr(command)


@pytest.mark.parametrize(
    ("pause", "decider", "resolved_by"),
    [
        pytest.param(
            {"owner": "alice"},
            lambda c: TokenHolder(c.resume_token, principal="alice"),
            "alice",
            id="token-holder",
        ),
        pytest.param({}, lambda c: TokenHolder(c.resume_token), UNSET, id="anonymous-token-holder"),
        pytest.param(
            {"owner": "alice"}, lambda _: TrustedHost("alice"), "alice", id="trusted-host"
        ),
        pytest.param(
            {"owner": "alice", "approvers": [Approver.role("manager")]},
            lambda _: NamedApprover("bob", roles=frozenset({"manager"})),
            "bob",
            id="named-approver",
        ),
        pytest.param(
            {"owner": "alice", "approvers": [Approver.operation("op-1")]},
            lambda _: OperationWatcher("op-1"),
            "operation:op-1",
            id="operation-watcher",
        ),
    ],
)
async def test_each_decider_records_who_decided(
    pause: dict[str, Any],
    decider: Callable[[CreatedContinuation], Decider],
    resolved_by: str | UnsetType,
) -> None:
    service = _service()
    created = await service.create(payload=PAYLOAD, keyed=True, **pause)
    by = decider(created)  # a token holder's token is known once the pause exists

    outcome = await service.resume(
        Resume(
            continuation_id=created.continuation.continuation_id,
            idempotency_key="k",
            payload={"ok": True},
            by=by,
        )
    )

    assert outcome.continuation.status == "resumed"
    assert outcome.continuation.resolved_by == resolved_by


async def test_only_a_decision_from_outside_the_conversation_owes_its_thread_a_run() -> None:
    service = _service()
    outside = await service.create(
        payload=PAYLOAD, owner="alice", correlation_id="thread-1", keyed=True
    )
    inside = await service.create(
        payload=PAYLOAD, owner="alice", correlation_id="thread-1", keyed=True
    )
    by_token = Resume(
        continuation_id=outside.continuation.continuation_id,
        idempotency_key="k",
        payload={},
        by=TokenHolder(outside.resume_token, principal="alice"),
    )
    by_host = Resume(
        continuation_id=inside.continuation.continuation_id,
        idempotency_key="k",
        payload={},
        by=TrustedHost("alice"),
    )

    assert (await service.resume(by_token)).continues_thread == "thread-1"
    assert (await service.resume(by_host)).continues_thread is None
    # An exact retry reports the stored decision's thread again, as the first time.
    assert (await service.resume(by_token)).continues_thread == "thread-1"


async def test_anything_but_a_decider_is_refused_before_the_pause_is_touched() -> None:
    service = _service()
    created = await service.create(payload=PAYLOAD, owner="alice", keyed=True)
    cid = created.continuation.continuation_id
    command = Resume(continuation_id=cid, idempotency_key="k", payload={}, by="alice")  # type: ignore[arg-type]

    with pytest.raises(
        TypeError, match="TokenHolder, TrustedHost, NamedApprover or OperationWatcher"
    ):
        await service.resume(command)

    assert (await service.get(cid, principal="alice")).status == "pending"
