"""Event webhooks over every store kind: queued with the change, signed, at least once, unjammed.

Real parts: each store kind (memory, a SQLite file, a PostgreSQL schema) with its event store
and the outbox on one database as the app wires them, the service, httpx, webhook receivers
serving HTTP on loopback, and a loopback port nobody listens on. Signatures are checked with
the ``standardwebhooks`` package's own verifier, as a receiver would. The clock is a
``ManualClock``: rounds are run one by one, never timed.
"""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from pausemesh.core.approvers import Approver
from pausemesh.core.clock import ManualClock
from pausemesh.core.ports import EventStore
from pausemesh.core.push import PushStore, timed_delivery_id
from pausemesh.core.resume import NamedApprover, Resume
from pausemesh.core.service import ContinuationService
from pausemesh.core.tokens import KeyedTokenIssuer
from pausemesh.core.webhooks import WebhookRoutes, WebhookSubscription, parse_webhooks
from pausemesh.outbox.dispatcher import OutboxDispatcher, OutboxOptions
from pausemesh.outbox.url_policy import PushUrlPolicy
from pausemesh.outbox.webhook_sender import webhook_dispatcher
from pausemesh.stores.memory import InMemoryEventStore, InMemoryThreadStore
from pausemesh.stores.memory.push import InMemoryPushStore
from pausemesh.stores.postgres.events import PostgresEventStore
from pausemesh.stores.postgres.push import PostgresPushStore
from pausemesh.stores.postgres.threads import PostgresThreadStore
from pausemesh.stores.sqlite import SqliteDatabase
from pausemesh.stores.sqlite.events import SqliteEventStore
from pausemesh.stores.sqlite.push import SqlitePushStore
from tests.support.postgres import migrated_database
from tests.support.push_receiver import HOLD, Delivery, Receiver
from tests.support.server import free_port

# Now, not a fixed date: the verifier checks the signed timestamp against the real clock.
T0 = datetime.now(UTC).replace(microsecond=0)
# An attempt's bound well past anything a loaded machine takes: only the hanging receiver
# reaches it, and the test releases that one itself.
OPTIONS = OutboxOptions(
    max_attempts=5,
    backoff_seconds=10.0,
    backoff_max_seconds=60.0,
    lease_seconds=60.0,
    timeout_seconds=45.0,
)
SCHEMA = {"type": "object", "properties": {"decision": {"enum": ["approve", "deny"]}}}


def new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


@pytest.fixture(name="stores", params=["memory", "sqlite", "postgres"])
async def stores_fixture(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[EventStore, PushStore]]:
    if request.param == "memory":
        events = InMemoryEventStore()
        push = InMemoryPushStore(InMemoryThreadStore())
        events.outbox = push
        yield events, push
    elif request.param == "sqlite":
        database = await SqliteDatabase(tmp_path / "webhooks.db").open()
        try:
            yield SqliteEventStore(database, owns_database=False), SqlitePushStore(database)
        finally:
            await database.close()
    else:
        async with migrated_database() as shared:
            threads = PostgresThreadStore(shared, owns_database=False)
            yield PostgresEventStore(shared), PostgresPushStore(shared, threads)


class Hooks:
    def __init__(self, stores: tuple[EventStore, PushStore], subs: list[WebhookSubscription]):
        self.clock = ManualClock(T0)
        self.routes = WebhookRoutes(subs)
        self.service = ContinuationService(
            store=stores[0],
            clock=self.clock,
            webhooks=self.routes,
            keyed_issuer=KeyedTokenIssuer({"k1": secrets.token_bytes(32)}, "k1"),
        )
        push = stores[1]
        self.dispatcher: OutboxDispatcher = webhook_dispatcher(
            lambda: push,
            self.routes,
            PushUrlPolicy("loopback"),
            events=stores[0],
            holder="replica-a",
            options=OPTIONS,
            clock=self.clock,
        )

    async def round(self) -> int:
        async with httpx.AsyncClient(timeout=5) as client:
            return await self.dispatcher.deliver_due(client)

    async def ask(self, **fields: Any) -> str:
        created = await self.service.create(
            payload={
                "kind": "input",
                "message": "Approve the PM404 booking?",
                "responseSchema": SCHEMA,
            },
            owner="alice",
            approvers=[Approver.role("manager")],
            metadata={"inbox": {"threadTitle": "Trip to Lisbon", "tags": ["travel"]}},
            expires_at=T0 + timedelta(hours=1),
            keyed=True,
            **fields,
        )
        return created.continuation.continuation_id

    async def approve(self, pause_id: str) -> None:
        """The manager "boss" approves the pause."""
        await self.service.resume(
            Resume(
                continuation_id=pause_id,
                idempotency_key="k1",
                payload={"decision": "approve"},
                by=NamedApprover("boss", frozenset({"manager"})),
            )
        )


