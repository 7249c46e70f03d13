"""The fault run: conversations with the demo on several replicas while replicas are SIGKILLed.

Each conversation asks on a random replica and answers on a random replica; a client that
retries like a browser (another replica after a cut stream, a 5xx, a refused connection or
``THREAD_BUSY``, resending the same answer) carries it to the end. A killer SIGKILLs a replica
every 2-4 s, often right after a client saw ``RUN_STARTED`` on it (timed into the airline call,
between the booking's attempt and its outcome), and restarts it (``_Fleet``). Afterwards
every conversation is checked against the airline's own bookings (the ground truth) and the
thread: booked exactly once, nothing pending.

``tests/reliability/test_faults.py`` runs it small; ``bench/faults.py`` runs it bigger and prints
the figures.
"""

from __future__ import annotations

import contextlib
import queue
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from pausemesh.core.operations import operation_id
from pausemesh.demo.flights import BOOKING_DOMAIN, DEFAULT_APPROVAL_THRESHOLD, FLIGHTS
from pausemesh.demo.reservations import Airline
from tests.support.agui import read_frames
from tests.support.server import ServerProcess

__all__ = ("FaultReport", "run_faults")

# Liveness bound for one conversation: only a stuck system gets near it.
STUCK = 120.0


@dataclass
class FaultReport:
    conversations: int = 0
    booked_once: int = 0
    lost: list[str] = field(default_factory=list)
    double_booked: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    live_5xx: int = 0
    kills: int = 0
    kills_after_run_started: int = 0
    retries: int = 0
    busy_answers: int = 0
    longest_busy_wait: float = 0.0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)
    # Each conversation's booking operation (thread id -> operation id), and every booking key
    # the airline holds at the end (the ground truth: one per conversation, none other).
    operations: dict[str, str] = field(default_factory=dict)
    airline_bookings: list[str] = field(default_factory=list)
    # Conversations whose booking waits for an operator: its outcome is unknown, the airline
    # never saw it, and (the ledger's audit says, see the test) every permitted resend was
    # used up, i.e. kills hit each resend before it reached the airline. Shown in the thread
    # as "checking with the airline"; never resent again, never declared failed.
    awaiting_operator: list[str] = field(default_factory=list)
    # What the end check saw of each lost conversation (a failure names its cause, not an id).
    why_lost: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def per_second(self) -> float:
        return self.conversations / self.seconds if self.seconds else 0.0


@dataclass
class _Run:
    """What one POST /agui gave: the events read before the stream ended (or was cut)."""

    events: list[dict[str, Any]]
    status: int | None = None

    @property
    def last(self) -> dict[str, Any] | None:
        return self.events[-1] if self.events else None

    @property
    def finished(self) -> bool:
        return self.last is not None and self.last["type"] == "RUN_FINISHED"

    @property
    def error_code(self) -> str | None:
        last = self.last
        return last.get("code") if last is not None and last["type"] == "RUN_ERROR" else None


class _Fleet:
    """The replicas, their liveness, and kill requests from clients that saw RUN_STARTED.

    The killer waits for its first kill until a client saw an answer run start (so every run
    kills at least once between a booking's attempt and its outcome), then kills a replica
    every 2-4 s: the one a client just saw start a run if any (an answer run more often than
    an ask), after a random delay within the airline's latency (so the kill lands before the
    booking reaches the airline, or after it and before its outcome is recorded), otherwise a
    random one. A killed replica restarts in the background; the last live one is never killed.
    """

    def __init__(
        self, servers: list[ServerProcess], report: FaultReport, seed: int, latency: float
    ) -> None:
        self.servers = servers
        self.report = report
        self.random = random.Random(seed)
        self.latency = latency
        self.lock = threading.Lock()
        self.requests: queue.Queue[int] = queue.Queue()
        self.stop = threading.Event()
        self.restarting: set[int] = set()
        self.restarts: list[threading.Thread] = []

    def pick(self) -> int:
        with self.lock:
            return self.random.randrange(len(self.servers))

    def saw_run_started(self, index: int, *, answer: bool) -> None:
        with self.lock:
            wanted = self.random.random() < (0.5 if answer else 0.1)
        if wanted:
            self.requests.put(index)

    def _killable(self, index: int) -> bool:
        with self.lock:
            up = len(self.servers) - len(self.restarting)
            return index not in self.restarting and up > 1

    def _restart(self, index: int) -> None:
        try:
            self.servers[index].start()
        finally:
            with self.lock:
                self.restarting.discard(index)

    def killer(self) -> None:
        while not self.stop.is_set():
            with self.lock:
                pause = self.random.uniform(2.0, 4.0)
            try:
                index = self.requests.get(timeout=pause)
                targeted = True
            except queue.Empty:
                if self.report.kills == 0:
                    continue  # the first kill lands in an answer run
                index, targeted = self.pick(), False
            if self.stop.is_set():
                return
            if not self._killable(index):
                continue
            if targeted:
                with self.lock:
                    delay = self.random.uniform(0.0, self.latency)
                time.sleep(delay)
            with self.lock:
                self.restarting.add(index)
            self.servers[index].kill()
            self.report.kills += 1
            if targeted:
                self.report.kills_after_run_started += 1
            restart = threading.Thread(target=self._restart, args=(index,), daemon=True)
            self.restarts.append(restart)
            restart.start()
            while not self.requests.empty():  # requests about the replica that just died
                with contextlib.suppress(queue.Empty):
                    self.requests.get_nowait()

    def join_restarts(self) -> None:
        for restart in self.restarts:
            restart.join()


