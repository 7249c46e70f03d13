# ruff: noqa: E402 - sys.path is fixed before the imports (see below)
"""The CPU of delivering a thread's events to its tails, in-process: no HTTP, no client.

A ``RunHost`` on a SQLite file, ``--tails`` tails of one thread (each consuming its frames as
the route would), then ``--events`` events appended one by one. Prints the process's CPU from
the first append until every tail has every event, per event per tail: what the tail side
costs (waking, the head check, reading the log, encoding the frames), without the sockets that
``bench/tails.py`` adds. Figures, never assertions.

Usage: .venv/bin/python bench/tail_fanout.py [--tails 1000] [--events 12] [--rounds 2]
    [--loop uvloop|asyncio]
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse
import asyncio
import os
import tempfile
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import uvloop

from pausemesh.agui.agent import AgentOutput, RunContext
from pausemesh.agui.run import RunHost
from pausemesh.core import ContinuationService, KeyedTokenIssuer, ManualClock
from pausemesh.stores.memory import InMemoryEventStore
from pausemesh.stores.sqlite.database import SqliteDatabase
from pausemesh.stores.sqlite.threads import SqliteThreadStore

NOW = datetime(2026, 1, 1, tzinfo=UTC)
# About the size of a text delta event of the demo.
EVENT = '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"%s","n":%d}'


async def _no_agent(ctx: RunContext) -> AsyncIterator[AgentOutput]:  # the host runs none here
    del ctx
    outputs: tuple[AgentOutput, ...] = ()
    for output in outputs:  # an async generator that yields nothing
        yield output


async def one_round(path: str, tails: int, events: int) -> float:
    """CPU seconds per event per tail."""
    database = await SqliteDatabase(path).open()
    threads = SqliteThreadStore(database, owns_database=True)
    clock = ManualClock()
    service = ContinuationService(
        store=InMemoryEventStore(),
        clock=clock,
        keyed_issuer=KeyedTokenIssuer({"k1": b"k" * 32}, "k1"),
    )
    host = RunHost(agent=_no_agent, service=service, threads=threads, clock=clock)
    await threads.create_or_load("t1", owner=None, now=NOW)
    await threads.acquire_lease(
        "t1", lease_id="l1", run_id="r1", now=NOW, expires_at=NOW + timedelta(days=1)
    )

    async def consume() -> None:
        seen = 0
        async for chunk in host.tail("t1", after_sequence=0):
            seen += chunk.count(b"id: ")
            if seen >= events:
                return

    consumers = [asyncio.create_task(consume()) for _ in range(tails)]
    await asyncio.sleep(0.5)  # every tail caught up and waiting
    started = time.process_time()
    for n in range(events):
        text = EVENT % ("x" * 200, n)
        await threads.append_events("t1", lease_id="l1", run_id="r1", events=[text])
        await asyncio.sleep(0.01)
    await asyncio.gather(*consumers)
    cpu = time.process_time() - started
    await threads.close()
    return cpu / (tails * events)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tails", type=int, default=1000)
    parser.add_argument("--events", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--loop",
        choices=("uvloop", "asyncio"),
        default="uvloop",
        help="the event loop (uvloop, as pausemesh serve runs; asyncio: the standard library's)",
    )
    args = parser.parse_args()
    run = uvloop.run if args.loop == "uvloop" else asyncio.run
    print(
        f"bench/tail_fanout.py: {args.tails} tails of one thread, {args.events} events,"
        f" {args.loop} loop"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(args.rounds):
            path = str(Path(tmp) / f"round-{n}.db")
            per = run(one_round(path, args.tails, args.events))
            print(f"  round {n + 1}: {1e6 * per:6.1f} us of CPU per event per tail")
    load = os.getloadavg()
    print(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at the end")


if __name__ == "__main__":
    main()
