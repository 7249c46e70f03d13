"""A run whose process dies: its thread is answerable again at once after a restart, within the
lease TTL on another replica (within 5 s on PostgreSQL), and the booking it was making is neither
lost nor made twice.

Real ``pausemesh demo`` processes, SIGKILL right after ``RUN_STARTED`` (while the demo airline
is still being called: ``PAUSEMESH_DEMO_AIRLINE_LATENCY_SECONDS``), real SQLite files and the
real PostgreSQL server; the airline is its own SQLite file, the ground truth for bookings.
"""

from __future__ import annotations

import asyncio
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from pausemesh.core.operations import operation_id
from pausemesh.demo.flights import BOOKING_DOMAIN
from pausemesh.demo.reservations import Airline
from pausemesh.stores.postgres.migrate import migrate
from tests.e2e.agui_helpers import ask, bookings, new_thread, resolved, resume_body, snapshot
from tests.support.agui import RunResult, post_run, read_frames
from tests.support.postgres import DATABASE_URL, drop_schema, fresh_schema, require_postgres
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

# Long enough that a kill after RUN_STARTED lands while the airline is being called.
LATENCY = "4"
# Liveness bound for waits: only a stuck system gets near it (never a timing assertion).
STUCK = 60.0


def _lease_of(database: Path, thread_id: str) -> str | None:
    with closing(sqlite3.connect(database)) as conn:
        row = conn.execute(
            "SELECT lease_id FROM agui_threads WHERE thread_id = ?", (thread_id,)
        ).fetchone()
    assert row is not None
    lease: str | None = row[0]
    return lease


def _answer_until_started(server: ServerProcess, body: dict[str, Any]) -> threading.Thread:
    """Start the answer run on ``server`` and return once it sent RUN_STARTED (the stream keeps
    being read in the background until the process dies)."""
    started = threading.Event()

    def read() -> None:
        with (
            httpx.Client(base_url=server.base_url, timeout=STUCK) as client,
            client.stream("POST", "/agui", json=body) as response,
        ):
            try:
                for frame in read_frames(response.iter_lines()):
                    if frame.event["type"] == "RUN_STARTED":
                        started.set()
            except httpx.HTTPError:
                pass  # the server was killed mid-stream
        started.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert started.wait(STUCK)
    return reader


def _until_answered(client: httpx.Client, body: dict[str, Any]) -> tuple[RunResult, int]:
    """Resend the same answer like a retrying browser until a run goes through; the result
    and how many attempts found the thread busy."""
    busy = 0
    deadline = time.monotonic() + STUCK
    while time.monotonic() < deadline:
        result = post_run(client, body)
        if result.error_code != "THREAD_BUSY":
            return result, busy
        busy += 1
        time.sleep(0.2)
    pytest.fail(f"the thread stayed busy ({busy} attempts)")


def _booked_once(client: httpx.Client, airline: Airline, thread_id: str, interrupt: str) -> None:
    key = operation_id(BOOKING_DOMAIN, f"{thread_id}:{interrupt}")
    desk = airline.bookings()
    assert key in desk
    assert [b["confirmation"] for b in bookings(client, thread_id)] == [desk[key]["confirmation"]]
    assert snapshot(client, thread_id)["pendingInterrupts"] == []


@pytest.fixture(name="airline")
def airline_fixture(tmp_path: Path) -> Airline:
    return Airline(tmp_path / "airline.db")


