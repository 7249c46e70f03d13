# ruff: noqa: E402, S101 - sys.path is fixed before the imports; a benchmark asserts and prints
"""Approvals benchmark: webhooks that cannot be delivered must not slow pauses down, and links.

Prints, measured in this one run:
  * pause creation (``ContinuationService.create`` with an approver, 16 in flight) on two
    SQLite files: one without webhooks, one with a subscription whose destination refuses every
    connection. Both first get ``--backlog`` (10,000) pauses, so with webhooks 10,000
    undeliverable deliveries are queued, then ``--warmup`` more, untimed. Then the two take
    turns, ``--pauses`` creates each, ``--rounds`` times, the order alternating, so whatever
    else loads the machine falls on both; the webhook dispatcher runs during the webhook arm's
    turns (as every server process runs it), retrying the backlog, and never during the other
    arm's (``--no-dispatcher``: not at all, what the outbox rows alone cost). The goal: the
    median of the rounds' ratios (with webhooks / without) >= 0.9;
  * decisions per second through one-click decision links: ``pausemesh serve`` with a
    pausing agent and ``PAUSEMESH_DECISION_LINKS=1``, ``--decisions`` pauses asked over AG-UI,
    then each decided by its link's POST, 8 in flight (each decision owes the thread a run,
    which the server starts at once: those runs are in the figure). ``--decisions 0`` skips it.

Usage: .venv/bin/python bench/approvals.py [--backlog 10000] [--warmup 1000] [--pauses 1000]
       [--rounds 15] [--decisions 300] [--no-dispatcher]
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this directory would come first on sys.path and bench/http.py would
# shadow the standard library's http (httpx imports it).
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse
import asyncio
import base64
import json
import logging
import os
import secrets
import socket
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import uvloop
from tests.support.server import ServerProcess

from pausemesh.agui import (
    PauseRequest,
    RunContext,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from pausemesh.core.approvers import Approver
from pausemesh.core.links import DecisionLinks
from pausemesh.core.service import ContinuationService
from pausemesh.core.tokens import KeyedTokenIssuer
from pausemesh.core.webhooks import WebhookRoutes, WebhookSubscription
from pausemesh.outbox.dispatcher import OutboxDispatcher, OutboxOptions
from pausemesh.outbox.url_policy import PushUrlPolicy
from pausemesh.outbox.webhook_sender import webhook_dispatcher
from pausemesh.stores.sqlite.storage import open_sqlite_storage
from pausemesh.stores.storage import Storage

SCHEMA = {
    "type": "object",
    "properties": {"decision": {"type": "string", "enum": ["approve", "reject"]}},
    "required": ["decision"],
}
PAYLOAD = {"kind": "input", "message": "Approve the booking?", "responseSchema": SCHEMA}
IN_FLIGHT = 16


async def agent(ctx: RunContext) -> AsyncIterator[Any]:
    """A pausing agent for the links half: every run without a decision asks a manager."""
    if ctx.decisions:
        yield TextMessageStartEvent(message_id=f"m-{ctx.run_id}")
        yield TextMessageContentEvent(message_id=f"m-{ctx.run_id}", delta="Done.")
        yield TextMessageEndEvent(message_id=f"m-{ctx.run_id}")
        return
    yield PauseRequest(
        message="Approve the booking?",
        response_schema=SCHEMA,
        approvers=(Approver.role("manager"),),
    )


def refused_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"  # nobody listens: every attempt is refused


def written_bytes() -> int:
    """Bytes this process has had written to storage (Linux; 0 elsewhere)."""
    try:
        lines = Path("/proc/self/io").read_text().splitlines()
    except OSError:
        return 0
    return next((int(line.split()[1]) for line in lines if line.startswith("write_bytes")), 0)


class Arm:
    """One SQLite file and a service creating pauses on it; with ``webhooks``, a subscription
    whose destination refuses every connection, and that channel's dispatcher."""

    def __init__(self, storage: Storage, *, webhooks: bool, dispatch: bool = True) -> None:
        self.storage = storage
        self.routes = None
        self.dispatcher: OutboxDispatcher | None = None
        if webhooks:
            secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
            hook = WebhookSubscription(
                id="down", url=refused_url(), events=frozenset({"pause.created"}), secrets=(secret,)
            )
            self.routes = WebhookRoutes([hook])
            push = storage.push
            assert push is not None
            # Rests of 0.5 s doubling to 5 s (a server's: 1 s to 300 s), so the backlog is
            # retried during the measurement, not only at its start.
            options = OutboxOptions(backoff_seconds=0.5, backoff_max_seconds=5, timeout_seconds=2)
            if dispatch:
                self.dispatcher = webhook_dispatcher(
                    lambda: push,
                    self.routes,
                    PushUrlPolicy("loopback"),
                    events=storage.events,
                    holder="bench",
                    options=options,
                )
        # Bytes written and pauses created in this arm's timed turns: the disk's share of a
        # pause, which the machine's other load does not blur as it does a rate.
        self.written = self.timed = 0
        issuer = KeyedTokenIssuer({"k": secrets.token_bytes(32)}, "k")
        self.service = ContinuationService(
            store=storage.events, keyed_issuer=issuer, webhooks=self.routes
        )

    async def create(self, count: int) -> None:
        """``count`` pauses, ``IN_FLIGHT`` at a time."""
        left = count
        approvers = [Approver.role("manager")]

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                await self.service.create(
                    payload=PAYLOAD, approvers=approvers, owner="alice", keyed=True
                )

        await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))

    async def rate(self, count: int) -> float:
        """Pauses per second over ``count`` creates; the dispatcher (if any) runs meanwhile,
        as every server process runs it, and only meanwhile: never in the other arm's turn."""
        task = None if self.dispatcher is None else asyncio.create_task(self.dispatcher.run())
        await asyncio.sleep(0)  # under way before the clock starts
        try:
            written, started = written_bytes(), time.perf_counter()
            await self.create(count)
            rate = count / (time.perf_counter() - started)
            self.written += written_bytes() - written
            self.timed += count
            return rate
        finally:
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)


