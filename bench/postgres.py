"""PostgreSQL benchmark: lifecycles/s with 1 and 3 replicas against raw asyncpg, same run.

A lifecycle is create + resume through ``ContinuationService`` on ``PostgresEventStore``:
one create statement (head INSERT + event INSERT, one commit), one load (head + events), one
resume statement (head UPDATE fenced on the version + event INSERT, one commit).

The raw baseline runs exactly those three statements with asyncpg on a pool of the same size
and the same number in flight, with precomputed JSON: no validation, no reducer, no tokens.
A second raw figure writes the same rows the classic way (BEGIN; head; events; COMMIT), to show
what the one-statement append saves.
Each "replica" is a separate OS process with its own pool (a real replica minus HTTP); all of
a measurement's processes start together and run for the same time.

With ``--http`` it also starts 1 and then 3 real ``pausemesh serve`` processes on the schema
and drives create + resume over HTTP (aiohttp, the load spread round-robin over replicas).

Usage: .venv/bin/python bench/postgres.py [--seconds 3] [--rounds 2] [--concurrency 64]
           [--pool 16] [--database-url URL] [--http]
"""

# ruff: noqa: S608 - SQL text only interpolates the benchmark's own throwaway schema name

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import uvloop

from pausemesh.core import ContinuationService
from pausemesh.core.resume import Resume, TokenHolder
from pausemesh.stores.postgres import PostgresDatabase, PostgresEventStore
from pausemesh.stores.postgres.migrate import migrate

PAYLOAD = {
    "kind": "input",
    "message": "Which flight should I book?",
    "responseSchema": {
        "type": "object",
        "properties": {"flight": {"type": "string", "enum": ["PM101", "PM202"]}},
        "required": ["flight"],
    },
}
DEFAULT_URL = os.environ.get(
    "PAUSEMESH_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test"
)


async def _count_lifecycles(
    args: argparse.Namespace, go: asyncio.Event, lifecycle: Callable[[], Awaitable[None]]
) -> int:
    """Warm up, report ready, then count lifecycles for ``args.seconds`` once ``go`` is set."""
    stop = False
    done = 0

    async def loop() -> None:
        nonlocal done
        await go.wait()
        while not stop:
            await lifecycle()
            done += 1

    await asyncio.gather(*(lifecycle() for _ in range(args.pool)))  # warm statements
    tasks = [asyncio.create_task(loop()) for _ in range(args.concurrency)]
    print("ready", flush=True)
    await go.wait()
    await asyncio.sleep(args.seconds)
    stop, measured = True, done
    await asyncio.gather(*tasks)
    return measured


async def _service_worker(args: argparse.Namespace, go: asyncio.Event) -> int:
    database = await PostgresDatabase.connect(
        args.database_url, schema=args.schema, min_size=args.pool, max_size=args.pool
    )
    store = PostgresEventStore(database, owns_database=False)
    service = ContinuationService(store=store)

    async def lifecycle() -> None:
        created = await service.create(payload=PAYLOAD)
        await service.resume(
            Resume(
                continuation_id=created.continuation.continuation_id,
                idempotency_key="k",
                payload={"flight": "PM101"},
                by=TokenHolder(created.resume_token),
            )
        )

    measured = await _count_lifecycles(args, go, lifecycle)
    await database.close()
    return measured