def test_a_replica_killed_mid_run_frees_its_thread_at_restart_and_the_booking_is_not_lost(
    tmp_path: Path, airline: Airline
) -> None:
    database = tmp_path / "demo.db"
    env = {
        "PAUSEMESH_DEMO_AIRLINE_PATH": str(airline.path),
        "PAUSEMESH_DEMO_AIRLINE_LATENCY_SECONDS": LATENCY,
        # A long TTL: only the restart's release can free the thread quickly.
        "PAUSEMESH_LEASE_SECONDS": "300",
    }
    server = ServerProcess(
        ["demo", "--no-browser", "--database-path", str(database)], env=env
    ).start()
    try:
        thread_id = new_thread()
        with httpx.Client(base_url=server.base_url, timeout=STUCK) as client:
            [interrupt] = ask(client, thread_id).interrupts
        answer = resume_body(thread_id, [resolved(interrupt["id"], "PM303")])
        _answer_until_started(server, answer)
        server.kill()
        assert _lease_of(database, thread_id) is not None  # the run died holding its lease
        server.start()
        # The restarted replica freed its predecessor's lease before serving anything.
        assert _lease_of(database, thread_id) is None
        with httpx.Client(base_url=server.base_url, timeout=STUCK) as client:
            done = post_run(client, answer)
            assert done.last["type"] == "RUN_FINISHED", done.events
            assert "PM303" in done.text()
            _booked_once(client, airline, thread_id, interrupt["id"])
            post_run(client, answer)  # a browser that never saw the answer arrive retries
            _booked_once(client, airline, thread_id, interrupt["id"])
    finally:
        server.close()


@pytest.fixture(name="schema")
def schema_fixture() -> Iterator[str]:
    asyncio.run(require_postgres())
    schema = fresh_schema("pm_recovery")
    asyncio.run(migrate(DATABASE_URL, schema=schema))
    try:
        yield schema
    finally:
        asyncio.run(drop_schema(schema))


def _two_replicas(
    schema: str, airline: Airline, *, latency: str, lease: str
) -> tuple[ServerProcess, ServerProcess]:
    """Two demo replicas on one PostgreSQL schema and one airline file, started (the caller
    closes them): the airline answers after ``latency`` s, run leases last ``lease`` s."""
    env = {
        "PAUSEMESH_DATABASE_SCHEMA": schema,
        "PAUSEMESH_SECRET_KEY": secrets.token_urlsafe(48),
        "PAUSEMESH_LOG_LEVEL": "warning",
        "PAUSEMESH_DEMO_AIRLINE_PATH": str(airline.path),
        "PAUSEMESH_DEMO_AIRLINE_LATENCY_SECONDS": latency,
        "PAUSEMESH_LEASE_SECONDS": lease,
    }
    args = ["demo", "--no-browser", "--database-url", DATABASE_URL]
    replicas = ServerProcess(args, env=env), ServerProcess(args, env=env)
    for replica in replicas:
        replica.start()
    return replicas


@pytest.mark.postgres
def test_a_live_run_keeps_its_thread_past_the_ttl_and_a_dead_ones_thread_moves_to_another_replica(
    schema: str, airline: Airline
) -> None:
    first, second = _two_replicas(schema, airline, latency="8", lease="2")
    try:
        thread_id = new_thread()
        with httpx.Client(base_url=first.base_url, timeout=STUCK) as client:
            [interrupt] = ask(client, thread_id).interrupts
        answer = resume_body(thread_id, [resolved(interrupt["id"], "PM101")])
        _answer_until_started(first, answer)
        term_ends = asyncio.run(_pg_lease_expires_at(schema, thread_id))
        with httpx.Client(base_url=second.base_url, timeout=STUCK) as client:
            # Once the lease's term has ended, the live run still holds its thread: the keeper
            # renews it. Waited for as a moment, not slept for: the run (its airline call
            # alone takes 8 s) is still live when the answer is sent again.
            while datetime.now(UTC) <= term_ends:  # the replicas share this machine's clock
                time.sleep(0.05)
            assert post_run(client, answer).error_code == "THREAD_BUSY"
            first.kill()
            done, _busy = _until_answered(client, answer)
            assert done.last["type"] == "RUN_FINISHED", done.events
            assert "PM101" in done.text()
            _booked_once(client, airline, thread_id, interrupt["id"])
    finally:
        first.close()
        second.close()


