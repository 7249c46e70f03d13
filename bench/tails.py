# ruff: noqa: E402 - sys.path is fixed before the imports (see below)
"""Idle live tails: what 10,000 open ``GET /agui/threads/{id}/events`` cost, and how fast an
event reaches 1,000 tails of one thread.

A real ``pausemesh demo`` server (its travel agent asks a question; the answer is a run) and
this client in another process (aiohttp on uvloop). The bench raises its own file-descriptor
limit to the hard limit (the server, its child, inherits it); the project sets none.

Part 1 (``idle``), one server process on SQLite: open ``--tails`` tails on one thread in waves
of ``--wave``, after its last event, so they have nothing to send. Prints the server's RSS
before and after (per tail) and its CPU over ``--idle-seconds`` with every tail open.

Part 2 (``fan-out``): ``--latency-tails`` tails on one thread, then the question is answered
(one run, served by whichever worker accepts it). For every tail, the delay from the moment
the run's own response delivered an event (the run logs each event before it sends it, so that
moment is just after the commit) to the moment the tail received it; p50/p99/max over every
tail, for the run's first event (RUN_STARTED) and its last (RUN_FINISHED). Run on SQLite with
one process, SQLite with two worker processes, and PostgreSQL with two worker processes
(``--postgres-url``; skipped when unreachable).

Figures, never assertions. Usage:
    .venv/bin/python bench/tails.py [--tails 10000] [--latency-tails 1000] [--idle-seconds 10]
        [--postgres-url postgresql://postgres@127.0.0.1:5432/test] [--skip-idle]
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse
import asyncio
import json
import os
import resource
import secrets
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import uvloop
from bench.http import cpu_seconds
from tests.support.listeners import process_tree
from tests.support.server import ServerProcess

RUN_STARTED = "RUN_STARTED"
RUN_FINISHED = "RUN_FINISHED"


def raise_fd_limit() -> int:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def kernel_seconds(pid: int) -> float:
    """stime of the server process alone (the socket writes; on loopback the kernel also
    delivers to the client in the writer's time)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[12]) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> int:
    """VmRSS of the server process and its children (the workers), in KiB."""
    total = 0
    for member in process_tree(pid):
        try:
            text = Path(f"/proc/{member}/status").read_text()
        except OSError:
            continue  # gone meanwhile
        total += sum(int(line.split()[1]) for line in text.splitlines() if line[:6] == "VmRSS:")
    return total


@dataclass
class Tail:
    """One open tail: when it received the watched run's first and last events."""

    opened: asyncio.Event = field(default_factory=asyncio.Event)
    arrivals: dict[str, float] = field(default_factory=dict)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    keepalives: int = 0


async def tail(session: aiohttp.ClientSession, url: str, run_id: str | None, state: Tail) -> None:
    async with session.get(url, timeout=aiohttp.ClientTimeout(total=None)) as response:
        if response.status != 200:
            msg = f"tail: {response.status}"
            raise RuntimeError(msg)
        state.opened.set()
        async for raw in response.content:
            if raw.startswith(b":"):
                state.keepalives += 1
                continue
            line = raw.decode()
            if not line.startswith("data:"):
                continue
            event = json.loads(line[5:])
            if run_id is not None and event.get("runId") == run_id:
                state.arrivals.setdefault(event["type"], time.perf_counter())
                if event["type"] == RUN_FINISHED:
                    state.done.set()
                    return


async def post_run(
    session: aiohttp.ClientSession, base: str, body: dict[str, Any]
) -> dict[str, Any]:
    """POST /agui; the frames' events and when each type first arrived."""
    arrivals: dict[str, float] = {}
    events: list[dict[str, Any]] = []
    async with session.post(f"{base}/agui", json=body) as response:
        if response.status != 200:
            msg = f"run: {response.status} {await response.text()}"
            raise RuntimeError(msg)
        async for raw in response.content:
            line = raw.decode()
            if line.startswith("data:"):
                event = json.loads(line[5:])
                events.append(event)
                arrivals.setdefault(event["type"], time.perf_counter())
    return {"events": events, "arrivals": arrivals}


def run_body(thread_id: str, run_id: str, **fields: Any) -> dict[str, Any]:
    return {"threadId": thread_id, "runId": run_id, "messages": [], **fields}


async def ask(session: aiohttp.ClientSession, base: str, thread_id: str) -> str:
    """The demo asks which flight to book; the interrupt's id."""
    message = {"id": f"user-{uuid.uuid4()}", "role": "user", "content": "Lisbon, please"}
    result = await post_run(
        session, base, run_body(thread_id, f"run-{uuid.uuid4()}", messages=[message])
    )
    finished = result["events"][-1]
    interrupt: str = finished["outcome"]["interrupts"][0]["id"]
    return interrupt


async def head(session: aiohttp.ClientSession, base: str, thread_id: str) -> int:
    async with session.get(f"{base}/agui/threads/{thread_id}") as response:
        body = await response.json()
    last: int = body["lastSequence"]
    return last


async def open_tails(
    session: aiohttp.ClientSession, url: str, count: int, wave: int, run_id: str | None
) -> tuple[list[Tail], list[asyncio.Task[None]]]:
    states: list[Tail] = []
    tasks: list[asyncio.Task[None]] = []
    for start in range(0, count, wave):
        batch = [Tail() for _ in range(min(wave, count - start))]
        tasks += [asyncio.create_task(tail(session, url, run_id, s)) for s in batch]
        states += batch
        waits = [asyncio.create_task(s.opened.wait()) for s in batch]
        await asyncio.wait(waits, timeout=120)
        failed = [t for t in tasks if t.done() and t.exception() is not None]
        if failed:
            raise RuntimeError(f"{len(failed)} tails failed: {failed[0].exception()!r}")
        if not all(s.opened.is_set() for s in batch):
            # Tasks that are still streaming are expected; only unopened ones are a failure.
            missing = sum(not s.opened.is_set() for s in batch)
            raise RuntimeError(f"{missing} tails of a wave did not open")
    return states, tasks


def _session() -> aiohttp.ClientSession:
    # No connection limit: every tail holds its own connection.
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)
    return aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None))