async def create_rates(
    folder: Path, *, backlog: int, warmup: int, pauses: int, rounds: int, dispatch: bool = True
) -> list[tuple[float, float]]:
    """Each round's (without webhooks, with) pauses/s: both files first get ``backlog`` pauses
    (with webhooks each queued an undeliverable delivery), then ``warmup`` more, untimed; then
    the arms take turns, ``pauses`` creates each, the order alternating round by round, so the
    machine's other load and the disk's drift fall on both."""
    plain = Arm(await open_sqlite_storage(str(folder / "plain.db")), webhooks=False)
    storage = await open_sqlite_storage(str(folder / "hooks.db"))
    hooks = Arm(storage, webhooks=True, dispatch=dispatch)
    try:
        for arm in (plain, hooks):
            for start in range(0, backlog, 200):
                await arm.create(min(200, backlog - start))
            await arm.rate(warmup)
        results = []
        for n in range(rounds):
            if n % 2:
                with_hooks, without = await hooks.rate(pauses), await plain.rate(pauses)
            else:
                without, with_hooks = await plain.rate(pauses), await hooks.rate(pauses)
            results.append((without, with_hooks))
        per_pause = [arm.written / max(arm.timed, 1) for arm in (plain, hooks)]
        print(f"bytes written per pause: {per_pause[0]:,.0f} and {per_pause[1]:,.0f}")
        return results
    finally:
        await plain.storage.close()
        await hooks.storage.close()


def link_decisions(count: int) -> float:
    """Decisions per second through links' POSTs against a real server."""
    key = secrets.token_urlsafe(48)
    folder = Path(tempfile.mkdtemp(prefix="pm-bench-links-"))
    args = ["serve", "--agent", "bench.approvals:agent", "--database-path", str(folder / "l.db")]
    env = {
        "PAUSEMESH_SECRET_KEY": key,
        "PAUSEMESH_DECISION_LINKS": "1",
        "PAUSEMESH_LOG_LEVEL": "warning",
    }
    with ServerProcess(args, env=env) as server:
        material = key.encode()
        links = DecisionLinks(material, server.base_url)
        paths: list[str] = []
        with httpx.Client(base_url=server.base_url, timeout=60) as client:
            for _ in range(count):
                thread = str(uuid.uuid4())
                body = {
                    "threadId": thread,
                    "runId": str(uuid.uuid4()),
                    "state": {},
                    "messages": [{"id": str(uuid.uuid4()), "role": "user", "content": "go"}],
                    "tools": [],
                    "context": [],
                    "forwardedProps": {},
                }
                text = client.post("/agui", json=body, headers={"accept": "text/event-stream"}).text
                pause_id = _interrupt_id(text)
                paths.append(
                    links.path(pause_id, 0, "role:manager") + f"/0/{links.csrf(pause_id, 0, 0)}"
                )

        async def decide_all() -> float:
            queue = list(paths)
            async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:

                async def worker() -> None:
                    while queue:
                        response = await http.post(queue.pop())
                        assert response.status_code == 200, response.text

                started = time.perf_counter()
                await asyncio.gather(*(worker() for _ in range(8)))
                return count / (time.perf_counter() - started)

        return asyncio.run(decide_all())


def _interrupt_id(sse: str) -> str:
    for line in sse.splitlines():
        if line.startswith("data:") and '"RUN_FINISHED"' in line:
            event = json.loads(line[5:])
            return str(event["outcome"]["interrupts"][0]["id"])
    raise AssertionError(sse[-500:])


def main() -> None:
    # One WARNING per delivery's first failure: thousands here, and not what is measured.
    logging.getLogger("pausemesh.webhooks").setLevel(logging.ERROR)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlog", type=int, default=10_000)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--pauses", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--decisions", type=int, default=300)
    parser.add_argument(
        "--no-dispatcher",
        action="store_true",
        help="no delivery loop beside the webhook arm: what its outbox rows alone cost",
    )
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="pm-bench-approvals-"))
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    rounds = uvloop.run(
        create_rates(
            folder,
            backlog=args.backlog,
            warmup=args.warmup,
            pauses=args.pauses,
            rounds=args.rounds,
            dispatch=not args.no_dispatcher,
        )
    )
    ratios = [hooks / plain for plain, hooks in rounds]
    plain = statistics.median(r[0] for r in rounds)
    hooks = statistics.median(r[1] for r in rounds)
    low, high = min(ratios), max(ratios)
    print(f"pauses created/s, no webhooks (median of {args.rounds}):      {plain:8,.0f}")
    print(f"pauses created/s, {args.backlog:,}+ undeliverable queued:     {hooks:8,.0f}")
    print(
        f"ratio, median of the rounds' (goal >= 0.9):       {statistics.median(ratios):8.2f}"
        f"  (rounds {low:.2f}-{high:.2f})"
    )
    print(f"load average at end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if args.decisions:
        rate = link_decisions(args.decisions)
        print(f"decisions/s through links ({args.decisions}, 8 in flight):        {rate:8,.0f}")


if __name__ == "__main__":
    main()
