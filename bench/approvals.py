# ruff: noqa: E402, S101 - sys.path is fixed before the imports; a benchmark asserts and prints
"""Approvals benchmark: webhooks that cannot be delivered must not slow pauses down, and links.

Prints, measured in this one run:
  * pause creation (``ContinuationService.create`` with approvers, 16 in flight) on a fresh
    SQLite file with no webhooks, and on another whose outbox holds ``--backlog`` (10,000)
    webhook deliveries to a destination that refuses every connection, with the webhook
    dispatcher running beside the creates in the same event loop (as every server process
    runs it), retrying them; the ratio, goal ≥ 0.9;
  * decisions per second through one-click decision links: ``pausemesh serve`` with a
    pausing agent and ``PAUSEMESH_DECISION_LINKS=1``, ``--decisions`` pauses asked over AG-UI,
    then each decided by its link's POST, 8 in flight (each decision owes the thread a run,
    which the server starts at once: those runs are in the figure).

Usage: .venv/bin/python bench/approvals.py [--seconds 3] [--backlog 10000] [--decisions 300]
       [--rounds 3]  (interleaved rounds, medians)
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
from pausemesh.outbox.dispatcher import OutboxOptions
from pausemesh.outbox.url_policy import PushUrlPolicy
from pausemesh.outbox.webhook_sender import webhook_dispatcher
from pausemesh.stores.sqlite.storage import open_sqlite_storage

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


async def create_rate(path: Path, seconds: float, backlog: int, *, webhooks: bool) -> float:
    """Pauses created per second on ``path`` after ``backlog`` pauses (the same file size for
    both cases); with ``webhooks``, each of those queued an undeliverable webhook delivery,
    and the dispatcher retries them meanwhile."""
    storage = await open_sqlite_storage(str(path))
    routes = None
    if webhooks:
        secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
        hook = WebhookSubscription(
            id="down",
            url=refused_url(),
            events=frozenset({"pause.created"}),
            secrets=(secret,),
        )
        routes = WebhookRoutes([hook])
    issuer = KeyedTokenIssuer({"k": secrets.token_bytes(32)}, "k")
    service = ContinuationService(store=storage.events, keyed_issuer=issuer, webhooks=routes)
    approvers = [Approver.role("manager")]

    async def one() -> None:
        await service.create(payload=PAYLOAD, approvers=approvers, owner="alice", keyed=True)

    task = None
    try:
        for start in range(0, backlog, 200):
            await asyncio.gather(*(one() for _ in range(min(200, backlog - start))))
        if routes is not None:
            push = storage.push
            assert push is not None
            options = OutboxOptions(backoff_seconds=0.5, backoff_max_seconds=5, timeout_seconds=2)
            dispatcher = webhook_dispatcher(
                lambda: push, routes, PushUrlPolicy("loopback"), holder="bench", options=options
            )
            task = asyncio.create_task(dispatcher.run())  # under way before the clock starts
        await asyncio.sleep(0.5)
        created = 0
        deadline = time.perf_counter() + seconds
        started = time.perf_counter()

        async def worker() -> None:
            nonlocal created
            while time.perf_counter() < deadline:
                await one()
                created += 1

        await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
        return created / (time.perf_counter() - started)
    finally:
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await storage.close()


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
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--backlog", type=int, default=10_000)
    parser.add_argument("--decisions", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="pm-bench-approvals-"))
    # Interleaved rounds on fresh files, the median of each: this VM's disk drifts over minutes.
    plains, loadeds = [], []
    for n in range(args.rounds):
        plains.append(
            uvloop.run(
                create_rate(base / f"plain{n}.db", args.seconds, args.backlog, webhooks=False)
            )
        )
        loadeds.append(
            uvloop.run(
                create_rate(base / f"hooks{n}.db", args.seconds, args.backlog, webhooks=True)
            )
        )
    plain, loaded = statistics.median(plains), statistics.median(loadeds)
    print(f"pauses created/s, no webhooks:                         {plain:8,.0f}")
    print(f"pauses created/s, {args.backlog:,} undeliverable webhooks queued: {loaded:8,.0f}")
    print(f"ratio (goal >= 0.9):                                   {loaded / plain:8.2f}")
    rate = link_decisions(args.decisions)
    print(f"decisions/s through links ({args.decisions}, 8 in flight):        {rate:8,.0f}")


if __name__ == "__main__":
    main()