async def idle_part(server: ServerProcess, count: int, wave: int, seconds: float) -> list[str]:
    base = server.base_url
    async with _session() as session:
        thread_id = f"thread-{uuid.uuid4()}"
        await ask(session, base, thread_id)
        after = await head(session, base, thread_id)
        await asyncio.sleep(1.0)
        rss_before = rss_kib(server.pid)
        url = f"{base}/agui/threads/{thread_id}/events?after={after}"
        started = time.perf_counter()
        states, tasks = await open_tails(session, url, count, wave, None)
        opened_in = time.perf_counter() - started
        await asyncio.sleep(2.0)  # let the server settle after the last wave
        rss_after = rss_kib(server.pid)
        cpu_before = cpu_seconds(server.pid)
        kernel_before = kernel_seconds(server.pid)
        frames_before = sum(s.keepalives for s in states)
        await asyncio.sleep(seconds)
        idle_cpu = cpu_seconds(server.pid) - cpu_before
        kernel = kernel_seconds(server.pid) - kernel_before
        frames = sum(s.keepalives for s in states) - frames_before
        still = sum(not t.done() for t in tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    per_tail = (rss_after - rss_before) / count
    return [
        f"  tails open (one thread, waves of {wave})      {still:>10,} of {count:,}",
        f"  time to open them all (s)                      {opened_in:>10.1f}",
        (
            f"  server RSS before / with the tails (MiB)       {rss_before / 1024:>10.1f} / "
            f"{rss_after / 1024:.1f}"
        ),
        f"  server RSS per tail (KiB, goal <= 50)          {per_tail:>10.1f}",
        (
            f"  server CPU while idle (% of a core, goal < 2)  {100 * idle_cpu / seconds:>10.2f}"
            f"   (over {seconds:.0f}s, {100 * kernel / max(idle_cpu, 1e-9):.0f} % of it in the kernel)"
        ),
        # The tails open within seconds of each other, so their keep-alives bunch: a window
        # shorter than the interval can hold more (or fewer) than its share. Per frame is the
        # steadier figure; it includes the fixed costs (measure those with a long interval).
        (
            f"  keep-alives sent in that window               {frames:>10,}"
            f"   ({frames / seconds:,.0f}/s)"
        ),
        (
            "  server CPU per keep-alive, fixed costs in (us) "
            + (f"{1e6 * idle_cpu / frames:>10.1f}" if frames else "       n/a")
        ),
    ]


def _spread(values: list[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return (
        f"p50 {1000 * statistics.median(ordered):7.1f}  p99 {1000 * p99:7.1f}"
        f"  max {1000 * ordered[-1]:7.1f} ms"
    )


async def fan_out_part(server: ServerProcess, count: int, wave: int) -> list[str]:
    base = server.base_url
    async with _session() as session:
        thread_id = f"thread-{uuid.uuid4()}"
        interrupt = await ask(session, base, thread_id)
        after = await head(session, base, thread_id)
        run_id = f"run-answer-{secrets.token_hex(4)}"
        url = f"{base}/agui/threads/{thread_id}/events?after={after}"
        states, tasks = await open_tails(session, url, count, wave, run_id)
        await asyncio.sleep(1.0)
        answer = {"interruptId": interrupt, "status": "resolved", "payload": {"flight": "PM202"}}
        cpu_before = cpu_seconds(server.pid)
        sent = time.perf_counter()
        result = await post_run(session, base, run_body(thread_id, run_id, resume=[answer]))
        await asyncio.wait_for(asyncio.gather(*(s.done.wait() for s in states)), timeout=120)
        run_cpu = cpu_seconds(server.pid) - cpu_before
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    # RUN_STARTED goes out on the run's own response right after its commit: the nearest
    # observable stand-in for the commit. RUN_FINISHED reaches the run's own response only
    # after the run's final save, so it is timed from the POST (an upper bound).
    delivered = len(result["events"])
    committed = result["arrivals"][RUN_STARTED]
    started = [s.arrivals[RUN_STARTED] - committed for s in states]
    finished = [s.arrivals[RUN_FINISHED] - sent for s in states]
    return [
        f"  tails on one thread                            {count:>8,}",
        f"  RUN_STARTED, commit -> every tail        {_spread(started)}",
        f"  RUN_FINISHED, POST sent -> every tail    {_spread(finished)}",
        # Steadier than the delays on a loaded machine: the server CPU for the run and its
        # delivery, per event delivered to one tail (the run's own work spread over them).
        (
            f"  server CPU, run + delivery (ms)                {1000 * run_cpu:>8.1f}"
            f"   ({1e6 * run_cpu / (count * delivered):.1f} us per event per tail,"
            f" {delivered} events)"
        ),
    ]


def _server(args: list[str], env: dict[str, str]) -> ServerProcess:
    return ServerProcess(args, env=env, ready_path="/readyz", startup_timeout=120)


async def _postgres_schema(url: str) -> str | None:
    import asyncpg  # noqa: PLC0415 - only the PostgreSQL part needs it

    from pausemesh.stores.postgres.migrate import migrate  # noqa: PLC0415

    try:
        conn = await asyncpg.connect(url, timeout=3)
    except (OSError, asyncpg.PostgresError, TimeoutError):
        return None
    await conn.close()
    schema = f"pm_bench_tails_{secrets.token_hex(4)}"
    await migrate(url, schema=schema)
    return schema


async def _drop(url: str, schema: str) -> None:
    import asyncpg  # noqa: PLC0415

    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tails", type=int, default=10_000)
    parser.add_argument("--latency-tails", type=int, default=1_000)
    parser.add_argument("--wave", type=int, default=500)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--postgres-url", default=os.environ.get("PAUSEMESH_TEST_DATABASE_URL"))
    parser.add_argument(
        "--keepalive-seconds", type=float, default=None, help="the server's keep-alive interval"
    )
    parser.add_argument("--skip-idle", action="store_true")
    parser.add_argument("--skip-fan-out", action="store_true")
    args = parser.parse_args()
    limit = raise_fd_limit()
    # Every tail here is the same (anonymous) principal; the per-principal tail and run caps
    # (32 each by default) stand for "one person's tabs", so the bench lifts them to their
    # maximum.
    env = {
        "PAUSEMESH_LOG_LEVEL": "warning",
        "PAUSEMESH_MAX_STREAMS_PER_PRINCIPAL": "100000",
        "PAUSEMESH_MAX_TAILS_PER_PRINCIPAL": "100000",
    }
    if args.keepalive_seconds is not None:
        env["PAUSEMESH_KEEPALIVE_SECONDS"] = str(args.keepalive_seconds)
    keepalive = env.get("PAUSEMESH_KEEPALIVE_SECONDS", "15 (default)")
    cores = os.cpu_count()
    out = [f"bench/tails.py: {cores} cores, fd limit {limit}, keep-alive every {keepalive} s"]

    with tempfile.TemporaryDirectory() as tmp:

        def sqlite_args(name: str, workers: int) -> list[str]:
            db = str(Path(tmp) / f"{name}.db")
            command = ["demo", "--no-browser", "--database-path", db]
            return command if workers == 1 else [*command, "--workers", str(workers)]

        if not args.skip_idle:
            with _server(sqlite_args("idle", 1), env) as server:
                out.append("idle tails, SQLite, one server process:")
                out += uvloop.run(idle_part(server, args.tails, args.wave, args.idle_seconds))
        if not args.skip_fan_out:
            for workers in (1, 2):
                with _server(sqlite_args(f"fan-{workers}", workers), env) as server:
                    out.append(f"fan-out, SQLite, {workers} server process(es):")
                    out += uvloop.run(fan_out_part(server, args.latency_tails, args.wave))
            schema = (
                None
                if args.postgres_url is None
                else asyncio.run(_postgres_schema(args.postgres_url))
            )
            if schema is None:
                out.append("fan-out, PostgreSQL: skipped (no --postgres-url or unreachable)")
            else:
                pg_env = {
                    **env,
                    "PAUSEMESH_DATABASE_SCHEMA": schema,
                    "PAUSEMESH_SECRET_KEY": secrets.token_urlsafe(48),
                }
                pg_args = ["demo", "--no-browser", "--database-url", args.postgres_url]
                try:
                    with _server([*pg_args, "--workers", "2"], pg_env) as server:
                        out.append("fan-out, PostgreSQL, 2 server processes:")
                        out += uvloop.run(fan_out_part(server, args.latency_tails, args.wave))
                finally:
                    asyncio.run(_drop(args.postgres_url, schema))
    load = os.getloadavg()
    out.append(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at the end")
    print("\n".join(out))


if __name__ == "__main__":
    main()