async def _raw_worker(args: argparse.Namespace, go: asyncio.Event) -> int:
    """The same three statements, straight through asyncpg."""
    q = f'"{args.schema}"'
    pool = await asyncpg.create_pool(
        args.database_url, min_size=args.pool, max_size=args.pool, reset=_no_reset
    )
    insert_events = f"""
        ins AS (
            INSERT INTO {q}.continuation_events (continuation_id, version, event_json)
            SELECT head.continuation_id, u.version, u.event_json
            FROM head, unnest($4::bigint[], $5::text[]) AS u (version, event_json)
            RETURNING 1
        )
        SELECT count(*) FROM ins
    """
    create_sql = f"""
        WITH head AS (
            INSERT INTO {q}.continuation_streams (continuation_id, version, pending_expires_at)
            VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING continuation_id
        ), {insert_events}
    """
    advance_sql = f"""
        WITH head AS (
            UPDATE {q}.continuation_streams SET version = $2, pending_expires_at = $3
            WHERE continuation_id = $1 AND version = $6 RETURNING continuation_id
        ), {insert_events}
    """
    load_sql = f"""
        SELECT s.version, e.version, e.event_json
        FROM {q}.continuation_streams s
        LEFT JOIN LATERAL (
            SELECT version, event_json FROM {q}.continuation_events ev
            WHERE ev.continuation_id = s.continuation_id ORDER BY version LIMIT $2
        ) e ON TRUE
        WHERE s.continuation_id = $1 ORDER BY e.version
    """
    created_json = json.dumps({"type": "continuation.created", "payload": PAYLOAD, "x": "y" * 200})
    resumed_json = json.dumps({"type": "continuation.resumed", "resumePayload": {"f": "PM101"}})
    expires = datetime.now(UTC) + timedelta(hours=1)

    head_insert = f"""
        INSERT INTO {q}.continuation_streams VALUES ($1, $2, $3) ON CONFLICT DO NOTHING
    """
    head_update = f"""
        UPDATE {q}.continuation_streams SET version = $2, pending_expires_at = $3
        WHERE continuation_id = $1 AND version = $4
    """
    event_insert = f"INSERT INTO {q}.continuation_events VALUES ($1, $2, $3)"

    async def statement_lifecycle() -> None:
        cid = str(uuid.uuid4())
        async with pool.acquire() as conn:
            await conn.fetchval(create_sql, cid, 1, expires, [1], [created_json])
        async with pool.acquire() as conn:
            await conn.fetch(load_sql, cid, 33)
        async with pool.acquire() as conn:
            await conn.fetchval(advance_sql, cid, 2, None, [2], [resumed_json], 1)

    async def transaction_lifecycle() -> None:
        """The same writes as BEGIN; head; events; COMMIT (the classic shape, more round trips)."""
        cid = str(uuid.uuid4())
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute(head_insert, cid, 1, expires)
            await conn.execute(event_insert, cid, 1, created_json)
        async with pool.acquire() as conn:
            await conn.fetch(load_sql, cid, 33)
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute(head_update, cid, 2, None, 1)
            await conn.execute(event_insert, cid, 2, resumed_json)

    lifecycle = transaction_lifecycle if args.worker == "raw-tx" else statement_lifecycle
    measured = await _count_lifecycles(args, go, lifecycle)
    await pool.close()
    return measured


async def _no_reset(_: Any) -> None:
    """The store's pools skip asyncpg's reset query on release; so does the baseline."""


async def _worker(args: argparse.Namespace) -> None:
    go = asyncio.Event()
    runner = _service_worker if args.worker == "service" else _raw_worker
    task = asyncio.create_task(runner(args, go))
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.readline)  # "go"
    go.set()
    print(json.dumps({"lifecycles": await task}), flush=True)


def _measure(args: argparse.Namespace, kind: str, replicas: int) -> float:
    """Start ``replicas`` worker processes, release them together, return lifecycles/s."""
    command = [
        sys.executable,
        __file__,
        "--worker",
        kind,
        "--schema",
        args.schema,
        "--database-url",
        args.database_url,
        "--seconds",
        str(args.seconds),
        "--concurrency",
        str(args.concurrency),
        "--pool",
        str(args.pool),
    ]
    workers = [
        subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(replicas)
    ]
    for worker in workers:
        line = worker.stdout.readline().strip() if worker.stdout else ""
        if line != "ready":
            msg = f"worker failed to start: {line!r}"
            raise RuntimeError(msg)
    for worker in workers:
        if worker.stdin:
            worker.stdin.write("go\n")
            worker.stdin.flush()
    total = 0
    for worker in workers:
        out, _ = worker.communicate(timeout=args.seconds + 60)
        total += int(json.loads(out.strip().splitlines()[-1])["lifecycles"])
    seconds: float = args.seconds
    return total / seconds


async def _http_lifecycles(bases: list[str], seconds: float, concurrency: int) -> int:
    """Create + resume over HTTP, workers spread round-robin over the replicas."""
    import aiohttp  # noqa: PLC0415 - only the --http measurement needs it

    done = 0
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        deadline = time.perf_counter() + seconds

        async def worker(base: str) -> None:
            nonlocal done
            while time.perf_counter() < deadline:
                async with session.post(
                    f"{base}/v1/continuations", json={"payload": PAYLOAD}
                ) as response:
                    created = await response.json()
                    if response.status != 201:
                        raise RuntimeError(created)
                continuation_id = created["continuation"]["continuationId"]
                headers = {
                    "authorization": f"PauseMesh {created['resumeToken']}",
                    "idempotency-key": "k",
                }
                async with session.post(
                    f"{base}/v1/continuations/{continuation_id}/resume",
                    json={"payload": {"flight": "PM101"}},
                    headers=headers,
                ) as response:
                    await response.read()
                    if response.status != 200:
                        raise RuntimeError(response.status)
                done += 1

        await asyncio.gather(*(worker(bases[i % len(bases)]) for i in range(concurrency)))
    return done


