"""Decisions from elsewhere continue the thread, against real ``pausemesh demo`` processes on
SQLite and on PostgreSQL.

A question decided out of band (REST resume with the token, or a manager in the approvals
inbox) makes the server run the agent itself, as the thread's owner, into the thread log: an
open tail sees that run live, a reload shows it, and an AG-UI resume that arrives afterwards
gets the stored outcome (no second run, no second booking).
"""

from __future__ import annotations

import asyncio
import hashlib
import queue
import secrets
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import msgspec
import pytest

from pausemesh.core.operations import operation_id
from pausemesh.core.tokens import KeyedTokenIssuer
from pausemesh.demo.flights import BOOKING_DOMAIN
from pausemesh.demo.reservations import Airline
from pausemesh.stores.postgres.migrate import migrate
from tests.e2e.agui_helpers import ask, new_thread, pending_ids, resolved, resume_body, snapshot
from tests.support.agui import Frame, post_run, read_frames
from tests.support.postgres import DATABASE_URL, drop_schema, fresh_schema, require_postgres
from tests.support.rest import assert_problem
from tests.support.server import ServerProcess

COOKIE = "pausemesh_demo_user"
CONTINUED = "pausemesh-continue-"


@dataclass
class Demo:
    """A demo server, its key (to derive a question's token like an e-mail link would hold
    it) and where its continuations and airline bookings live."""

    server: ServerProcess
    secret: str
    airline: Path
    database: Path | None = None
    schema: str | None = None

    def created_event(self, continuation_id: str) -> dict[str, Any]:
        if self.database is not None:
            with sqlite3.connect(self.database) as conn:
                row = conn.execute(
                    "SELECT event_json FROM continuation_events"
                    " WHERE continuation_id = ? AND version = 1",
                    (continuation_id,),
                ).fetchone()
            text = row[0]
        else:

            async def read() -> str:
                conn = await asyncpg.connect(DATABASE_URL)
                try:
                    value: str = await conn.fetchval(
                        f'SELECT event_json FROM "{self.schema}".continuation_events'  # noqa: S608 - test schema
                        " WHERE continuation_id = $1 AND version = 1",
                        continuation_id,
                    )
                    return value
                finally:
                    await conn.close()

            text = asyncio.run(read())
        event: dict[str, Any] = msgspec.json.decode(text)
        return event

    def token(self, continuation_id: str) -> str:
        """The question's resume token, derived from the server key (as its issuer does)."""
        created = self.created_event(continuation_id)
        material = self.secret.encode()
        key_id = "k" + hashlib.sha256(material).hexdigest()[:12]
        assert created["tokenKeyId"] == key_id
        issuer = KeyedTokenIssuer({key_id: material}, key_id)
        return issuer.derive(continuation_id, key_id, created["tokenNonce"])

    def bookings_of(self, thread_id: str, interrupt_id: str) -> list[dict[str, Any]]:
        key = operation_id(BOOKING_DOMAIN, f"{thread_id}:{interrupt_id}")
        found = Airline(self.airline).bookings().get(key)
        return [] if found is None else [found]


def _env(secret: str, airline: Path, **extra: str) -> dict[str, str]:
    return {
        "PAUSEMESH_SECRET_KEY": secret,
        "PAUSEMESH_SWEEP_INTERVAL_SECONDS": "0.2",
        "PAUSEMESH_DEMO_AIRLINE_PATH": str(airline),
        "PAUSEMESH_LOG_LEVEL": "warning",
        **extra,
    }


