"""Nothing lost when replicas die (issue 18): the fault run (``tests/support/faults.py``) on
three replicas on PostgreSQL and on two processes sharing one SQLite file.

Asserts that kills landed right after a run started and that at least one booking a kill left
unknown was recovered or resent (the ledger's audit), then 0 lost, 0 double-booked, 0 left
pending (a booking whose resend a second kill cut off is resent once that resend settled, and
its thread continues by itself), 0 5xx from a live replica, and exactly one airline booking
per conversation. The figures (conversations/s, longest wait for a busy thread) come from
``bench/faults.py``.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Iterator
from pathlib import Path

import pytest

from pausemesh.core.operations import RECOVERED, RESENT
from pausemesh.demo.reservations import Airline
from pausemesh.stores.postgres import open_postgres_storage
from pausemesh.stores.postgres.migrate import migrate
from pausemesh.stores.sqlite import open_sqlite_storage
from pausemesh.stores.storage import Storage
from tests.support.faults import FaultReport, run_faults
from tests.support.postgres import DATABASE_URL, drop_schema, fresh_schema, require_postgres
from tests.support.server import ServerProcess

# A few minutes on a loaded machine: each kill waits for the replica's restart, and every
# replica start is a full uvicorn process start.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

# A replica's start can take a minute on a loaded machine; the kills wait for it.
STARTUP = 240.0
CONVERSATIONS = 16
CONCURRENCY = 4
LATENCY = 0.6


def _env(airline: Airline, **extra: str) -> dict[str, str]:
    return {
        "PAUSEMESH_SECRET_KEY": secrets.token_urlsafe(48),
        "PAUSEMESH_LOG_LEVEL": "warning",
        "PAUSEMESH_DEMO_AIRLINE_PATH": str(airline.path),
        # Long enough that kills land between the attempt and its outcome.
        "PAUSEMESH_DEMO_AIRLINE_LATENCY_SECONDS": str(LATENCY),
        "PAUSEMESH_LEASE_SECONDS": "2",
        **extra,
    }


async def _recovery_steps(opened: Awaitable[Storage], report: FaultReport) -> dict[str, list[str]]:
    """Each booking operation's audited recovery steps (RESENT, RECOVERED), by thread."""
    storage = await opened
    ledger = storage.operations
    assert ledger is not None
    try:
        return {
            thread_id: [step.step for step in await ledger.recoveries(operation)]
            for thread_id, operation in report.operations.items()
        }
    finally:
        await storage.close()


def _assert_nothing_lost(report: FaultReport, steps: dict[str, list[str]]) -> None:
    # The faults happened where they matter: kills right after a run started, timed into the
    # airline call, and at least one booking whose outcome a kill left unknown was recovered
    # from the airline or sent again (once).
    assert report.kills_after_run_started > 0
    assert {RECOVERED, RESENT} & {s for each in steps.values() for s in each}, steps
    # ... and nothing was lost or made twice.
    assert report.lost == [], {
        t: {**report.why_lost[t], "ledger": steps.get(t)} for t in report.lost
    }
    assert report.double_booked == []
    assert report.pending == []
    assert report.live_5xx == 0
    assert [e for e in report.errors if not e.endswith(": THREAD_BUSY")] == [], report.errors
    # No booking waits for an operator: that takes every permitted resend (MAX_RESENDS) cut
    # off by a kill before the airline saw it.
    assert report.awaiting_operator == [], {t: steps[t] for t in report.awaiting_operator}
    assert report.booked_once == report.conversations
    # The airline (the ground truth) holds exactly one booking per conversation, no other.
    assert len(report.operations) == report.conversations
    assert report.airline_bookings == sorted(report.operations.values())


def _faults_on(
    replicas: int, args: list[str], env: dict[str, str], airline: Airline
) -> FaultReport:
    """Start ``replicas`` demo processes, run the fault client against them, close them."""
    servers = [ServerProcess(args, env=env, startup_timeout=STARTUP) for _ in range(replicas)]
    try:
        for server in servers:
            server.start()
        return run_faults(
            servers,
            airline,
            conversations=CONVERSATIONS,
            concurrency=CONCURRENCY,
            latency=LATENCY,
        )
    finally:
        for server in servers:
            server.close()


@pytest.fixture(name="schema")
def schema_fixture() -> Iterator[str]:
    asyncio.run(require_postgres())
    schema = fresh_schema("pm_faults")
    asyncio.run(migrate(DATABASE_URL, schema=schema))
    try:
        yield schema
    finally:
        asyncio.run(drop_schema(schema))


@pytest.mark.postgres
def test_three_postgres_replicas_killed_in_turn_lose_nothing(schema: str, tmp_path: Path) -> None:
    airline = Airline(tmp_path / "airline.db")
    # One environment for all three: they share the server key and the airline.
    env = _env(airline, PAUSEMESH_DATABASE_SCHEMA=schema)
    args = ["demo", "--no-browser", "--database-url", DATABASE_URL]
    report = _faults_on(3, args, env, airline)
    storage = open_postgres_storage(DATABASE_URL, schema=schema)
    _assert_nothing_lost(report, asyncio.run(_recovery_steps(storage, report)))


def test_two_processes_on_one_sqlite_file_killed_in_turn_lose_nothing(tmp_path: Path) -> None:
    airline = Airline(tmp_path / "airline.db")
    database = tmp_path / "demo.db"
    env = _env(airline)
    args = ["demo", "--no-browser", "--database-path", str(database)]
    report = _faults_on(2, args, env, airline)
    storage = open_sqlite_storage(str(database))
    _assert_nothing_lost(report, asyncio.run(_recovery_steps(storage, report)))