def _post(fleet: _Fleet, index: int, body: dict[str, Any], path: str = "/agui") -> _Run | None:
    """One POST on replica ``index``; None if the connection was refused or cut before any
    event (the replica is down)."""
    server = fleet.servers[index]
    events: list[dict[str, Any]] = []
    try:
        with (
            httpx.Client(base_url=server.base_url, timeout=STUCK) as client,
            client.stream("POST", path, json=body) as response,
        ):
            if response.status_code >= 500:
                fleet.report.live_5xx += 1
                return _Run([], response.status_code)
            if response.status_code != 200:
                fleet.report.errors.append(f"{response.status_code}: {response.read()!r}")
                return _Run([], response.status_code)
            for frame in read_frames(response.iter_lines()):
                events.append(frame.event)
                if frame.event["type"] == "RUN_STARTED" and path == "/agui":
                    fleet.saw_run_started(index, answer="resume" in body)
    except httpx.TransportError:
        return _Run(events) if events else None
    return _Run(events)


def _ask(fleet: _Fleet, thread_id: str) -> str:
    """Ask until the thread holds the question; the interrupt id."""
    message = {"id": f"user-{thread_id}", "role": "user", "content": "Lisbon, please"}
    body = {"threadId": thread_id, "runId": f"ask-{thread_id}", "messages": [message]}
    deadline = time.monotonic() + STUCK
    while time.monotonic() < deadline:
        index = fleet.pick()
        run = _post(fleet, index, body)
        if run is not None and run.finished and run.last is not None:
            interrupts = (run.last.get("outcome") or {}).get("interrupts") or []
            if interrupts:
                return str(interrupts[0]["id"])
        # Cut, refused, busy or already asked: learn the thread's state on some replica.
        fleet.report.retries += 1
        connected = _post(fleet, fleet.pick(), body, "/agui/connect")
        if connected is not None and connected.finished and connected.last is not None:
            interrupts = (connected.last.get("outcome") or {}).get("interrupts") or []
            if interrupts:
                return str(interrupts[0]["id"])
        time.sleep(0.1)
    msg = f"could not ask on {thread_id}"
    raise AssertionError(msg)


def _answer(fleet: _Fleet, thread_id: str, interrupt: str, flight: str) -> None:
    """Resend the same answer, on random replicas, until a run finishes."""
    entry = {"interruptId": interrupt, "status": "resolved", "payload": {"flight": flight}}
    body: dict[str, Any] = {"threadId": thread_id, "runId": f"answer-{thread_id}"}
    body.update(messages=[], resume=[entry])
    busy_since: float | None = None
    deadline = time.monotonic() + STUCK
    while time.monotonic() < deadline:
        run = _post(fleet, fleet.pick(), body)
        if run is not None and run.error_code == "THREAD_BUSY":
            fleet.report.busy_answers += 1
            busy_since = busy_since if busy_since is not None else time.monotonic()
        elif busy_since is not None and run is not None and run.events:
            waited = time.monotonic() - busy_since
            fleet.report.longest_busy_wait = max(fleet.report.longest_busy_wait, waited)
            busy_since = None
        if run is not None and run.finished:
            return
        if run is not None and run.error_code not in {None, "THREAD_BUSY"}:
            fleet.report.errors.append(f"{thread_id}: {run.error_code}")
        fleet.report.retries += 1
        time.sleep(0.1)
    msg = f"could not answer on {thread_id}"
    raise AssertionError(msg)


def _conversation(fleet: _Fleet, thread_id: str, flight: str) -> str:
    interrupt = _ask(fleet, thread_id)
    _answer(fleet, thread_id, interrupt, flight)
    return interrupt


def _snapshot(fleet: _Fleet, thread_id: str) -> dict[str, Any]:
    for _ in range(200):
        server = fleet.servers[fleet.pick()]
        with contextlib.suppress(httpx.TransportError):
            response = httpx.get(server.url(f"/agui/threads/{thread_id}"), timeout=STUCK)
            if response.status_code == 200:
                body: dict[str, Any] = response.json()
                return body
        time.sleep(0.1)
    msg = f"no replica answered for {thread_id}"
    raise AssertionError(msg)


