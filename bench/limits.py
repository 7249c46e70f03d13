"""Rate limit benchmark: what one PostgreSQL check costs against a bare round trip.

Prints, measured in this one run against PAUSEMESH_TEST_DATABASE_URL (a fresh schema, dropped
afterwards), with 16 checks in flight over an 8-connection pool:
  * ``SELECT 1`` round trips/s through the same pool (the floor of any shared check);
  * ``PostgresRateLimiter.hit`` checks/s (one upsert on one row per key, 100 keys);
  * the ratio of the two, and the per-process limiter's checks/s for scale.

Usage: .venv/bin/python bench/limits.py [--seconds 2] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import time
from collections.abc import Awaitable, Callable

import asyncpg
import uvloop

from pausemesh.core.limits import LocalRateLimiter, RateLimit
from pausemesh.stores.postgres import PostgresDatabase
from pausemesh.stores.postgres.migrate import migrate
from pausemesh.stores.postgres.rate_limits import PostgresRateLimiter

DSN = os.environ.get("PAUSEMESH_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
RULE = RateLimit(count=1_000_000, period_seconds=3600)
IN_FLIGHT = 16


async def rate(op: Callable[[int], Awaitable[object]], seconds: float) -> float:
    count = 0
    stop = time.perf_counter() + seconds

    async def worker(n: int) -> None:
        nonlocal count
        i = n
        while time.perf_counter() < stop:
            await op(i)
            count += 1
            i += IN_FLIGHT

    start = time.perf_counter()
    await asyncio.gather(*(worker(n) for n in range(IN_FLIGHT)))
    return count / (time.perf_counter() - start)


async def main(seconds: float, rounds: int) -> None:
    schema = f"bench_limits_{secrets.token_hex(4)}"
    await migrate(DSN, schema=schema)
    database = await PostgresDatabase.connect(DSN, schema=schema, min_size=8, max_size=8)
    try:
        limiter = PostgresRateLimiter(database)
        local = LocalRateLimiter()
        now = time.time()

        async def select_one(_: int) -> object:
            return await database.fetchrow("SELECT 1")

        async def shared(i: int) -> object:
            return await limiter.hit(f"principal:p{i % 100}", RULE, now)

        async def per_process(i: int) -> object:
            return await local.hit(f"principal:p{i % 100}", RULE, now)

        rows: dict[str, list[float]] = {"select": [], "shared": [], "local": []}
        for _ in range(rounds):
            rows["select"].append(await rate(select_one, seconds))
            rows["shared"].append(await rate(shared, seconds))
            rows["local"].append(await rate(per_process, seconds))
        select, shared_rate = statistics.median(rows["select"]), statistics.median(rows["shared"])
        print(f"load average: {os.getloadavg()[0]:.2f}")
        print(f"SELECT 1 round trips/s (16 in flight):   {select:10.0f}")
        print(f"PostgreSQL rate checks/s (16 in flight): {shared_rate:10.0f}")
        print(f"  ratio to SELECT 1:                     {shared_rate / select:10.2f}")
        print(f"per-process rate checks/s:               {statistics.median(rows['local']):10.0f}")
    finally:
        await database.close()
        conn = await asyncpg.connect(DSN)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    uvloop.run(main(args.seconds, args.rounds))
