"""An unknown booking outcome is visible in the conversation and resolved in it (issue 18).

In-process, on real SQLite files: the demo agent and its airline desk (a file of its own),
the run host, the owed-run sweep and the demo's operation watcher. A crashed run is staged in
the ledger (attempt recorded, no outcome) with the airline holding the booking, or not.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

from pausemesh.agui.input import convert_run_input
from pausemesh.agui.run import RunHost, thread_snapshot
from pausemesh.agui.run.owed import continue_owed_runs
from pausemesh.core import ContinuationService, KeyedTokenIssuer
from pausemesh.core.operations import (
    MAX_RESENDS,
    RESEND_SETTLE,
    OperationLedger,
    TargetAnswer,
    operation_id,
)
from pausemesh.demo.agent import UNKNOWN_EVENT, travel_agent
from pausemesh.demo.flights import BOOKING_DOMAIN
from pausemesh.demo.operation_watch import decide_known_outcomes
from pausemesh.demo.reservations import Airline, airline, configure_airline
from pausemesh.stores.sqlite import open_sqlite_storage
from pausemesh.stores.storage import Storage
from tests.support.agui import RunResult, StreamChecker, read_frames
from tests.support.server import REPO_ROOT

THREAD = "thread-unknown"
USER = [{"id": "u1", "role": "user", "content": "Book me a flight to Lisbon"}]


class SilentAirline(Airline):
    """The demo desk, whose status lookup gets no answer until ``answering`` is set."""

    answering = False
    lookups = 0

    async def lookup(self, key: str) -> TargetAnswer:
        self.lookups += 1
        if not self.answering:
            msg = "the airline did not answer"
            raise ConnectionError(msg)
        return await super().lookup(key)


@dataclass
class Demo:
    host: RunHost
    storage: Storage
    desk: SilentAirline

    @property
    def ledger(self) -> OperationLedger:
        assert self.storage.operations is not None
        return self.storage.operations


@pytest.fixture(name="demo")
async def demo_fixture(tmp_path: Path) -> AsyncIterator[Demo]:
    storage = await open_sqlite_storage(str(tmp_path / "demo.db"))
    service = ContinuationService(
        store=storage.events, keyed_issuer=KeyedTokenIssuer({"k1": b"k" * 32}, "k1")
    )
    assert storage.threads is not None
    host = RunHost(
        agent=travel_agent,
        service=service,
        threads=storage.threads,
        operations=storage.operations,
        keepalive_seconds=10,
    )
    desk = SilentAirline(tmp_path / "airline.db")
    before = airline()
    configure_airline(desk)
    try:
        yield Demo(host=host, storage=storage, desk=desk)
    finally:
        configure_airline(before)
        await storage.close()


async def _run(host: RunHost, **fields: Any) -> RunResult:
    body = {"threadId": THREAD, "runId": f"r-{fields.pop('n', 1)}", "messages": [], **fields}
    chunks = [c async for c in host.run(convert_run_input(body), None)]
    return RunResult(
        list(read_frames(iter(b"".join(chunks).decode().split("\n")), StreamChecker()))
    )


async def _crashed_booking(demo: Demo, *, reached_airline: bool) -> tuple[str, str]:
    """Ask, then stage a run that died between attempt and outcome. (question, operation)"""
    asked = await _run(demo.host, messages=USER)
    question = asked.interrupts[0]["id"]
    key = f"{THREAD}:{question}"
    arguments = {"destination": "Lisbon", "flight": "PM202"}
    await demo.ledger.begin(
        BOOKING_DOMAIN, key, tool="book_flight", arguments=arguments, now=demo.host.clock.now()
    )
    operation = operation_id(BOOKING_DOMAIN, key)
    if reached_airline:
        await demo.desk.book(operation, "Lisbon", "PM202")
    return question, operation


async def _log(demo: Demo) -> list[dict[str, Any]]:
    assert demo.storage.threads is not None
    entries = await demo.storage.threads.read_events(THREAD, after_sequence=0)
    return [msgspec.json.decode(e.event_json) for e in entries]


def _said(log: list[dict[str, Any]]) -> str:
    """What the assistant said in the thread log (its text deltas, in order)."""
    return "".join(e.get("delta", "") for e in log if e["type"] == "TEXT_MESSAGE_CONTENT")


async def _operator_records(demo: Demo, operation: str, booking: Any, reason: str) -> None:
    """What `pausemesh ops resolve` records, then the watcher's pass that decides the wait."""
    assert demo.storage.fencing is not None
    await demo.storage.fencing.resolve(
        operation,
        result={"resolvedResult": booking},
        resolved_by="operator",
        reason=reason,
        now=demo.host.clock.now(),
    )
    assert await decide_known_outcomes(demo.host.service, demo.ledger, demo.desk) == 1