def _checking(snapshot: dict[str, Any]) -> bool:
    """Whether the thread waits only for an unknown booking outcome to become known."""
    questions = snapshot.get("pendingInterrupts") or []
    return bool(questions) and all(q.get("reason") == "operation_unknown" for q in questions)


def _settled_snapshot(fleet: _Fleet, thread_id: str) -> dict[str, Any]:
    """The thread once it no longer waits for an unknown outcome that can become known: the
    watcher decides it when the airline answers and a resend is permitted (a resend a kill cut
    off must settle first, ``RESEND_SETTLE``), and the thread continues by itself."""
    deadline = time.monotonic() + STUCK
    snapshot = _snapshot(fleet, thread_id)
    while _checking(snapshot) and time.monotonic() < deadline:
        time.sleep(0.5)
        snapshot = _snapshot(fleet, thread_id)
    return snapshot


def run_faults(
    servers: list[ServerProcess],
    airline: Airline,
    *,
    conversations: int,
    concurrency: int,
    seed: int = 18,
    kills: bool = True,
    latency: float = 0.0,
    on_progress: Callable[[int], None] | None = None,
) -> FaultReport:
    """Run ``conversations`` through ``servers`` under kills; check every one at the end.
    ``latency``: the demo airline's simulated latency, which the timed kills aim into."""
    report = FaultReport(conversations=conversations)
    fleet = _Fleet(servers, report, seed, latency)
    threads = [f"faults-{uuid.uuid4()}" for _ in range(conversations)]
    # Flights the traveller's own answer books (dearer ones wait for a manager's approval).
    direct = [f.code for f in FLIGHTS if f.price <= DEFAULT_APPROVAL_THRESHOLD]
    flights = {t: direct[i % len(direct)] for i, t in enumerate(threads)}
    interrupts: dict[str, str] = {}
    todo: queue.Queue[str] = queue.Queue()
    for thread_id in threads:
        todo.put(thread_id)

    def worker() -> None:
        for thread_id in _drain(todo):
            try:
                interrupts[thread_id] = _conversation(fleet, thread_id, flights[thread_id])
            except AssertionError as error:
                report.errors.append(str(error))
            if on_progress is not None:
                on_progress(len(interrupts))

    started = time.monotonic()
    killer = threading.Thread(target=fleet.killer, daemon=True)
    if kills:
        killer.start()
    workers = [threading.Thread(target=worker) for _ in range(concurrency)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    report.seconds = time.monotonic() - started
    fleet.stop.set()
    if kills:
        killer.join()
    fleet.join_restarts()
    for server in servers:  # every replica up again before the checks
        if server.process is None or server.process.poll() is not None:
            server.start()
    _check(fleet, airline, threads, interrupts, flights)
    return report


def _drain(todo: queue.Queue[str]) -> Iterator[str]:
    while True:
        try:
            yield todo.get_nowait()
        except queue.Empty:
            return


def _check(
    fleet: _Fleet,
    airline: Airline,
    threads: list[str],
    interrupts: dict[str, str],
    flights: dict[str, str],
) -> None:
    report = fleet.report
    for thread_id in threads:
        interrupt = interrupts.get(thread_id)
        snapshot = _settled_snapshot(fleet, thread_id)
        # Read after the thread settled: a booking the watcher recovered or resent while this
        # check waited for it is at the airline only from then on.
        desk = airline.bookings()
        state = snapshot.get("state") or {}
        booked = [b for b in state.get("bookings", []) if b.get("flight") == flights[thread_id]]
        key = (
            None if interrupt is None else operation_id(BOOKING_DOMAIN, f"{thread_id}:{interrupt}")
        )
        if key is not None:
            report.operations[thread_id] = key
        at_airline = key is not None and key in desk
        open_questions = snapshot.get("pendingInterrupts") or []
        if _checking(snapshot) and not at_airline:
            report.awaiting_operator.append(thread_id)
            continue
        if open_questions or state.get("unconfirmedBookings"):
            report.pending.append(thread_id)
        if not at_airline or not booked:
            report.lost.append(thread_id)
            report.why_lost[thread_id] = {
                "interrupt": interrupt,
                "at_airline": at_airline,
                "bookings": state.get("bookings"),
                "unconfirmed": state.get("unconfirmedBookings"),
                "questions": open_questions,
                "errors": [e for e in report.errors if e.startswith(f"{thread_id}:")],
            }
        elif len(state.get("bookings", [])) > 1:
            report.double_booked.append(thread_id)
        else:
            report.booked_once += 1
    report.airline_bookings = sorted(airline.bookings())
