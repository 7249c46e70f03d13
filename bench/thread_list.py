# ruff: noqa: E402 - sys.path is fixed before the imports; SQL only names the bench's schema
"""The thread list (``GET /agui/threads``) over 100,000 threads: a page costs an index range,
whatever the table holds.

In-process, through each store's ``list_threads`` (what the route calls), on a SQLite file and
(with ``--database-url``) a throwaway PostgreSQL schema. ``--threads`` threads spread over
``--owners`` principals (2,000 each by default) are written straight into the migrated tables,
then ANALYZE. For each size in ``--sizes`` it prints the query plan of a first page and of a
deep cursor page, and p50/p99 of:

* ``first page``: one owner's 20 most recent threads (the owner varies per request);
* ``deep page``: 20 threads after a cursor halfway down an owner's list;
* ``walk``: every page of one owner, 20 at a time, cursor to cursor (per page).

Figures, never assertions (``tests/unit/test_thread_list_plan.py`` pins the plans). Usage:
    .venv/bin/python bench/thread_list.py [--sizes 1000,100000] [--owners 50] [--requests 2000]
        [--database-url postgresql://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse
import secrets
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import asyncpg
import uvloop
from tests.support.thread_seed import cursor_after, seed_postgres_threads, seed_sqlite_threads

from pausemesh.core.threads import ThreadCursor, ThreadStore
from pausemesh.stores.postgres import PostgresDatabase, PostgresThreadStore
from pausemesh.stores.postgres.migrate import migrate
from pausemesh.stores.postgres.threads import list_threads_sql
from pausemesh.stores.sqlite import SqliteDatabase, SqliteThreadStore
from pausemesh.stores.sqlite.epoch import epoch_us
from pausemesh.stores.sqlite.threads import LIST_THREADS_AFTER_SQL, LIST_THREADS_SQL

NEWEST = datetime(2026, 1, 1, tzinfo=UTC)
PAGE = 20


def _us(samples: list[float]) -> str:
    cuts = statistics.quantiles(samples, n=100)
    return f"p50 {cuts[49] * 1e6:7.0f} us  p99 {cuts[98] * 1e6:7.0f} us"


async def _timed(n: int, call: Callable[[int], Awaitable[object]]) -> list[float]:
    samples = []
    for i in range(n):
        start = time.perf_counter()
        await call(i)
        samples.append(time.perf_counter() - start)
    return samples


async def _measure(store: ThreadStore, size: int, owners: int, requests: int) -> None:
    mid = size // 2 - (size // 2) % owners + 7  # a thread of user-8, halfway down the table
    updated_at, thread_id = cursor_after(NEWEST, mid)
    deep = ThreadCursor(updated_at=updated_at, thread_id=thread_id)

    async def first(i: int) -> object:
        return await store.list_threads(f"user-{i % owners + 1}", limit=PAGE + 1)

    async def deep_page(_: int) -> object:
        return await store.list_threads("user-8", limit=PAGE + 1, after=deep)

    walk: list[float] = []
    after: ThreadCursor | None = None
    listed = 0
    while True:
        start = time.perf_counter()
        page = await store.list_threads("user-3", limit=PAGE, after=after)
        walk.append(time.perf_counter() - start)
        listed += len(page)
        if len(page) < PAGE:
            break
        after = ThreadCursor(updated_at=page[-1].updated_at, thread_id=page[-1].thread_id)
    await first(0)  # warm
    print(f"  first page   {_us(await _timed(requests, first))}")
    print(f"  deep page    {_us(await _timed(requests, deep_page))}")
    print(f"  walk         {_us(walk)}  ({len(walk)} pages, {listed} threads of user-3)")


async def sqlite(size: int, owners: int, requests: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        database = await SqliteDatabase(Path(folder) / "threads.db").open()
        try:
            await database.write(lambda conn: seed_sqlite_threads(conn, size, owners, NEWEST))
            updated_at, thread_id = cursor_after(NEWEST, size // 2)
            for sql, args in (
                (LIST_THREADS_SQL, ("user-8", PAGE + 1)),
                (LIST_THREADS_AFTER_SQL, ("user-8", epoch_us(updated_at), thread_id, PAGE + 1)),
            ):
                rows = await database.read(f"EXPLAIN QUERY PLAN {sql}", args)
                print("  plan:", " | ".join(str(r[-1]) for r in rows))
            await _measure(SqliteThreadStore(database), size, owners, requests)
        finally:
            await database.close()


async def postgres(url: str, size: int, owners: int, requests: int) -> None:
    schema = f"bench_threads_{secrets.token_hex(4)}"
    await migrate(url, schema=schema)
    q = f'"{schema}"'
    conn = await asyncpg.connect(url)
    database = await PostgresDatabase.connect(url, schema=schema, min_size=1, max_size=2)
    try:
        await seed_postgres_threads(conn, q, size, owners, NEWEST)
        updated_at, thread_id = cursor_after(NEWEST, size // 2)
        for after, args in (
            (False, ("user-8", PAGE + 1)),
            (True, ("user-8", PAGE + 1, updated_at, thread_id)),
        ):
            rows = await conn.fetch(f"EXPLAIN {list_threads_sql(q, after=after)}", *args)
            print("  plan:", " / ".join(r[0].strip() for r in rows))
        await _measure(PostgresThreadStore(database), size, owners, requests)
    finally:
        await database.close()
        await conn.execute(f"DROP SCHEMA {q} CASCADE")
        await conn.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,100000")
    parser.add_argument("--owners", type=int, default=50)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--database-url")
    args = parser.parse_args()
    for size in (int(s) for s in args.sizes.split(",")):
        print(f"SQLite, {size} threads, {args.owners} owners")
        await sqlite(size, args.owners, args.requests)
        if args.database_url:
            print(f"PostgreSQL, {size} threads, {args.owners} owners")
            await postgres(args.database_url, size, args.owners, args.requests)


if __name__ == "__main__":
    uvloop.run(main())
