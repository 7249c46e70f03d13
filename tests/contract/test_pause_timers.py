"""A pause's reminder and escalation over every store kind: each fires once, whoever sweeps.

Two services ("replicas") on one store (PostgreSQL: two pools on one schema) sweep at the same
instants of a ``ManualClock``. Each timer appears once in the pause's history and queues its
webhook once; the escalated approver then finds the pause in their inbox and decides it.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pausemesh.core.approvers import Approver, encode_approver
from pausemesh.core.clock import ManualClock
from pausemesh.core.ports import EventStore
from pausemesh.core.push import PushStore
from pausemesh.core.resume import NamedApprover, Resume
from pausemesh.core.service import ContinuationService
from pausemesh.core.timers import timer_fields, timers_view
from pausemesh.core.tokens import KeyedTokenIssuer
from pausemesh.core.webhooks import WEBHOOK_CHANNEL, WebhookRoutes, WebhookSubscription
from pausemesh.stores.memory import InMemoryEventStore, InMemoryThreadStore
from pausemesh.stores.memory.push import InMemoryPushStore
from pausemesh.stores.postgres.database import PostgresDatabase
from pausemesh.stores.postgres.events import PostgresEventStore
from pausemesh.stores.postgres.push import PostgresPushStore
from pausemesh.stores.postgres.threads import PostgresThreadStore
from pausemesh.stores.sqlite import SqliteDatabase
from pausemesh.stores.sqlite.events import SqliteEventStore
from pausemesh.stores.sqlite.push import SqlitePushStore
from tests.support.postgres import DATABASE_URL, migrated_database

T0 = datetime(2026, 3, 1, 9, tzinfo=UTC)
KEY = KeyedTokenIssuer({"k": secrets.token_bytes(32)}, "k")
HOOK = WebhookSubscription(
    id="ops",
    url="http://127.0.0.1:9/hook",
    events=frozenset({"pause.reminder", "pause.escalated"}),
    secrets=("whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",),
)

Stores = tuple[EventStore, EventStore, PushStore]


@pytest.fixture(name="stores", params=["memory", "sqlite", "postgres"])
async def stores_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    if request.param == "memory":
        events = InMemoryEventStore()
        push = InMemoryPushStore(InMemoryThreadStore())
        events.outbox = push
        yield events, events, push
    elif request.param == "sqlite":
        database = await SqliteDatabase(tmp_path / "timers.db").open()
        try:
            store = SqliteEventStore(database, owns_database=False)
            yield store, store, SqlitePushStore(database)
        finally:
            await database.close()
    else:
        async with migrated_database() as first:
            second = await PostgresDatabase.connect(
                DATABASE_URL, schema=first.schema, min_size=1, max_size=4
            )
            try:
                threads = PostgresThreadStore(first, owns_database=False)
                yield (
                    PostgresEventStore(first),
                    PostgresEventStore(second),
                    PostgresPushStore(first, threads),
                )
            finally:
                await second.close()


async def test_a_reminder_and_an_escalation_fire_once_each_across_two_sweepers(
    stores: Stores,
) -> None:
    clock = ManualClock(T0)
    replicas = [
        ContinuationService(
            store=store, clock=clock, keyed_issuer=KEY, webhooks=WebhookRoutes([HOOK])
        )
        for store in stores[:2]
    ]
    timers = timer_fields(
        T0 + timedelta(minutes=10), T0 + timedelta(minutes=20), [Approver.principal("carol")]
    )
    created = await replicas[0].create(
        payload={"kind": "input", "message": "Approve?"},
        owner="alice",
        approvers=[Approver.role("manager")],
        metadata={"inbox": timers},
        expires_at=T0 + timedelta(hours=1),
        keyed=True,
    )
    pause_id = created.continuation.continuation_id
    carol = await replicas[0].pending_approvals(principal="carol")
    assert carol == []  # not hers yet

    async def sweep_both() -> None:
        await asyncio.gather(*(replica.expire_due() for replica in replicas))

    await sweep_both()  # nothing due yet
    clock.advance(10 * 60)
    await sweep_both()
    await sweep_both()
    clock.advance(10 * 60)
    await sweep_both()
    await sweep_both()

    history = [e.type for e in await replicas[1].history(pause_id, principal="alice")]
    assert history == [
        "continuation.created",
        "continuation.reminded",
        "continuation.escalated",
    ]
    state = await replicas[1].get(pause_id, principal="alice")
    assert state.approvers == ("role:manager", "carol")
    view = timers_view(state)
    assert view["reminder"]["firedAt"] == (T0 + timedelta(minutes=10)).isoformat()
    assert view["escalation"]["to"] == ["carol"]
    claim = await stores[2].claim(
        now=clock.now(),
        holder="t",
        lease_until=clock.now() + timedelta(minutes=1),
        limit=20,
        max_attempts=5,
        per_key=20,
        channel=WEBHOOK_CHANNEL,
    )
    kinds = sorted(d.payload["type"] for d in claim.deliveries)
    assert kinds == ["pause.escalated", "pause.reminder"]

    # The escalated approver finds it and decides it.
    [listed] = await replicas[1].pending_approvals(principal="carol")
    assert listed.continuation_id == pause_id
    outcome = await replicas[1].resume(
        Resume(
            continuation_id=pause_id,
            idempotency_key="k",
            payload={"ok": True},
            by=NamedApprover("carol"),
        )
    )
    assert outcome.continuation.resolved_by == "carol"
    assert encode_approver(Approver.principal("carol")) == {"kind": "principal", "name": "carol"}


async def test_a_pause_whose_timer_is_due_stays_in_the_inbox_until_the_timer_fires(
    stores: Stores,
) -> None:
    clock = ManualClock(T0)
    service = ContinuationService(store=stores[0], clock=clock, keyed_issuer=KEY)
    timers = timer_fields(
        T0 + timedelta(minutes=10), T0 + timedelta(minutes=20), [Approver.principal("carol")]
    )
    created = await service.create(
        payload={"kind": "input", "message": "Approve?"},
        owner="alice",
        approvers=[Approver.role("manager")],
        metadata={"inbox": timers},
        expires_at=T0 + timedelta(minutes=30),
        keyed=True,
    )
    pause_id = created.continuation.continuation_id

    async def inbox() -> list[str]:
        listed = await service.pending_approvals(principal="bob", roles=frozenset({"manager"}))
        return [c.continuation_id for c in listed]

    # The reminder is due and no sweeper has fired it: still listed, not yet reminded.
    clock.advance(10 * 60)
    assert await inbox() == [pause_id]
    [state] = await service.pending_approvals(principal="bob", roles=frozenset({"manager"}))
    assert not isinstance(state.reminded_at, datetime)
    await service.expire_due()
    [state] = await service.pending_approvals(principal="bob", roles=frozenset({"manager"}))
    assert isinstance(state.reminded_at, datetime)

    # The escalation is due: listed for the first approvers; carol's turn comes when it fires.
    clock.advance(10 * 60)
    assert await inbox() == [pause_id]
    assert await service.pending_approvals(principal="carol") == []
    await service.expire_due()
    assert await inbox() == [pause_id]
    assert [c.continuation_id for c in await service.pending_approvals(principal="carol")] == [
        pause_id
    ]

    # The deadline has passed and no sweeper has come: the inbox's read expires it.
    clock.advance(10 * 60)
    assert await inbox() == []
    history = [e.type for e in await service.history(pause_id, principal="alice")]
    assert history[-1] == "continuation.expired"


async def test_an_inbox_page_reads_past_pauses_whose_deadline_has_passed(stores: Stores) -> None:
    clock = ManualClock(T0)
    service = ContinuationService(store=stores[0], clock=clock, keyed_issuer=KEY)

    async def ask(minutes: int) -> str:
        created = await service.create(
            payload={"kind": "input", "message": "Approve?"},
            owner="alice",
            approvers=[Approver.role("manager")],
            expires_at=T0 + timedelta(minutes=minutes),
            keyed=True,
        )
        return created.continuation.continuation_id

    live = await ask(60)
    for _ in range(3):
        await ask(5)  # newer, and past their deadline once the clock moves
    clock.advance(10 * 60)

    page = await service.pending_approvals(principal="bob", roles=frozenset({"manager"}), limit=1)
    assert [c.continuation_id for c in page] == [live]