def subscription(url: str, *secret: str, **fields: Any) -> WebhookSubscription:
    return WebhookSubscription(
        id=fields.pop("id", "ops"),
        url=url,
        events=frozenset(fields.pop("events", ["pause.created", "pause.decided"])),
        secrets=secret or (new_secret(),),
        **fields,
    )


def verified(delivery: Delivery, secret: str) -> dict[str, Any]:
    body: dict[str, Any] = Webhook(secret).verify(delivery.body, delivery.headers)
    return body


async def test_a_pause_queues_a_signed_created_then_a_decided_webhook(
    stores: tuple[EventStore, PushStore],
) -> None:
    secret = new_secret()
    with Receiver() as receiver:
        hooks = Hooks(stores, [subscription(receiver.url, secret)])
        pause_id = await hooks.ask()
        # Queued by the create's own write: the round finds it without anything else.
        assert await hooks.round() == 1
        [created] = receiver.wait_for(1)
        body = verified(created, secret)
        assert body["type"] == "pause.created"
        data = body["data"]
        assert data["pauseId"] == pause_id
        assert data["message"] == "Approve the PM404 booking?"
        assert data["responseSchema"] == SCHEMA
        assert data["askedBy"] == "alice"
        assert data["approvers"] == ["role:manager"]
        assert data["threadTitle"] == "Trip to Lisbon"
        assert data["deadline"] == (T0 + timedelta(hours=1)).isoformat()
        assert "token" not in created.body.decode().lower()

        await hooks.approve(pause_id)
        assert await hooks.round() == 1
        decided = receiver.wait_for(2)[1]
        body = verified(decided, secret)
        assert body["type"] == "pause.decided"
        assert body["data"]["decision"]["resolvedBy"] == "boss"
        assert body["data"]["decision"]["answer"] == {"decision": "approve"}
        assert decided.headers["webhook-id"] != created.headers["webhook-id"]
        # Nothing more is owed: each event was delivered once.
        assert await hooks.round() == 0


async def test_a_created_webhook_sent_after_the_decision_shows_the_pause_as_it_was_created(
    stores: tuple[EventStore, PushStore],
) -> None:
    # The body is rendered when sent, from the stream up to its event (core/webhooks.py).
    secret = new_secret()
    with Receiver() as receiver:
        hooks = Hooks(stores, [subscription(receiver.url, secret)])
        pause_id = await hooks.ask()
        hooks.clock.advance(5)
        await hooks.approve(pause_id)
        assert await hooks.round() == 2
        bodies = {}
        for delivery in receiver.wait_for(2):
            body = verified(delivery, secret)
            bodies[body["type"]] = body
        created, decided = bodies["pause.created"], bodies["pause.decided"]
        assert created["timestamp"] == T0.isoformat()
        assert created["data"]["status"] == "pending"
        assert "decision" not in created["data"]
        assert created["data"]["message"] == "Approve the PM404 booking?"
        assert decided["timestamp"] == (T0 + timedelta(seconds=5)).isoformat()
        assert decided["data"]["status"] == "resumed"
        assert decided["data"]["decision"]["answer"] == {"decision": "approve"}