@pytest.fixture(name="demo", scope="module", params=["sqlite", "postgres"])
def demo_fixture(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Demo]:
    secret = secrets.token_urlsafe(48)
    folder = tmp_path_factory.mktemp("elsewhere")
    airline = folder / "airline.db"
    if request.param == "sqlite":
        database = folder / "demo.db"
        args = ["demo", "--no-browser", "--database-path", str(database)]
        with ServerProcess(args, env=_env(secret, airline)) as server:
            yield Demo(server=server, secret=secret, airline=airline, database=database)
        return
    asyncio.run(require_postgres())
    schema = fresh_schema("pm_elsewhere")
    asyncio.run(migrate(DATABASE_URL, schema=schema))
    args = ["demo", "--no-browser", "--database-url", DATABASE_URL]
    env = _env(secret, airline, PAUSEMESH_DATABASE_SCHEMA=schema)
    try:
        with ServerProcess(args, env=env) as server:
            yield Demo(server=server, secret=secret, airline=airline, schema=schema)
    finally:
        asyncio.run(drop_schema(schema))


def _client(demo: Demo, person: str | None = None) -> httpx.Client:
    cookies = {} if person is None else {COOKIE: person}
    return httpx.Client(base_url=demo.server.base_url, timeout=30, cookies=cookies)


class Tail:
    """The owner's open tab: a tail of the thread from ``after``, read on its own thread,
    until the run the server makes itself has finished."""

    def __init__(self, demo: Demo, thread_id: str, after: int) -> None:
        self.frames: queue.Queue[Frame] = queue.Queue()
        self.opened = threading.Event()
        self._thread = threading.Thread(
            target=self._read, args=(demo, thread_id, after), daemon=True
        )
        self._thread.start()
        assert self.opened.wait(30), "the tail did not open"

    def _read(self, demo: Demo, thread_id: str, after: int) -> None:
        timeout = httpx.Timeout(30, read=90)
        with (
            httpx.Client(base_url=demo.server.base_url, timeout=timeout) as client,
            client.stream("GET", f"/agui/threads/{thread_id}/events?after={after}") as response,
        ):
            assert response.status_code == 200
            self.opened.set()
            for frame in read_frames(response.iter_lines()):
                self.frames.put(frame)
                event = frame.event
                if event["type"] == "RUN_FINISHED" and event["runId"].startswith(CONTINUED):
                    return

    def events(self) -> list[dict[str, Any]]:
        self._thread.join(90)
        assert not self._thread.is_alive(), "the continued run never reached the tail"
        return [self.frames.get_nowait().event for _ in range(self.frames.qsize())]


