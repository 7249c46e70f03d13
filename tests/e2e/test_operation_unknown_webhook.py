"""A demo booking whose outcome nobody can know sends one signed ``operation.outcome_unknown``.

A real ``pausemesh demo`` process on a SQLite file or a PostgreSQL schema, its airline a SQLite
file of its own, and a local HTTP receiver for ``PAUSEMESH_WEBHOOKS_FILE`` that checks each
delivery with the ``standardwebhooks`` package's verifier. The booking's attempt is staged in the ledger as a
cut run leaves it (attempt recorded, no outcome), every permitted resend claimed long ago and
none reaching the airline (as in ``test_demo_unknown_outcome``): when the traveller's answer
arrives, ``run_once`` can neither recover nor resend it and declares it unknown.

The outbox's poll is an hour: every delivery here arrives because the write that queued it
woke this process's dispatcher, never because a poll came round. The first test subscribes to
``operation.outcome_unknown`` alone, so nothing but the declaration's own write can wake it
(a pause event's would send everything due); the second takes the pause events.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import secrets
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from standardwebhooks.webhooks import Webhook

from pausemesh.core.operations import (
    MAX_RESENDS,
    RESEND_SETTLE,
    RESENDS_USED_UP,
    OperationLedger,
    operation_id,
)
from pausemesh.core.webhooks import WebhookRoutes, parse_webhooks
from pausemesh.demo.flights import BOOKING_DOMAIN
from pausemesh.demo.reservations import Airline
from pausemesh.stores.postgres import PostgresDatabase, PostgresOperationLedger
from pausemesh.stores.postgres.migrate import migrate
from pausemesh.stores.sqlite import open_sqlite_operation_ledger
from tests.e2e.agui_helpers import ask, new_thread, resolved, resume_body, snapshot
from tests.support.agui import post_run
from tests.support.postgres import DATABASE_URL, drop_schema, fresh_schema, require_postgres
from tests.support.push_receiver import Delivery, Receiver
from tests.support.server import REPO_ROOT, ServerProcess

pytestmark = pytest.mark.slow

SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
UNKNOWN = "operation.outcome_unknown"


def _kind(delivery: Delivery) -> str:
    kind: str = json.loads(delivery.body)["type"]
    return kind


class Store:
    """Where the demo keeps its ledger and outbox, and how the test reaches it from outside
    (as another process on the same data would)."""

    def __init__(self, tmp_path: Path, schema: str | None) -> None:
        self.path = tmp_path / "demo.db"
        self.schema = schema
        self.key = secrets.token_urlsafe(48)

    def env(self) -> dict[str, str]:
        # Replicas on PostgreSQL must share one server key; the demo asks for it there.
        return {} if self.schema is None else {"PAUSEMESH_SECRET_KEY": self.key}

    def flags(self) -> list[str]:
        if self.schema is None:
            return ["--database-path", str(self.path)]
        return ["--database-url", DATABASE_URL, "--database-schema", self.schema]

    async def ledger(self) -> OperationLedger:
        if self.schema is None:
            return await open_sqlite_operation_ledger(str(self.path))
        database = await PostgresDatabase.connect(
            DATABASE_URL, schema=self.schema, min_size=1, max_size=2
        )
        return PostgresOperationLedger(database, owns_database=True)

    async def queued_unknowns(self) -> int:
        """``operation.outcome_unknown`` rows in the outbox (delivered or not)."""
        query = "SELECT payload_json FROM {}a2a_push_deliveries WHERE channel = 'webhook'"
        rows: list[Any]
        if self.schema is None:
            with closing(sqlite3.connect(self.path)) as lite:
                rows = lite.execute(query.format("")).fetchall()
        else:
            pg = await asyncpg.connect(DATABASE_URL)
            try:
                rows = list(await pg.fetch(query.format(f'"{self.schema}".')))
            finally:
                await pg.close()
        return sum(1 for (payload,) in rows if json.loads(payload)["type"] == UNKNOWN)


async def _cut_booking(store: Store, business_key: str) -> str:
    """The attempt a cut run left, and every permitted resend claimed and lost long ago (as a
    replica killed each time before the airline saw it would leave them)."""
    ledger = await store.ledger()
    try:
        long_ago = datetime.now(UTC) - 2 * RESEND_SETTLE
        begun = await ledger.begin(
            BOOKING_DOMAIN,
            business_key,
            tool="book_flight",
            arguments={"destination": "Lisbon", "flight": "PM202"},
            now=long_ago,
        )
        for number in range(1, MAX_RESENDS + 1):
            assert await ledger.claim_resend(
                begun.record.operation_id,
                attempt_id=begun.record.attempt_id,
                number=number,
                now=long_ago,
            )
        return begun.record.operation_id
    finally:
        await ledger.close()


async def _declare_elsewhere(store: Store, hooks: Path, operation: str) -> None:
    routes = WebhookRoutes(parse_webhooks(hooks.read_bytes()))
    ledger = await store.ledger()
    try:
        await ledger.declare_unknown(
            operation,
            declared_by="another-replica",
            reason="NO_OUTCOME_RECORDED",
            now=datetime.now(UTC),
            webhooks=routes,
        )
    finally:
        await ledger.close()


def _ops_status(store: Store, operation: str) -> dict[str, Any]:
    command = [sys.executable, "-m", "pausemesh", "ops", "status", operation]
    command += ["--domain", BOOKING_DOMAIN, *store.flags()]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
        check=False,
        env={**os.environ, **store.env()},
    )
    assert done.returncode == 0, done.stderr
    status: dict[str, Any] = json.loads(done.stdout)
    return status


@pytest.fixture(
    name="store", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def store_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        yield Store(tmp_path, None)
        return
    asyncio.run(require_postgres())
    schema = fresh_schema("pm_unknown")
    asyncio.run(migrate(DATABASE_URL, schema=schema))
    try:
        yield Store(tmp_path, schema)
    finally:
        asyncio.run(drop_schema(schema))


def _server(
    tmp_path: Path, receiver: Receiver, events: list[str], store: Store | None = None
) -> ServerProcess:
    hooks = tmp_path / "webhooks.json"
    hook = {"id": "ops", "url": receiver.url, "events": events, "secrets": [SECRET]}
    hooks.write_text(json.dumps({"webhooks": [hook]}))
    env = {
        "PAUSEMESH_WEBHOOKS_FILE": str(hooks),
        "PAUSEMESH_A2A_PUSH_ALLOW": "loopback",
        # An hour: only a wake-up on the write that queued a delivery sends it in this test.
        "PAUSEMESH_A2A_PUSH_POLL_SECONDS": "3600",
        "PAUSEMESH_DEMO_AIRLINE_PATH": str(tmp_path / "airline.db"),
        "PAUSEMESH_LOG_LEVEL": "warning",
    }
    store = store or Store(tmp_path, None)
    return ServerProcess(["demo", "--no-browser", *store.flags()], env={**env, **store.env()})


def test_a_cut_booking_nobody_can_settle_sends_one_signed_outcome_unknown_without_a_poll(
    tmp_path: Path, store: Store
) -> None:
    desk = Airline(tmp_path / "airline.db")
    with (
        Receiver() as receiver,
        _server(tmp_path, receiver, [UNKNOWN], store) as server,
        httpx.Client(base_url=server.base_url, timeout=60) as client,
    ):
        thread = new_thread()
        [question] = ask(client, thread).interrupts
        business_key = f"{thread}:{question['id']}"
        operation = asyncio.run(_cut_booking(store, business_key))
        assert operation == operation_id(BOOKING_DOMAIN, business_key)

        answer = post_run(client, resume_body(thread, [resolved(question["id"], "PM202")]))

        [delivery] = receiver.wait_for(1)
        # The thread waits for the airline or an operator, as before.
        assert "Checking with the airline about flight PM202" in answer.text()
        [waiting] = snapshot(client, thread)["pendingInterrupts"]
        assert waiting["reason"] == "operation_unknown"
        # Asked again (a browser retrying its answer) and declared by another process on the
        # same file (a replica that met it too): the first declaration stays, nothing is queued.
        post_run(client, resume_body(thread, [resolved(question["id"], "PM202")]))
        asyncio.run(_declare_elsewhere(store, tmp_path / "webhooks.json", operation))
        status = _ops_status(store, operation)

    body: dict[str, Any] = Webhook(SECRET).verify(delivery.body, delivery.headers)
    assert body["type"] == UNKNOWN
    data = body["data"]
    assert (data["operationId"], data["source"]) == (operation, "ledger")
    assert (data["domain"], data["tool"], data["reason"]) == (
        BOOKING_DOMAIN,
        "book_flight",
        RESENDS_USED_UP,
    )
    assert data["operatorAction"]["command"].startswith(
        f"pausemesh ops resolve {operation} --domain {BOOKING_DOMAIN} "
    )
    # Never the arguments or the business key (the thread and question ids): a digest only.
    text = delivery.body.decode()
    assert "PM202" not in text
    assert thread not in text
    # One event in the outbox (its retries would carry its one webhook-id), one delivery.
    assert asyncio.run(store.queued_unknowns()) == 1
    assert [d.headers["webhook-id"] for d in receiver.requests] == [delivery.headers["webhook-id"]]
    assert status["status"] == "OUTCOME_UNKNOWN"
    assert status["declaredUnknown"]["reason"] == RESENDS_USED_UP
    assert desk.bookings() == {}  # nothing was sent to the airline


def test_pause_events_are_delivered_without_waiting_for_the_poll(tmp_path: Path) -> None:
    with (
        Receiver() as receiver,
        _server(tmp_path, receiver, ["pause.created", "pause.decided"]) as server,
        httpx.Client(base_url=server.base_url, timeout=60) as client,
    ):
        thread = new_thread()
        [question] = ask(client, thread).interrupts
        [created] = receiver.wait_for(1)
        post_run(client, resume_body(thread, [resolved(question["id"], "PM202")]))
        decided = receiver.wait_for(2)[1]
    assert [_kind(created), _kind(decided)] == ["pause.created", "pause.decided"]
    for delivery in (created, decided):
        verified: dict[str, Any] = Webhook(SECRET).verify(delivery.body, delivery.headers)
        assert verified["data"]["pauseId"] == question["id"]