async def test_a_receiver_answering_500_then_200_gets_the_event_twice_with_one_id(
    stores: tuple[EventStore, PushStore],
) -> None:
    secret = new_secret()
    with Receiver() as receiver:
        receiver.plan = [500]
        hooks = Hooks(stores, [subscription(receiver.url, secret)])
        await hooks.ask()
        await hooks.round()
        receiver.wait_for(1)
        assert await hooks.round() == 0  # backing off: not due yet
        hooks.clock.advance(11)
        assert await hooks.round() == 1
        first, second = receiver.wait_for(2)
        assert first.answered == 500
        assert second.answered == 200
        assert first.headers["webhook-id"] == second.headers["webhook-id"]
        assert verified(second, secret) == verified(first, secret)
        hooks.clock.advance(120)
        assert await hooks.round() == 0


async def test_a_hanging_or_refused_destination_never_delays_another(
    stores: tuple[EventStore, PushStore],
) -> None:
    refused = f"http://127.0.0.1:{free_port()}/hook"
    with Receiver() as hanging, Receiver() as good:
        hanging.plan = [HOLD]
        hooks = Hooks(
            stores,
            [
                subscription(refused, id="refused"),
                subscription(hanging.url, id="hanging"),
                subscription("http://[::1/bad", id="malformed"),
                subscription(good.url, id="good"),
            ],
        )
        await hooks.ask()
        delivering = asyncio.create_task(hooks.round())
        try:
            # The good receiver has it while the hanging one still holds its request.
            await asyncio.to_thread(good.wait_for, 1)
            await asyncio.to_thread(hanging.wait_for, 1)  # off the loop: the round sends it
            assert not delivering.done()
        finally:
            hanging.release()
            await delivering


async def test_rotated_secrets_sign_with_both_so_either_verifies(
    stores: tuple[EventStore, PushStore],
) -> None:
    new, old = new_secret(), new_secret()
    with Receiver() as receiver:
        hooks = Hooks(stores, [subscription(receiver.url, new, old)])
        await hooks.ask()
        await hooks.round()
        [delivery] = receiver.wait_for(1)
        assert verified(delivery, new) == verified(delivery, old)
        with pytest.raises(WebhookVerificationError):
            verified(delivery, new_secret())


async def test_filters_choose_the_pauses_a_subscription_is_told_of(
    stores: tuple[EventStore, PushStore],
) -> None:
    with Receiver() as receiver:
        hooks = Hooks(
            stores,
            [
                subscription(receiver.url, id="finance", roles=frozenset({"finance"})),
                subscription(receiver.url, id="travel", tags=frozenset({"travel"})),
                subscription(receiver.url, id="hr", tags=frozenset({"hr"})),
                subscription(receiver.url, id="expiry", events=["pause.expired"]),
            ],
        )
        await hooks.ask()
        await hooks.round()
        [delivery] = receiver.wait_for(1)
        assert json.loads(delivery.body)["type"] == "pause.created"
        assert await hooks.round() == 0
        assert len(receiver.requests) == 1


def test_the_webhooks_file_is_checked_whole() -> None:
    good = {
        "id": "a",
        "url": "https://hooks.example/x",
        "events": ["pause.created"],
        "secrets": [new_secret()],
    }
    [parsed] = parse_webhooks(json.dumps({"webhooks": [good]}).encode())
    assert parsed.events == frozenset({"pause.created"})
    bad_cases = [
        {**good, "url": "ftp://hooks.example/x"},
        {**good, "url": "https://user@hooks.example/x"},
        {**good, "url": "https://hooks.example/x y"},
        {**good, "events": ["pause.made"]},
        {**good, "secrets": ["plain"]},
        {**good, "secrets": []},
        {**good, "colour": "red"},
    ]
    for bad in bad_cases:
        with pytest.raises(ValueError, match=r"webhook|valid"):
            parse_webhooks(json.dumps({"webhooks": [bad]}).encode())
    with pytest.raises(ValueError, match="own id"):
        parse_webhooks(json.dumps({"webhooks": [good, good]}).encode())