async def _pg_lease(schema: str, thread_id: str) -> str | None:
    conn = await asyncpg.connect(DATABASE_URL)
    try:
        row = await conn.fetchrow(
            f'SELECT lease_id FROM "{schema}".agui_threads WHERE thread_id = $1',  # noqa: S608
            thread_id,
        )
    finally:
        await conn.close()
    assert row is not None
    lease: str | None = row[0]
    return lease


async def _pg_lease_expires_at(schema: str, thread_id: str) -> datetime:
    conn = await asyncpg.connect(DATABASE_URL)
    try:
        expires_at = await conn.fetchval(
            f'SELECT lease_expires_at FROM "{schema}".agui_threads WHERE thread_id = $1',  # noqa: S608
            thread_id,
        )
    finally:
        await conn.close()
    assert isinstance(expires_at, datetime)
    return expires_at


def _first_accepted(
    client: httpx.Client, body: dict[str, Any], since: float
) -> tuple[RunResult, float]:
    """Resend ``body`` like a retrying browser until a run is not refused as busy; that run,
    and when (after ``since``) the attempt that got through was sent."""
    deadline = time.monotonic() + STUCK
    while time.monotonic() < deadline:
        sent = time.monotonic()
        result = post_run(client, body)
        if result.error_code != "THREAD_BUSY":
            return result, sent - since
        time.sleep(0.1)
    pytest.fail("the thread stayed busy")


@pytest.mark.postgres
def test_a_replica_sigkilled_mid_run_leaves_the_thread_answerable_on_the_other_within_5_s(
    schema: str, airline: Airline
) -> None:
    """Two replicas on PostgreSQL. The one running the answer run is SIGKILLed right after
    RUN_STARTED, before the airline saw the booking: the other answers the thread within 5 s
    (the lease TTL, 4 s here, bounds it) and books once. Then the same replica dies mid-run
    again and restarts: the restart frees its predecessor's lease at once (the row's lease is
    gone, which a lapse never does) and the thread answers on its first attempt."""
    # Half the latency passes before the booking reaches the airline: a kill after
    # RUN_STARTED lands there.
    doomed, survivor = _two_replicas(schema, airline, latency="4", lease="4")
    try:
        thread_id = new_thread()
        with httpx.Client(base_url=doomed.base_url, timeout=STUCK) as client:
            [interrupt] = ask(client, thread_id).interrupts
        answer = resume_body(thread_id, [resolved(interrupt["id"], "PM101")])
        _answer_until_started(doomed, answer)
        doomed.kill()
        killed_at = time.monotonic()
        # The dead run still holds the thread (its lease names the killed replica's port).
        assert f":{doomed.port}@" in (asyncio.run(_pg_lease(schema, thread_id)) or "")
        with httpx.Client(base_url=survivor.base_url, timeout=STUCK) as client:
            done, after = _first_accepted(client, answer, killed_at)
            assert after < 5.0
            assert done.last["type"] == "RUN_FINISHED", done.events
            assert "PM101" in done.text()
            _booked_once(client, airline, thread_id, interrupt["id"])

        # The same replica again: killed mid-run, then restarted.
        doomed.start()
        thread_id = new_thread()
        with httpx.Client(base_url=doomed.base_url, timeout=STUCK) as client:
            [interrupt] = ask(client, thread_id).interrupts
        answer = resume_body(thread_id, [resolved(interrupt["id"], "PM202")])
        _answer_until_started(doomed, answer)
        doomed.kill()
        assert asyncio.run(_pg_lease(schema, thread_id)) is not None
        doomed.start()
        assert asyncio.run(_pg_lease(schema, thread_id)) is None  # freed by the restart
        with httpx.Client(base_url=doomed.base_url, timeout=STUCK) as client:
            done = post_run(client, answer)
            assert done.last["type"] == "RUN_FINISHED", done.events
            assert "PM202" in done.text()
            _booked_once(client, airline, thread_id, interrupt["id"])
    finally:
        doomed.close()
        survivor.close()
