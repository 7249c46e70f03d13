"""The FencedOperations contract (the continuity gateway's worker epochs and fenced replies):
SQLite (a real file) and PostgreSQL (a fresh, migrated schema) pass the same tests.

"Another process" is a second store opened on the same database: its own SQLite connection,
its own PostgreSQL pool. Times are the caller's (``now``/``deadline``), never the wall clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pausemesh.core.errors import InvalidInputError, ReplyTooLateError, RuntimeNotCurrentError
from pausemesh.core.fencing import FencedOperations
from pausemesh.core.operations import EXECUTE, OperationLedger, OperationRecord, new_attempt
from pausemesh.core.push import PushDelivery, PushStore
from pausemesh.core.webhooks import (
    OUTCOME_UNKNOWN_EVENT,
    WEBHOOK_CHANNEL,
    WebhookRoutes,
    WebhookSubscription,
)
from pausemesh.stores.sqlite import SqliteDatabase, SqliteFencedOperations, SqliteOperationLedger
from pausemesh.stores.sqlite.push import SqlitePushStore
from tests.support.postgres import DATABASE_URL, migrated_database

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
DEADLINE = NOW + timedelta(seconds=10)
DOMAIN = "billing"
REPLY: dict[str, Any] = {"upstreamResult": {"invoice": "inv-A-1"}}


@dataclass
class Stores:
    """One gateway process's ledger and fencing, and a second process's fencing (same data)."""

    ledger: OperationLedger
    fencing: FencedOperations
    other: FencedOperations
    # The outbox the webhook dispatcher claims from (the same database).
    outbox: PushStore


@pytest.fixture(name="stores", params=["sqlite", "postgres"])
async def stores_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    if request.param == "sqlite":
        path = str(tmp_path / "gateway.db")
        first_file = await SqliteDatabase(path).open()
        second_file = await SqliteDatabase(path).open()
        try:
            yield Stores(
                ledger=SqliteOperationLedger(first_file, owns_database=False),
                fencing=SqliteFencedOperations(first_file),
                other=SqliteFencedOperations(second_file),
                outbox=SqlitePushStore(first_file),
            )
        finally:
            await second_file.close()
            await first_file.close()
        return
    from pausemesh.stores.postgres import (  # noqa: PLC0415 - asyncpg only for this case
        PostgresDatabase,
        PostgresFencedOperations,
        PostgresOperationLedger,
        PostgresThreadStore,
    )
    from pausemesh.stores.postgres.push import PostgresPushStore  # noqa: PLC0415

    async with migrated_database() as database:
        second = await PostgresDatabase.connect(
            DATABASE_URL, schema=database.schema, min_size=1, max_size=4
        )
        try:
            yield Stores(
                ledger=PostgresOperationLedger(database),
                fencing=PostgresFencedOperations(database),
                other=PostgresFencedOperations(second),
                outbox=PostgresPushStore(database, PostgresThreadStore(database)),
            )
        finally:
            await second.close()


async def _begin(
    stores: Stores, key: str = "invoice:A-1", *, worker: str = "gw-1"
) -> tuple[OperationRecord, int]:
    """The attempt of ``key`` begun by ``worker`` at its freshly claimed epoch."""
    epoch = await stores.fencing.claim_worker(DOMAIN, worker, now=NOW)
    wanted = new_attempt(DOMAIN, key, "create_invoice", {"order_id": key}, now=NOW)
    begun = await stores.fencing.begin_fenced(wanted, worker=worker, epoch=epoch, job="create")
    assert begun.decision == EXECUTE
    return begun.record, epoch


async def _complete(
    stores: Stores, attempt: OperationRecord, epoch: int, *, now: datetime, worker: str = "gw-1"
) -> OperationRecord:
    return await stores.fencing.complete_fenced(
        attempt.operation_id,
        attempt_id=attempt.attempt_id,
        result=REPLY,
        worker=worker,
        epoch=epoch,
        now=now,
        deadline=DEADLINE,
    )


async def test_a_reply_before_its_deadline_is_recorded(stores: Stores) -> None:
    attempt, epoch = await _begin(stores)
    recorded = await _complete(stores, attempt, epoch, now=DEADLINE - timedelta(seconds=1))
    assert recorded.result == REPLY
    assert (await stores.ledger.get(attempt.operation_id)) == recorded
    assert await stores.other.unknown_of(attempt.operation_id) is None


async def test_a_reply_at_or_after_its_deadline_is_refused_and_leaves_no_outcome(
    stores: Stores,
) -> None:
    attempt, epoch = await _begin(stores)
    with pytest.raises(ReplyTooLateError) as refused:
        await _complete(stores, attempt, epoch, now=DEADLINE)
    stored = await stores.ledger.get(attempt.operation_id)
    assert refused.value.code == "REPLY_TOO_LATE"
    assert refused.value.details["declared"] is False
    assert stored is not None
    assert not stored.completed


async def test_a_reply_after_another_process_declared_the_outcome_unknown_is_refused(
    stores: Stores,
) -> None:
    attempt, epoch = await _begin(stores)
    declared = await stores.other.declare_unknown(
        attempt.operation_id, declared_by="gw-2", reason="NO_REPLY_RECORDED", now=NOW
    )
    with pytest.raises(ReplyTooLateError) as refused:
        # Well before the deadline: the declaration alone refuses it.
        await _complete(stores, attempt, epoch, now=NOW)
    stored = await stores.ledger.get(attempt.operation_id)
    unknown = await stores.fencing.unknown_of(attempt.operation_id)
    assert not declared.completed
    assert refused.value.details["declared"] is True
    assert stored is not None
    assert not stored.completed
    assert unknown is not None
    assert (unknown.declared_by, unknown.reason, unknown.declared_at) == (
        "gw-2",
        "NO_REPLY_RECORDED",
        NOW,
    )


async def test_declaring_unknown_after_a_recorded_reply_writes_nothing_and_returns_the_reply(
    stores: Stores,
) -> None:
    # Chosen behaviour: no effect (not an error). The caller answers from the returned record.
    attempt, epoch = await _begin(stores)
    recorded = await _complete(stores, attempt, epoch, now=NOW)
    declared = await stores.other.declare_unknown(
        attempt.operation_id, declared_by="gw-2", reason="NO_REPLY_RECORDED", now=NOW
    )
    assert declared == recorded
    assert declared.result == REPLY
    assert await stores.other.unknown_of(attempt.operation_id) is None
    assert await stores.ledger.get(attempt.operation_id) == recorded


async def test_declaring_unknown_twice_keeps_the_first_declaration(stores: Stores) -> None:
    attempt, _ = await _begin(stores)
    first = await stores.fencing.declare_unknown(
        attempt.operation_id, declared_by="gw-1", reason="UPSTREAM_TIMEOUT", now=NOW
    )
    second = await stores.other.declare_unknown(
        attempt.operation_id,
        declared_by="gw-2",
        reason="NO_REPLY_RECORDED",
        now=NOW + timedelta(seconds=3),
    )
    unknown = await stores.other.unknown_of(attempt.operation_id)
    assert first == second
    assert not second.completed
    assert unknown is not None
    assert (unknown.declared_by, unknown.reason, unknown.declared_at) == (
        "gw-1",
        "UPSTREAM_TIMEOUT",
        NOW,
    )


SECRET = "whsec_" + "A" * 32
ROUTES = WebhookRoutes(
    (
        WebhookSubscription(
            id="ops",
            url="https://ops.example/hook",
            events=frozenset({OUTCOME_UNKNOWN_EVENT}),
            secrets=(SECRET,),
        ),
        WebhookSubscription(
            id="approvals",
            url="https://approvals.example/hook",
            events=frozenset({"pause.created"}),
            secrets=(SECRET,),
        ),
    )
)


async def _queued(stores: Stores) -> list[PushDelivery]:
    """Every webhook delivery the outbox holds (claimed for this look)."""
    claim = await stores.outbox.claim(
        now=NOW + timedelta(minutes=1),
        holder="test",
        lease_until=NOW + timedelta(minutes=2),
        limit=100,
        max_attempts=10,
        per_key=100,
        channel=WEBHOOK_CHANNEL,
    )
    return claim.deliveries


async def test_declaring_unknown_queues_one_outcome_unknown_webhook_even_when_declared_twice(
    stores: Stores,
) -> None:
    attempt, _ = await _begin(stores, "invoice:secret-customer-7")
    await stores.fencing.declare_unknown(
        attempt.operation_id,
        declared_by="gw-1",
        reason="UPSTREAM_TIMEOUT",
        now=NOW,
        webhooks=ROUTES,
    )
    await stores.other.declare_unknown(
        attempt.operation_id,
        declared_by="gw-2",
        reason="NO_REPLY_RECORDED",
        now=NOW + timedelta(seconds=3),
        webhooks=ROUTES,
    )
    queued = await _queued(stores)
    assert [(d.config["subscription"], d.task_id) for d in queued] == [
        ("ops", attempt.operation_id)
    ]
    body = queued[0].payload
    assert body["type"] == OUTCOME_UNKNOWN_EVENT
    data = body["data"]
    assert data["operationId"] == attempt.operation_id
    assert data["domain"] == DOMAIN
    assert (data["declaredBy"], data["reason"]) == ("gw-1", "UPSTREAM_TIMEOUT")
    assert data["unknownSince"] == NOW.isoformat()
    assert data["operatorAction"]["command"].startswith(
        f"pausemesh ops resolve {attempt.operation_id} "
    )
    # Neither the business key nor the arguments travel: only a digest of the key.
    assert "secret-customer-7" not in repr(body)
    assert len(data["businessKeySha256"]) == 64


async def test_declaring_unknown_after_a_recorded_reply_queues_no_webhook(stores: Stores) -> None:
    attempt, epoch = await _begin(stores)
    await _complete(stores, attempt, epoch, now=NOW)
    await stores.other.declare_unknown(
        attempt.operation_id,
        declared_by="gw-2",
        reason="NO_REPLY_RECORDED",
        now=NOW,
        webhooks=ROUTES,
    )
    assert await _queued(stores) == []


async def test_declaring_an_operation_never_begun_is_refused(stores: Stores) -> None:
    with pytest.raises(InvalidInputError) as refused:
        await stores.fencing.declare_unknown(
            "op:never", declared_by="gw-1", reason="NO_REPLY_RECORDED", now=NOW
        )
    assert refused.value.code == "OPERATION_NOT_FOUND"


async def test_a_reply_racing_a_declaration_either_is_recorded_or_refused_never_both(
    stores: Stores,
) -> None:
    epoch = await stores.fencing.claim_worker(DOMAIN, "gw-1", now=NOW)
    attempts = []
    for n in range(12):
        wanted = new_attempt(DOMAIN, f"invoice:{n}", "create_invoice", {"n": n}, now=NOW)
        begun = await stores.fencing.begin_fenced(wanted, worker="gw-1", epoch=epoch, job="c")
        attempts.append(begun.record)

    async def reply(attempt: OperationRecord) -> bool:
        try:
            await _complete(stores, attempt, epoch, now=NOW)
        except ReplyTooLateError:
            return False
        return True

    async def declare(attempt: OperationRecord) -> OperationRecord:
        return await stores.other.declare_unknown(
            attempt.operation_id, declared_by="gw-2", reason="NO_REPLY_RECORDED", now=NOW
        )

    for attempt in attempts:
        recorded, declared = await asyncio.gather(reply(attempt), declare(attempt))
        stored = await stores.ledger.get(attempt.operation_id)
        unknown = await stores.fencing.unknown_of(attempt.operation_id)
        assert stored is not None
        # The declaring process saw the reply (and answers from it), or the reply was refused.
        assert recorded == stored.completed == declared.completed
        assert (unknown is None) == recorded


async def test_claiming_a_worker_name_fences_an_older_process_with_that_name(
    stores: Stores,
) -> None:
    attempt, old_epoch = await _begin(stores)
    new_epoch = await stores.other.claim_worker(DOMAIN, "gw-1", now=NOW)
    with pytest.raises(RuntimeNotCurrentError):
        await _complete(stores, attempt, old_epoch, now=NOW)
    wanted = new_attempt(DOMAIN, "invoice:B-2", "create_invoice", {"order_id": "B-2"}, now=NOW)
    with pytest.raises(RuntimeNotCurrentError):
        await stores.fencing.begin_fenced(wanted, worker="gw-1", epoch=old_epoch, job="create")
    stored = await stores.ledger.get(attempt.operation_id)
    assert new_epoch == old_epoch + 1
    assert await stores.fencing.worker_epoch(DOMAIN, "gw-1") == new_epoch
    assert stored is not None
    assert not stored.completed
    assert await stores.ledger.get(wanted.operation_id) is None