def _text(events: list[dict[str, Any]]) -> str:
    return "".join(e.get("delta", "") for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


def _continued_run(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events of the run the server made (it starts with its own RUN_STARTED)."""
    start = next(
        i
        for i, e in enumerate(events)
        if e["type"] == "RUN_STARTED" and e["runId"].startswith(CONTINUED)
    )
    return events[start:]


def _wait_for(check: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def _ask_for_approval(client: httpx.Client, thread_id: str) -> tuple[dict[str, Any], int]:
    question = ask(client, thread_id).interrupts[0]
    run = post_run(client, resume_body(thread_id, [resolved(question["id"], "PM404")]))
    [approval] = run.interrupts
    last = run.frames[-1].sequence
    assert last is not None
    return approval, last


def test_a_rest_resume_continues_the_thread_while_its_owner_tails_it(demo: Demo) -> None:
    thread_id = new_thread()
    with _client(demo) as traveller:
        asked = ask(traveller, thread_id)
        [question] = asked.interrupts
        last = asked.frames[-1].sequence
        assert last is not None
        tail = Tail(demo, thread_id, last)
        # An e-mail link answers the question, holding its token: not the chat.
        response = traveller.post(
            f"/v1/continuations/{question['id']}/resume",
            json={"payload": {"flight": "PM202"}},
            headers={
                "authorization": f"PauseMesh {demo.token(question['id'])}",
                "idempotency-key": f"mail-{uuid.uuid4()}",
            },
        )
        assert response.status_code == 200, response.text
        run = _continued_run(tail.events())
        assert [e["type"] for e in run][:2] == ["RUN_STARTED", "CUSTOM"]
        assert run[1]["name"] == "pausemesh.decided_elsewhere"
        assert run[1]["value"]["interruptIds"] == [question["id"]]
        assert run[-1]["type"] == "RUN_FINISHED"
        assert "outcome" not in run[-1] or run[-1]["outcome"]["type"] == "success"
        assert "Booked flight PM202 to Lisbon" in _text(run)
        # A reload shows it: nothing pending, one booking.
        state = snapshot(traveller, thread_id)
        assert state["pendingInterrupts"] == []
        assert [b["flight"] for b in state["state"]["bookings"]] == ["PM202"]
        # The chat's own answer arrives late (another flight, even): the stored outcome stands.
        late = post_run(traveller, resume_body(thread_id, [resolved(question["id"], "PM303")]))
        assert late.error_code is None, late.events
        assert "TEXT_MESSAGE_CONTENT" not in late.types  # answered from the record, no run
        assert [b["flight"] for b in snapshot(traveller, thread_id)["state"]["bookings"]] == [
            "PM202"
        ]
        assert len(demo.bookings_of(thread_id, question["id"])) == 1


def test_the_managers_approval_books_in_the_travellers_open_tail(demo: Demo) -> None:
    thread_id = new_thread()
    with _client(demo) as traveller, _client(demo, "manager") as manager:
        approval, last = _ask_for_approval(traveller, thread_id)
        tail = Tail(demo, thread_id, last)
        decided = manager.post(
            f"/v1/approvals/{approval['id']}",
            json={"payload": {"decision": "approve"}},
            headers={"idempotency-key": f"approve-{uuid.uuid4()}"},
        )
        assert decided.status_code == 200, decided.text
        run = _continued_run(tail.events())
        decisions = run[1]["value"]["decisions"]
        assert decisions == [
            {"interruptId": approval["id"], "status": "resolved", "resolvedBy": "manager"}
        ]
        assert "Booked flight PM404 to Lisbon (approved by manager)" in _text(run)
        assert [b["flight"] for b in snapshot(traveller, thread_id)["state"]["bookings"]] == [
            "PM404"
        ]
        assert pending_ids(traveller, thread_id) == []
        # The traveller's tab sends its (refused before) approval late: nothing more happens.
        entry = {
            "interruptId": approval["id"],
            "status": "resolved",
            "payload": {"decision": "approve"},
        }
        late = post_run(traveller, resume_body(thread_id, [entry]))
        assert late.error_code is None, late.events
        assert len(snapshot(traveller, thread_id)["state"]["bookings"]) == 1
        assert len(demo.bookings_of(thread_id, approval["id"])) == 1


def test_twenty_concurrent_decisions_from_two_managers_book_once(demo: Demo) -> None:
    thread_id = new_thread()
    with _client(demo) as traveller:
        approval, _ = _ask_for_approval(traveller, thread_id)
    managers = [_client(demo, "manager") for _ in range(2)]

    def decide(i: int) -> int:
        return (
            managers[i % 2]
            .post(
                f"/v1/approvals/{approval['id']}",
                json={"payload": {"decision": "approve"}},
                headers={"idempotency-key": f"race-{i}"},
            )
            .status_code
        )

    try:
        with ThreadPoolExecutor(20) as pool:
            statuses = list(pool.map(decide, range(20)))
    finally:
        for client in managers:
            client.close()
    assert statuses.count(200) == 1, statuses
    assert set(statuses) <= {200, 409, 404}, statuses
    with _client(demo) as traveller:
        _wait_for(lambda: bool(snapshot(traveller, thread_id)["state"]["bookings"]))
        time.sleep(1)  # two sweeps: a second run would have booked by now
        assert len(snapshot(traveller, thread_id)["state"]["bookings"]) == 1
        assert len(demo.bookings_of(thread_id, approval["id"])) == 1


def test_a_rejection_books_nothing_and_says_so(demo: Demo) -> None:
    thread_id = new_thread()
    with _client(demo) as traveller, _client(demo, "manager") as manager:
        approval, last = _ask_for_approval(traveller, thread_id)
        tail = Tail(demo, thread_id, last)
        decided = manager.post(
            f"/v1/approvals/{approval['id']}",
            json={"payload": {"decision": "reject"}},
            headers={"idempotency-key": "reject-1"},
        )
        assert decided.status_code == 200, decided.text
        run = _continued_run(tail.events())
        assert "was not approved by manager" in _text(run)
        assert snapshot(traveller, thread_id)["state"]["bookings"] == []
        again = manager.post(
            f"/v1/approvals/{approval['id']}",
            json={"payload": {"decision": "approve"}},
            headers={"idempotency-key": "approve-after-reject"},
        )
        assert_problem(again, 409, "TOKEN_ALREADY_USED")


@pytest.fixture(name="slow_demo", params=["sqlite", "postgres"])
def slow_demo_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Demo]:
    """A demo whose airline answers slowly (4 s), so a kill lands inside the continued run."""
    secret = secrets.token_urlsafe(48)
    airline = tmp_path / "airline.db"
    slow = {"PAUSEMESH_DEMO_AIRLINE_LATENCY_SECONDS": "4"}
    if request.param == "sqlite":
        database = tmp_path / "demo.db"
        args = ["demo", "--no-browser", "--database-path", str(database)]
        with ServerProcess(args, env=_env(secret, airline, **slow)) as server:
            yield Demo(server=server, secret=secret, airline=airline, database=database)
        return
    asyncio.run(require_postgres())
    schema = fresh_schema("pm_elsewhere_kill")
    asyncio.run(migrate(DATABASE_URL, schema=schema))
    args = ["demo", "--no-browser", "--database-url", DATABASE_URL]
    env = _env(secret, airline, PAUSEMESH_DATABASE_SCHEMA=schema, **slow)
    try:
        with ServerProcess(args, env=env) as server:
            yield Demo(server=server, secret=secret, airline=airline, schema=schema)
    finally:
        asyncio.run(drop_schema(schema))


class _Started:
    """Reads a tail until the server's own run has started (then the test kills the server)."""

    def __init__(self, demo: Demo, thread_id: str, after: int) -> None:
        self.started = threading.Event()
        self.opened = threading.Event()
        threading.Thread(target=self._read, args=(demo, thread_id, after), daemon=True).start()
        assert self.opened.wait(30)

    def _read(self, demo: Demo, thread_id: str, after: int) -> None:
        timeout = httpx.Timeout(30, read=90)
        try:
            with (
                httpx.Client(base_url=demo.server.base_url, timeout=timeout) as client,
                client.stream("GET", f"/agui/threads/{thread_id}/events?after={after}") as stream,
            ):
                self.opened.set()
                for frame in read_frames(stream.iter_lines()):
                    event = frame.event
                    if event["type"] == "RUN_STARTED" and event["runId"].startswith(CONTINUED):
                        self.started.set()
                        return
        except httpx.HTTPError:
            return  # the server was killed under us


def test_a_server_killed_inside_the_continued_run_completes_it_after_restart_once(
    slow_demo: Demo,
) -> None:
    demo = slow_demo
    thread_id = new_thread()
    with _client(demo) as traveller, _client(demo, "manager") as manager:
        approval, last = _ask_for_approval(traveller, thread_id)
        watcher = _Started(demo, thread_id, last)
        decided = manager.post(
            f"/v1/approvals/{approval['id']}",
            json={"payload": {"decision": "approve"}},
            headers={"idempotency-key": "approve-then-crash"},
        )
        assert decided.status_code == 200, decided.text
        assert watcher.started.wait(30), "the server never started the continued run"
    # The decision is durable; the run that acts on it is cut off mid-booking.
    demo.server.kill()
    assert snapshot_after_restart(demo, thread_id) == ["PM404"]
    assert len(demo.bookings_of(thread_id, approval["id"])) == 1


def snapshot_after_restart(demo: Demo, thread_id: str) -> list[str]:
    """Restart (same data, same port: it frees its predecessor's lease) and wait for the
    owed run to finish; the flights booked on the thread."""
    demo.server.start()
    with _client(demo) as traveller:
        _wait_for(lambda: not pending_ids(traveller, thread_id), timeout=90)
        body = snapshot(traveller, thread_id)
        return [b["flight"] for b in body["state"]["bookings"]]
