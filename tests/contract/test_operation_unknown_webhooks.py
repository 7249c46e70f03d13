"""The ledger's "declared unknown" step, on every ledger (memory, SQLite, PostgreSQL).

``run_once`` declares an outcome unknown before it reports one (and when its action raised
without a lookup): the declaration and the ``operation.outcome_unknown`` webhooks it owes are
one write, once per operation however often (or by however many replicas) it is declared.
Real parts: a SQLite file opened twice (two processes' connections), a PostgreSQL schema with
two pools, the outbox each store's dispatcher claims from. The clock is a ``ManualClock``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pausemesh.core import ManualClock
from pausemesh.core.errors import InvalidInputError, OutcomeUnknownError
from pausemesh.core.operations import (
    ACTION_FAILED,
    MAX_RESENDS,
    NO_OUTCOME_RECORDED,
    RECOVERED,
    RESEND_SETTLE,
    RESENDS_USED_UP,
    TARGET_DID_NOT_ANSWER,
    OperationLedger,
    TargetAnswer,
    TargetFound,
    TargetNeverSaw,
    operation_id,
    run_once,
)
from pausemesh.core.push import PushDelivery, PushStore
from pausemesh.core.webhooks import (
    OUTCOME_UNKNOWN_EVENT,
    WEBHOOK_CHANNEL,
    WebhookRoutes,
    WebhookSubscription,
)
from pausemesh.stores.memory import InMemoryOperationLedger, InMemoryThreadStore
from pausemesh.stores.memory.push import InMemoryPushStore
from pausemesh.stores.sqlite import SqliteDatabase, SqliteOperationLedger
from pausemesh.stores.sqlite.push import SqlitePushStore
from tests.support.postgres import DATABASE_URL, migrated_database

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
DOMAIN = "travel"
KEY = "booking:traveller-secret-42"
ARGS: dict[str, Any] = {"flight": "PM202", "passport": "X1234567"}
SECRET = "whsec_" + "A" * 32


@dataclass
class Wakes:
    """What the webhook routes told the dispatcher (``WebhookRoutes.wake``)."""

    calls: list[list[str]] = field(default_factory=list)

    def __call__(self, urls: Sequence[str]) -> None:
        self.calls.append(list(urls))


def routes(wakes: Wakes | None = None) -> WebhookRoutes:
    return WebhookRoutes(
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
        ),
        wake=wakes,
    )


@dataclass
class Ledgers:
    """One process's ledger, another process's ledger on the same data, and the outbox."""

    ledger: OperationLedger
    other: OperationLedger
    outbox: PushStore


@pytest.fixture(name="stores", params=["memory", "sqlite", "postgres"])
async def stores_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Ledgers]:
    if request.param == "memory":
        memory = InMemoryOperationLedger()
        push = InMemoryPushStore(InMemoryThreadStore())
        memory.outbox = push
        # One process holds the memory store: the "other replica" is the same ledger.
        yield Ledgers(ledger=memory, other=memory, outbox=push)
        return
    if request.param == "sqlite":
        path = str(tmp_path / "ledger.db")
        first = await SqliteDatabase(path).open()
        second = await SqliteDatabase(path).open()
        try:
            yield Ledgers(
                ledger=SqliteOperationLedger(first),
                other=SqliteOperationLedger(second),
                outbox=SqlitePushStore(first),
            )
        finally:
            await second.close()
            await first.close()
        return
    from pausemesh.stores.postgres import (  # noqa: PLC0415 - asyncpg only for this case
        PostgresDatabase,
        PostgresOperationLedger,
        PostgresThreadStore,
    )
    from pausemesh.stores.postgres.push import PostgresPushStore  # noqa: PLC0415

    async with migrated_database() as database:
        second_pool = await PostgresDatabase.connect(
            DATABASE_URL, schema=database.schema, min_size=1, max_size=4
        )
        try:
            yield Ledgers(
                ledger=PostgresOperationLedger(database),
                other=PostgresOperationLedger(second_pool),
                outbox=PostgresPushStore(database, PostgresThreadStore(database)),
            )
        finally:
            await second_pool.close()


async def _queued(stores: Ledgers) -> list[PushDelivery]:
    """Every webhook delivery the outbox holds (claimed for this look)."""
    claim = await stores.outbox.claim(
        now=NOW + timedelta(hours=1),
        holder="test",
        lease_until=NOW + timedelta(hours=2),
        limit=100,
        max_attempts=10,
        per_key=100,
        channel=WEBHOOK_CHANNEL,
    )
    return list(claim.deliveries)


async def _crashed_attempt(stores: Ledgers) -> str:
    """An attempt recorded by a run that died before its outcome (the operation's id)."""
    await stores.ledger.begin(DOMAIN, KEY, tool="book", arguments=ARGS, now=NOW)
    return operation_id(DOMAIN, KEY)


async def _never_called() -> Any:
    raise AssertionError


async def test_an_unknown_outcome_run_once_meets_is_declared_with_one_webhook_however_often(
    stores: Ledgers,
) -> None:
    operation = await _crashed_attempt(stores)
    hooks = routes()
    clock = ManualClock(NOW + timedelta(minutes=1))
    for _ in range(3):
        with pytest.raises(OutcomeUnknownError):
            await run_once(
                stores.ledger,
                DOMAIN,
                KEY,
                "book",
                ARGS,
                _never_called,
                clock=clock,
                webhooks=hooks,
                declared_by="replica-a",
            )
        clock.advance(5)
    declared = await stores.ledger.unknown_of(operation)
    assert declared is not None
    assert (declared.declared_by, declared.reason) == ("replica-a", NO_OUTCOME_RECORDED)
    assert declared.declared_at == NOW + timedelta(minutes=1)  # the first declaration stays
    [delivery] = await _queued(stores)
    assert (delivery.config["subscription"], delivery.task_id) == ("ops", operation)
    body = delivery.payload
    assert body["type"] == OUTCOME_UNKNOWN_EVENT
    data = body["data"]
    assert (data["operationId"], data["source"], data["domain"]) == (operation, "ledger", DOMAIN)
    assert (data["declaredBy"], data["reason"]) == ("replica-a", NO_OUTCOME_RECORDED)
    assert data["unknownSince"] == (NOW + timedelta(minutes=1)).isoformat()
    assert data["operatorAction"]["command"].startswith(
        f"pausemesh ops resolve {operation} --domain {DOMAIN} "
    )
    assert data["operatorAction"]["inspect"] == f"pausemesh ops why {operation} --domain {DOMAIN}"
    assert data["operatorAction"]["docs"].startswith("docs/approvals.md#")
    # Neither the business key nor the arguments travel: a digest of the key only.
    assert "traveller-secret-42" not in repr(body)
    assert "X1234567" not in repr(body)
    assert len(data["businessKeySha256"]) == 64


async def test_two_replicas_declaring_at_once_write_one_declaration_and_one_event(
    stores: Ledgers,
) -> None:
    operation = await _crashed_attempt(stores)
    hooks = routes()
    await asyncio.gather(
        *(
            ledger.declare_unknown(
                operation,
                declared_by=name,
                reason=NO_OUTCOME_RECORDED,
                now=NOW,
                webhooks=hooks,
            )
            for _ in range(5)
            for ledger, name in ((stores.ledger, "replica-a"), (stores.other, "replica-b"))
        )
    )
    declared = await stores.other.unknown_of(operation)
    assert declared is not None
    assert declared.declared_by in {"replica-a", "replica-b"}
    assert [d.task_id for d in await _queued(stores)] == [operation]


async def test_a_declaration_wakes_the_dispatcher_once_with_the_subscribers_url(
    stores: Ledgers,
) -> None:
    operation = await _crashed_attempt(stores)
    wakes = Wakes()
    hooks = routes(wakes)
    for ledger in (stores.ledger, stores.other, stores.ledger):
        await ledger.declare_unknown(
            operation, declared_by="replica-a", reason=NO_OUTCOME_RECORDED, now=NOW, webhooks=hooks
        )
    # Only the write that queued the event wakes; the repeats queued nothing.
    assert wakes.calls == [["https://ops.example/hook"]]


async def test_an_action_that_raises_without_a_lookup_is_declared_at_once(
    stores: Ledgers,
) -> None:
    async def cut_off() -> Any:
        msg = "connection reset while booking"
        raise ConnectionError(msg)

    with pytest.raises(ConnectionError):
        await run_once(
            stores.ledger,
            DOMAIN,
            KEY,
            "book",
            ARGS,
            cut_off,
            clock=ManualClock(NOW),
            webhooks=routes(),
            declared_by="replica-a",
        )
    operation = operation_id(DOMAIN, KEY)
    declared = await stores.ledger.unknown_of(operation)
    assert declared is not None
    assert declared.reason == ACTION_FAILED
    [delivery] = await _queued(stores)
    assert delivery.payload["data"]["reason"] == ACTION_FAILED


async def test_an_action_that_raises_with_a_lookup_is_left_to_the_next_call(
    stores: Ledgers,
) -> None:
    async def cut_off() -> Any:
        msg = "connection reset while booking"
        raise ConnectionError(msg)

    async def lookup(_: str) -> TargetAnswer:
        return TargetNeverSaw()

    with pytest.raises(ConnectionError):
        await run_once(
            stores.ledger,
            DOMAIN,
            KEY,
            "book",
            ARGS,
            cut_off,
            clock=ManualClock(NOW),
            lookup=lookup,
            webhooks=routes(),
        )
    assert await stores.ledger.unknown_of(operation_id(DOMAIN, KEY)) is None
    assert await _queued(stores) == []


async def test_a_silent_target_is_declared_and_a_later_recovery_still_records_the_outcome(
    stores: Ledgers,
) -> None:
    operation = await _crashed_attempt(stores)
    answering = False
    booking = {"confirmation": "PMX-1"}

    async def lookup(_: str) -> TargetAnswer:
        if not answering:
            msg = "the airline did not answer"
            raise ConnectionError(msg)
        return TargetFound(result=booking)

    clock = ManualClock(NOW)
    arguments = (stores.ledger, DOMAIN, KEY, "book", ARGS, _never_called)
    with pytest.raises(OutcomeUnknownError):
        await run_once(*arguments, clock=clock, lookup=lookup, webhooks=routes())
    declared = await stores.ledger.unknown_of(operation)
    assert declared is not None
    assert declared.reason == TARGET_DID_NOT_ANSWER
    answering = True
    recovered = await run_once(*arguments, clock=clock, lookup=lookup, webhooks=routes())
    # The declaration fences nothing in the ledger: the target's answer is recorded.
    assert (recovered.decision, recovered.result) == (RECOVERED, booking)
    assert len(await _queued(stores)) == 1


async def test_a_resend_still_on_its_way_is_not_declared(stores: Ledgers) -> None:
    operation = await _crashed_attempt(stores)
    record = await stores.ledger.get(operation)
    assert record is not None
    assert await stores.ledger.claim_resend(
        operation, attempt_id=record.attempt_id, number=1, now=NOW
    )

    async def never_saw(_: str) -> TargetAnswer:
        return TargetNeverSaw()

    # Inside RESEND_SETTLE: resend 1 may still reach the target, so nobody is called yet.
    clock = ManualClock(NOW + RESEND_SETTLE / 2)
    with pytest.raises(OutcomeUnknownError):
        await run_once(
            stores.ledger,
            DOMAIN,
            KEY,
            "book",
            ARGS,
            _never_called,
            clock=clock,
            lookup=never_saw,
            webhooks=routes(),
        )
    assert await stores.ledger.unknown_of(operation) is None
    assert await _queued(stores) == []


async def test_never_saw_it_after_the_last_permitted_resend_is_declared(stores: Ledgers) -> None:
    operation = await _crashed_attempt(stores)
    record = await stores.ledger.get(operation)
    assert record is not None
    for number in range(1, MAX_RESENDS + 1):
        assert await stores.ledger.claim_resend(
            operation, attempt_id=record.attempt_id, number=number, now=NOW
        )

    async def never_saw(_: str) -> TargetAnswer:
        return TargetNeverSaw()

    with pytest.raises(OutcomeUnknownError):
        await run_once(
            stores.ledger,
            DOMAIN,
            KEY,
            "book",
            ARGS,
            _never_called,
            clock=ManualClock(NOW + 2 * RESEND_SETTLE),
            lookup=never_saw,
            webhooks=routes(),
        )
    declared = await stores.ledger.unknown_of(operation)
    assert declared is not None
    assert declared.reason == RESENDS_USED_UP
    assert len(await _queued(stores)) == 1


async def test_an_operation_with_an_outcome_is_never_declared(stores: Ledgers) -> None:
    begun = await stores.ledger.begin(DOMAIN, KEY, tool="book", arguments=ARGS, now=NOW)
    operation = begun.record.operation_id
    await stores.ledger.complete(
        operation, attempt_id=begun.record.attempt_id, result={"ok": True}, now=NOW
    )
    stored = await stores.other.declare_unknown(
        operation, declared_by="replica-b", reason=NO_OUTCOME_RECORDED, now=NOW, webhooks=routes()
    )
    assert stored.completed
    assert await stores.ledger.unknown_of(operation) is None
    assert await _queued(stores) == []


async def test_a_declaration_without_subscribers_is_written_and_queues_nothing(
    stores: Ledgers,
) -> None:
    operation = await _crashed_attempt(stores)
    await stores.ledger.declare_unknown(
        operation, declared_by="replica-a", reason=NO_OUTCOME_RECORDED, now=NOW
    )
    assert await stores.ledger.unknown_of(operation) is not None
    assert await _queued(stores) == []


async def test_declaring_an_operation_never_begun_is_refused(stores: Ledgers) -> None:
    with pytest.raises(InvalidInputError) as refused:
        await stores.ledger.declare_unknown(
            operation_id(DOMAIN, "never"),
            declared_by="replica-a",
            reason=NO_OUTCOME_RECORDED,
            now=NOW,
            webhooks=routes(),
        )
    assert refused.value.code == "OPERATION_NOT_FOUND"
    assert await _queued(stores) == []


async def test_a_declaration_the_store_refuses_still_reports_the_unknown_outcome(
    stores: Ledgers,
) -> None:
    operation = await _crashed_attempt(stores)
    with pytest.raises(OutcomeUnknownError):
        await run_once(
            stores.ledger,
            DOMAIN,
            KEY,
            "book",
            ARGS,
            _never_called,
            clock=ManualClock(NOW),
            webhooks=routes(),
            declared_by=" a name with edge spaces ",  # refused: INVALID_ID
        )
    # Nothing is written; the next caller that meets it declares it.
    assert await stores.ledger.unknown_of(operation) is None
    assert await _queued(stores) == []