def _measure_http(args: argparse.Namespace, replicas: int) -> float:
    """``replicas`` real ``pausemesh serve`` processes on the schema; lifecycles/s over HTTP."""
    # Run as a script, this directory is on sys.path and its http.py would shadow the stdlib's
    # ``http`` (httpx and aiohttp need it): swap it for the repository root first.
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    sys.path.insert(0, str(here.parent))
    from tests.support.server import ServerProcess  # noqa: PLC0415 - repository helper

    env = {
        "PAUSEMESH_SECRET_KEY": "bench-" + "k" * 40,
        "PAUSEMESH_DATABASE_SCHEMA": args.schema,
        "PAUSEMESH_LOG_LEVEL": "warning",
    }
    servers = [
        ServerProcess(["serve", "--database-url", args.database_url], env=env)
        for _ in range(replicas)
    ]
    try:
        for server in servers:
            server.start()
        bases = [server.base_url for server in servers]
        uvloop.run(_http_lifecycles(bases, 1.0, args.concurrency))  # warm-up
        seconds: float = args.seconds
        count: int = uvloop.run(_http_lifecycles(bases, seconds, args.concurrency))
        return count / seconds
    finally:
        for server in servers:
            server.close()


async def _admin(url: str, sql: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--concurrency", type=int, default=64, help="lifecycles in flight per replica"
    )
    parser.add_argument("--pool", type=int, default=16, help="connections per replica")
    parser.add_argument("--database-url", default=DEFAULT_URL)
    parser.add_argument(
        "--http",
        action="store_true",
        help="also measure real `pausemesh serve` replicas over HTTP (the client shares the CPUs)",
    )
    parser.add_argument("--worker", choices=["service", "raw", "raw-tx"], help=argparse.SUPPRESS)
    parser.add_argument("--schema", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        uvloop.run(_worker(args))
        return
    args.schema = f"pm_bench_{secrets.token_hex(4)}"
    asyncio.run(migrate(args.database_url, schema=args.schema))
    try:
        figures: dict[str, list[float]] = {
            "raw1": [],
            "svc1": [],
            "raw3": [],
            "svc3": [],
            "tx1": [],
            "http1": [],
            "http3": [],
        }
        # Interleaved, so drift in machine load hits every figure alike.
        for _ in range(args.rounds):
            figures["raw1"].append(_measure(args, "raw", 1))
            figures["svc1"].append(_measure(args, "service", 1))
            figures["raw3"].append(_measure(args, "raw", 3))
            figures["svc3"].append(_measure(args, "service", 3))
            figures["tx1"].append(_measure(args, "raw-tx", 1))
            if args.http:
                figures["http1"].append(_measure_http(args, 1))
                figures["http3"].append(_measure_http(args, 3))
    finally:
        asyncio.run(_admin(args.database_url, f'DROP SCHEMA "{args.schema}" CASCADE'))
    med = {k: statistics.median(v) for k, v in figures.items() if v}
    print(
        f"PostgreSQL lifecycles/s (create + resume; {args.concurrency} in flight and a pool of"
        f" {args.pool} per replica; {args.seconds:g}s x {args.rounds} rounds, median;"
        f" {os.cpu_count()} CPUs shared with the server)"
    )
    print(f"  raw asyncpg, same statements, 1 process : {med['raw1']:9.0f}")
    print(f"  raw asyncpg, BEGIN..COMMIT shape, 1 proc: {med['tx1']:9.0f}")
    print(f"  PauseMesh service, 1 replica           : {med['svc1']:9.0f}")
    print(f"  raw asyncpg, same statements, 3 procs  : {med['raw3']:9.0f}")
    print(f"  PauseMesh service, 3 replicas          : {med['svc3']:9.0f}")
    print(f"  ratio 1 replica / raw (goal >= 0.5)    : {med['svc1'] / med['raw1']:9.2f}")
    print(f"  ratio 3 replicas / raw 3 procs         : {med['svc3'] / med['raw3']:9.2f}")
    print(f"  scaling 3 replicas / 1 replica         : {med['svc3'] / med['svc1']:9.2f}")
    if args.http:
        print(f"  over HTTP, 1 `pausemesh serve` replica  : {med['http1']:9.0f}")
        print(f"  over HTTP, 3 `pausemesh serve` replicas : {med['http3']:9.0f}")
        print(f"  HTTP scaling 3 replicas / 1 replica    : {med['http3'] / med['http1']:9.2f}")
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    print(f"  measured {started}")


if __name__ == "__main__":
    main()
