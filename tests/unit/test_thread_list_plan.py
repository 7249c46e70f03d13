"""The thread list and the retention scan are index walks, not scans, on SQLite and PostgreSQL.

The plans are asked of the real databases (SQLite ``EXPLAIN QUERY PLAN``; PostgreSQL ``EXPLAIN``
over 100,000 threads of 49 owners and no owner, analyzed), for the first page and for a cursor page.
"""

# ruff: noqa: S608 - SQL text here only interpolates throwaway test schema names

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import pytest

from pausemesh.stores.postgres.threads import list_threads_sql
from pausemesh.stores.sqlite import SqliteDatabase
from pausemesh.stores.sqlite.epoch import epoch_us
from pausemesh.stores.sqlite.threads import LIST_THREADS_AFTER_SQL, LIST_THREADS_SQL
from tests.support.postgres import DATABASE_URL, migrated_database
from tests.support.thread_seed import cursor_after, seed_sqlite_threads

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("sql", "args"),
    [
        (LIST_THREADS_SQL, ("alice", 21)),
        (LIST_THREADS_AFTER_SQL, ("alice", epoch_us(NOW), "t-5", 21)),
        (LIST_THREADS_SQL, (None, 21)),
    ],
    ids=["first-page", "cursor-page", "no-auth"],
)
async def test_sqlite_lists_threads_from_the_owner_index_without_sorting(
    tmp_path: Path, sql: str, args: tuple[object, ...]
) -> None:
    database = await SqliteDatabase(tmp_path / "plan.db").open()
    try:
        rows = await database.read(f"EXPLAIN QUERY PLAN {sql}", args)
    finally:
        await database.close()
    plan = " | ".join(str(r[-1]) for r in rows)
    assert "USING INDEX agui_threads_by_owner" in plan, plan
    assert "TEMP B-TREE" not in plan, plan  # no sort step: the index gives the order


@pytest.mark.parametrize(
    ("sql", "args"),
    [
        (LIST_THREADS_SQL, ("user-7", 21)),
        (LIST_THREADS_AFTER_SQL, ("user-7", epoch_us(cursor_after(NOW, 50_006)[0]), "t-50006", 21)),
    ],
    ids=["first-page", "deep-cursor-page"],
)
async def test_sqlite_lists_from_100k_analyzed_threads_with_an_index_range_not_a_scan(
    tmp_path: Path, sql: str, args: tuple[object, ...]
) -> None:
    database = await SqliteDatabase(tmp_path / "plan.db").open()
    try:
        await database.write(lambda conn: seed_sqlite_threads(conn, 100_000, 50, NOW))
        [[analyzed]] = await database.read(
            "SELECT count(*) FROM sqlite_stat1 WHERE idx = 'agui_threads_by_owner'"
        )
        rows = await database.read(f"EXPLAIN QUERY PLAN {sql}", args)
        page = await database.read(sql, args)
    finally:
        await database.close()
    plan = " | ".join(str(r[-1]) for r in rows)
    assert analyzed == 1  # the planner decides with the table's statistics
    # A range of the owner index (SEARCH on its leading columns), in index order: no scan of
    # the table or the index, no sort.
    assert "SEARCH agui_threads USING INDEX agui_threads_by_owner (owner=?" in plan, plan
    assert "SCAN" not in plan, plan
    assert "TEMP B-TREE" not in plan, plan
    assert len(page) == 21


@pytest.mark.postgres
@pytest.mark.slow
async def test_postgres_lists_100k_threads_from_the_owner_index_without_sorting() -> None:
    async with migrated_database(max_size=2) as database:
        q = database.q
        conn = await asyncpg.connect(DATABASE_URL)
        try:
            await conn.execute(
                f"""
                INSERT INTO {q}.agui_threads (thread_id, owner, body_json, version,
                                              last_sequence, created_at, updated_at)
                SELECT 't-' || n, nullif('user-' || (n % 50), 'user-0'), '{{}}', 1, 0,
                       now() - n * interval '1 second', now() - n * interval '1 second'
                FROM generate_series(1, 100000) AS n
                """
            )
            await conn.execute(f"ANALYZE {q}.agui_threads")
            # A realistic cursor: where the first page of one owner ends.
            first = await conn.fetch(list_threads_sql(q, after=False), "user-7", 21)
            cursor = (first[-1]["updated_at"], first[-1]["thread_id"])
            plans = []
            for after, args in (
                (False, ("user-7", 21)),
                (True, ("user-7", 21, *cursor)),
                (False, ("", 21)),  # no owner (no auth)
            ):
                sql = list_threads_sql(q, after=after)
                rows = await conn.fetch(f"EXPLAIN {sql}", *args)
                plans.append("\n".join(r[0] for r in rows))
        finally:
            await conn.close()
    for plan in plans:
        assert "agui_threads_by_owner" in plan, plan
        assert "Seq Scan" not in plan, plan
        assert "Sort" not in plan, plan