async def _snapshot(demo: Demo) -> dict[str, Any]:
    assert demo.storage.threads is not None
    record = await demo.storage.threads.get(THREAD)
    assert record is not None
    return thread_snapshot(record)


async def _answer_meets_an_unknown_outcome(demo: Demo, question: str, operation: str) -> None:
    """The answer's run meets the unknown outcome: it says so, records it, and waits."""
    entry = {"interruptId": question, "status": "resolved", "payload": {"flight": "PM202"}}
    run = await _run(demo.host, n=2, resume=[entry])
    text = run.text()
    assert "Checking with the airline about flight PM202" in text
    assert operation in text
    assert "not book" not in text
    assert "could not" not in text
    custom = [e for e in run.events if e["type"] == "CUSTOM" and e["name"] == UNKNOWN_EVENT]
    assert [c["value"]["operationId"] for c in custom] == [operation]
    [waiting] = run.interrupts
    assert waiting["reason"] == "operation_unknown"
    snapshot = await _snapshot(demo)
    assert [i["id"] for i in snapshot["pendingInterrupts"]] == [waiting["id"]]
    assert operation in snapshot["pendingInterrupts"][0]["message"]
    assert snapshot["state"]["bookings"] == []
    assert snapshot["state"]["unconfirmedBookings"] == [{"flight": "PM202", "operation": operation}]
    # The thread log holds it too (what a tail and a reload read).
    assert UNKNOWN_EVENT in [e.get("name") for e in await _log(demo)]


async def _continues_with_the_booking(demo: Demo, operation: str) -> None:
    assert await continue_owed_runs(demo.host) == 1
    snapshot = await _snapshot(demo)
    assert snapshot["pendingInterrupts"] == []
    assert [b["flight"] for b in snapshot["state"]["bookings"]] == ["PM202"]
    assert "unconfirmedBookings" not in snapshot["state"]
    log = await _log(demo)
    continued = [e for e in log if e["type"] == "RUN_STARTED" and "continue" in e["runId"]]
    assert len(continued) == 1
    said = _said(log)
    assert said.count("Booked flight PM202 to Lisbon") == 1
    assert list(demo.desk.bookings()) == [operation]  # one booking at the airline
    # Nothing is owed any more: a second sweep runs nothing.
    assert await continue_owed_runs(demo.host) == 0


async def test_an_unknown_outcome_found_later_by_the_airline_continues_the_thread(
    demo: Demo,
) -> None:
    question, operation = await _crashed_booking(demo, reached_airline=True)
    await _answer_meets_an_unknown_outcome(demo, question, operation)
    # While the airline stays silent, nothing is decided and nothing runs.
    assert await decide_known_outcomes(demo.host.service, demo.ledger, demo.desk) == 0
    assert await continue_owed_runs(demo.host) == 0
    demo.desk.answering = True
    assert await decide_known_outcomes(demo.host.service, demo.ledger, demo.desk) == 1
    await _continues_with_the_booking(demo, operation)
    recoveries = await demo.ledger.recoveries(operation)
    assert [r.step for r in recoveries] == ["RECOVERED"]


async def test_an_operators_resolution_continues_the_thread(demo: Demo) -> None:
    question, operation = await _crashed_booking(demo, reached_airline=True)
    await _answer_meets_an_unknown_outcome(demo, question, operation)
    # Someone phoned the airline, which has the booking.
    await _operator_records(demo, operation, demo.desk.bookings()[operation], "confirmed by phone")
    await _continues_with_the_booking(demo, operation)


async def _claim_resends(demo: Demo, operation: str, numbers: range, at: datetime) -> None:
    """Stage resends that were claimed at ``at`` and died before the airline saw them."""
    record = await demo.ledger.get(operation)
    assert record is not None
    for number in numbers:
        assert await demo.ledger.claim_resend(
            operation, attempt_id=record.attempt_id, number=number, now=at
        )


async def test_a_resend_that_died_long_ago_is_followed_by_one_more_and_the_booking_is_made(
    demo: Demo,
) -> None:
    question, operation = await _crashed_booking(demo, reached_airline=False)
    # Resend 1 was claimed a while ago and its run died before the airline saw it.
    settled = demo.host.clock.now() - 2 * RESEND_SETTLE
    await _claim_resends(demo, operation, range(1, 2), settled)
    demo.desk.answering = True  # the airline answers: it never saw the booking
    entry = {"interruptId": question, "status": "resolved", "payload": {"flight": "PM202"}}
    run = await _run(demo.host, n=2, resume=[entry])
    assert "Booked flight PM202 to Lisbon" in run.text()
    assert list(demo.desk.bookings()) == [operation]  # one booking at the airline
    steps = await demo.ledger.recoveries(operation)
    assert [(r.step, r.number) for r in steps] == [("RESENT", 1), ("RESENT", 2)]
    assert (await _snapshot(demo))["pendingInterrupts"] == []


