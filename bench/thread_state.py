# ruff: noqa: E402 - sys.path is fixed before the imports (see below)
"""Does a thread's state size grow what a run costs? (issue 42, item 3)

In process: a ``RunHost`` on a real SQLite file (and on PostgreSQL in a fresh schema when
``--database-url`` is given), an agent that answers "ok" and reads neither the history nor the
state, and threads whose AG-UI state is S bytes (set by the first run's input). Each thread
gets ``--runs`` runs that add one short user message; the first 5 are left out, and the rest
give the run's p50 latency and the process's CPU per run (p50). The messages stay short: what
grows is the state alone (``bench/long_threads.py`` grows the messages with a small state).

``--delta``: the agent also changes the state each run (a one-value ``STATE_DELTA``, without
looking at ``ctx.state``): the run then reads the state once and writes it whole.

Usage: .venv/bin/python bench/thread_state.py [--runs 30] [--sizes 1000,100000,1000000,4000000]
       [--delta] [--database-url postgresql://...]
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

# Run as a script, this directory would come first on sys.path and bench/http.py would
# shadow the stdlib's ``http``: put the repository root there instead.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse
import asyncio
import secrets
import statistics
import tempfile
import time
from typing import Any

import asyncpg

from pausemesh.agui.agent import AgentOutput, RunContext
from pausemesh.agui.events import (
    StateDeltaEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
)
from pausemesh.agui.input import convert_run_input
from pausemesh.agui.run import RunHost
from pausemesh.core import ContinuationService, KeyedTokenIssuer
from pausemesh.stores.postgres.migrate import migrate
from pausemesh.stores.postgres.storage import open_postgres_storage
from pausemesh.stores.sqlite import open_sqlite_storage
from pausemesh.stores.storage import Storage

_WARM_UP = 5


async def ok_agent(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """Answers "ok"; looks at neither ``ctx.messages`` nor ``ctx.state``."""
    yield TextMessageStartEvent(message_id=f"a-{ctx.run_id}", role="assistant")
    yield TextMessageContentEvent(message_id=f"a-{ctx.run_id}", delta="ok")


async def delta_agent(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """Answers "ok" and sets one value of the state (a delta; ``ctx.state`` not looked at)."""
    yield TextMessageStartEvent(message_id=f"a-{ctx.run_id}", role="assistant")
    yield TextMessageContentEvent(message_id=f"a-{ctx.run_id}", delta="ok")
    yield StateDeltaEvent(delta=[{"op": "add", "path": "/last", "value": ctx.run_id}])


async def measure(
    storage: Storage, size: int, runs: int, *, delta: bool = False
) -> tuple[float, float]:
    """The run's p50 latency and CPU per run (ms) on a thread whose state is ``size`` bytes."""
    if storage.threads is None:
        raise SystemExit("the storage has no thread store")
    service = ContinuationService(
        store=storage.events, keyed_issuer=KeyedTokenIssuer({"k1": b"k" * 32}, "k1")
    )
    host = RunHost(
        agent=delta_agent if delta else ok_agent,
        service=service,
        threads=storage.threads,
        keepalive_seconds=10,
        max_thread_bytes=256 * 1024 * 1024,
    )
    thread = f"state-{size}-{secrets.token_hex(3)}"
    state = {"notes": ["x" * 1000 for _ in range(max(size // 1000, 1))]}
    latencies: list[float] = []
    cpu: list[float] = []
    for n in range(runs + _WARM_UP):
        body: dict[str, Any] = {
            "threadId": thread,
            "runId": f"r{n}",
            "messages": [{"id": f"u{n}", "role": "user", "content": "hi"}],
        }
        if n == 0:
            body["state"] = state
        run_input = convert_run_input(body)
        wall, process = time.perf_counter(), time.process_time()
        frames = [frame async for frame in host.run(run_input, None)]
        wall, process = time.perf_counter() - wall, time.process_time() - process
        if b"RUN_FINISHED" not in frames[-1]:
            raise SystemExit(f"run failed: {frames[-1][:300]!r}")
        if n >= _WARM_UP:
            latencies.append(wall)
            cpu.append(process)
    await host.close()
    return statistics.median(latencies) * 1000, statistics.median(cpu) * 1000


async def _report(name: str, storage: Storage, sizes: list[int], runs: int, *, delta: bool) -> None:
    for size in sizes:
        p50, cpu = await measure(storage, size, runs, delta=delta)
        print(
            f"{name:>8}  state {size / 1e6:6.3f} MB  run p50 {p50:8.2f} ms  CPU/run {cpu:7.2f} ms"
        )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--sizes", default="1000,100000,1000000,4000000")
    parser.add_argument("--delta", action="store_true", help="each run changes the state")
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = await open_sqlite_storage(str(Path(tmp) / "state.db"))
        try:
            await _report("sqlite", sqlite, sizes, args.runs, delta=args.delta)
        finally:
            await sqlite.close()
    if args.database_url is None:
        return
    schema = f"bench_state_{secrets.token_hex(4)}"
    await migrate(args.database_url, schema=schema)
    postgres = await open_postgres_storage(args.database_url, schema=schema)
    try:
        await _report("postgres", postgres, sizes, args.runs, delta=args.delta)
    finally:
        await postgres.close()
        conn = await asyncpg.connect(args.database_url)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()


if __name__ == "__main__":
    asyncio.run(main())