async def test_while_every_destination_rests_a_round_does_not_touch_the_store(
    stores: tuple[EventStore, PushStore],
) -> None:
    refused = f"http://127.0.0.1:{free_port()}/hook"
    hooks = Hooks(stores, [subscription(refused, id="down")])
    for _ in range(8):
        await hooks.ask()
    used = 0

    def store() -> PushStore:
        nonlocal used
        used += 1
        return stores[1]

    dispatcher = webhook_dispatcher(
        store,
        hooks.routes,
        PushUrlPolicy("loopback"),
        events=stores[0],
        holder="replica-a",
        options=OPTIONS,
        clock=hooks.clock,
    )
    async with httpx.AsyncClient(timeout=5) as client:
        assert await dispatcher.deliver_due(client) == 5  # tried, refused: the URL rests
        before = used
        assert await dispatcher.deliver_due(client) == 0
        assert used == before  # a backlog to a resting destination costs no query
        hooks.clock.advance(61)  # past the longest rest
        assert await dispatcher.deliver_due(client) == 5  # its rest over, it is tried again
        assert used > before


async def test_webhook_ids_are_stable_and_sort_by_the_time_of_their_change(
    stores: tuple[EventStore, PushStore],
) -> None:
    # Time first, so the outbox's index on the id grows at its end (see timed_delivery_id).
    with Receiver() as receiver:
        hooks = Hooks(stores, [subscription(receiver.url, id="ops")])
        first = await hooks.ask()
        hooks.clock.advance(1)
        second = await hooks.ask()
        assert await hooks.round() == 2
        ids = sorted(delivery.headers["webhook-id"] for delivery in receiver.wait_for(2))
        later = T0 + timedelta(seconds=1)
        assert ids == [
            timed_delivery_id(f"{first}:1", "ops", T0),
            timed_delivery_id(f"{second}:1", "ops", later),
        ]


async def test_a_destination_that_is_down_rests_while_the_others_are_served(
    stores: tuple[EventStore, PushStore],
) -> None:
    refused = f"http://127.0.0.1:{free_port()}/hook"
    with Receiver() as good:
        hooks = Hooks(stores, [subscription(refused, id="down"), subscription(good.url, id="up")])
        pauses = [await hooks.ask() for _ in range(12)]
        await hooks.round()  # five of each destination (a quarter of a round per URL)
        await hooks.round()
        await hooks.round()
        good.wait_for(12)
        states = [
            await stores[1].delivery_state(timed_delivery_id(f"{pause}:1", "down", T0))
            for pause in pauses
        ]
        # The down destination was tried once per delivery of its first round, then rested:
        # its other deliveries stay due, unattempted, while the good one got all twelve.
        assert sorted(s.attempts for s in states if s is not None) == [0] * 7 + [1] * 5
        assert all(s is not None and s.status == "pending" for s in states)
        hooks.clock.advance(61)  # past the longest rest
        await hooks.round()
        states = [
            await stores[1].delivery_state(timed_delivery_id(f"{pause}:1", "down", T0))
            for pause in pauses
        ]
        assert sum(s.attempts for s in states if s is not None) > 5


async def test_a_pause_delivery_queued_with_its_whole_body_is_sent_as_stored(
    tmp_path: Path,
) -> None:
    # Pause deliveries queued before bodies were rendered when sent hold their body whole.
    database = await SqliteDatabase(tmp_path / "old.db").open()
    body = {"type": "pause.created", "timestamp": T0.isoformat(), "data": {"pauseId": "p-old"}}
    secret = new_secret()
    try:
        with Receiver() as receiver:
            config = {"url": receiver.url, "subscription": "ops"}

            def seed(conn: Any) -> None:
                conn.execute(
                    "INSERT INTO a2a_push_deliveries (delivery_id, task_id, channel, config_json,"
                    " payload_json, created_at_us, next_attempt_at_us)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    ("d-old", "p-old", "webhook", json.dumps(config), json.dumps(body), 1, 1),
                )

            await database.write(seed)
            stores = (SqliteEventStore(database, owns_database=False), SqlitePushStore(database))
            hooks = Hooks(stores, [subscription(receiver.url, secret, id="ops")])
            assert await hooks.round() == 1
            [delivery] = receiver.wait_for(1)
            assert delivery.headers["webhook-id"] == "d-old"
            assert verified(delivery, secret) == body
            state = await stores[1].delivery_state("d-old")
            assert state is not None
            assert state.status == "delivered"
    finally:
        await database.close()