async def test_a_resend_that_just_died_makes_the_booking_wait_and_the_watcher_decides_nothing(
    demo: Demo,
) -> None:
    question, operation = await _crashed_booking(demo, reached_airline=False)
    await _claim_resends(demo, operation, range(1, 2), demo.host.clock.now())
    demo.desk.answering = True
    # It may still be on its way to the airline: "never saw it" now permits no other resend.
    await _answer_meets_an_unknown_outcome(demo, question, operation)
    assert await decide_known_outcomes(demo.host.service, demo.ledger, demo.desk) == 0
    assert await continue_owed_runs(demo.host) == 0
    assert demo.desk.bookings() == {}
    assert [r.number for r in await demo.ledger.recoveries(operation)] == [1]


async def test_a_booking_whose_every_resend_never_reached_the_airline_waits_for_an_operator(
    demo: Demo,
) -> None:
    question, operation = await _crashed_booking(demo, reached_airline=False)
    # Every permitted resend was claimed, and each one's run died before the airline saw it.
    settled = demo.host.clock.now() - 2 * RESEND_SETTLE
    await _claim_resends(demo, operation, range(1, MAX_RESENDS + 1), settled)
    demo.desk.answering = True  # the airline answers: it never saw the booking
    await _answer_meets_an_unknown_outcome(demo, question, operation)
    waiting = (await _snapshot(demo))["pendingInterrupts"]
    # "Never saw it" after the last resend settles nothing: no decision, no run, no further
    # resend, nothing declared failed. The question waits for an operator.
    for _ in range(3):
        assert await decide_known_outcomes(demo.host.service, demo.ledger, demo.desk) == 0
        assert await continue_owed_runs(demo.host) == 0
    snapshot = await _snapshot(demo)
    assert snapshot["pendingInterrupts"] == waiting
    assert snapshot["state"]["unconfirmedBookings"] == [{"flight": "PM202", "operation": operation}]
    assert demo.desk.bookings() == {}
    steps = await demo.ledger.recoveries(operation)
    assert [r.step for r in steps] == ["RESENT"] * MAX_RESENDS
    said = _said(await _log(demo))
    assert "could not" not in said
    assert "not book" not in said
    # The operator books it by phone and records what happened: the thread continues.
    booking = await demo.desk.book(operation, "Lisbon", "PM202")
    await _operator_records(demo, operation, booking, "booked by phone")
    await _continues_with_the_booking(demo, operation)


def _ops(*args: str, database: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pausemesh", "ops", *args]
    command += ["--domain", BOOKING_DOMAIN, "--database-path", str(database)]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=60, cwd=REPO_ROOT, check=False
    )


async def test_an_operator_who_finds_no_booking_resolves_it_from_the_cli_and_the_chat_says_so(
    demo: Demo, tmp_path: Path
) -> None:
    question, operation = await _crashed_booking(demo, reached_airline=False)
    await _answer_meets_an_unknown_outcome(demo, question, operation)
    database = tmp_path / "demo.db"
    status = _ops("status", operation, database=database)
    assert status.returncode == 0, status.stderr
    assert msgspec.json.decode(status.stdout)["status"] == "OUTCOME_UNKNOWN"
    found = tmp_path / "found.json"
    found.write_text('{"booked": false}')
    resolved = _ops(
        "resolve",
        operation,
        "--result-file",
        str(found),
        "--reason",
        "the airline has no such booking",
        "--by",
        "ops-alice",
        database=database,
    )
    assert resolved.returncode == 0, resolved.stderr
    assert msgspec.json.decode(resolved.stdout)["resolvedByOperator"] is True
    assert await decide_known_outcomes(demo.host.service, demo.ledger, demo.desk) == 1
    assert await continue_owed_runs(demo.host) == 1
    snapshot = await _snapshot(demo)
    assert snapshot["pendingInterrupts"] == []
    assert snapshot["state"]["bookings"] == []
    assert "unconfirmedBookings" not in snapshot["state"]
    log = await _log(demo)
    said = _said(log)
    assert f"An operator recorded that flight PM202 was not booked (operation {operation})" in said
    assert "RUN_ERROR" not in [e["type"] for e in log]
    assert demo.desk.bookings() == {}  # nothing was sent to the airline again
