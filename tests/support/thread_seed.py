"""Many AG-UI thread records at once, straight into a migrated database (the thread-list
plan tests and ``bench/thread_list.py``): ``count`` threads ``t-1`` … spread over ``owners``
principals ``user-1`` … (``t-N`` belongs to ``user-(N % owners + 1)``), ``t-N`` updated ``N``
seconds before ``newest`` (so ``t-1`` is the most recent)."""

# ruff: noqa: S608 - SQL text here only interpolates a quoted schema name

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta

import asyncpg

from pausemesh.stores.sqlite.epoch import epoch_us

__all__ = ("cursor_after", "seed_postgres_threads", "seed_sqlite_threads")


def seed_sqlite_threads(
    conn: sqlite3.Connection, count: int, owners: int, newest: datetime
) -> None:
    """Insert the threads in one transaction (a ``SqliteDatabase.write`` op), then ANALYZE."""
    top = epoch_us(newest)
    conn.executemany(
        "INSERT INTO agui_threads (thread_id, owner, messages_json, version,"
        " last_sequence, created_at_us, updated_at_us, title)"
        " VALUES (?, ?, '[]', 1, 0, ?, ?, ?)",
        (
            (f"t-{n}", f"user-{n % owners + 1}", top - n * 1_000_000, top - n * 1_000_000, f"#{n}")
            for n in range(1, count + 1)
        ),
    )
    conn.execute("ANALYZE")


async def seed_postgres_threads(
    conn: asyncpg.Connection, q: str, count: int, owners: int, newest: datetime
) -> None:
    """The same threads on a migrated PostgreSQL schema (``q``, quoted), then ANALYZE."""
    await conn.execute(
        f"""
        INSERT INTO {q}.agui_threads (thread_id, owner, body_json, version, last_sequence,
                                      created_at, updated_at, title)
        SELECT 't-' || n, 'user-' || (n % $2::int + 1), '{{}}', 1, 0,
               $3::timestamptz - n * interval '1 second', $3::timestamptz - n * interval '1 second', '#' || n
        FROM generate_series(1, $1::int) AS n
        """,
        count,
        owners,
        newest,
    )
    await conn.execute(f"ANALYZE {q}.agui_threads")


def cursor_after(newest: datetime, n: int) -> tuple[datetime, str]:
    """The cursor a page ending at thread ``t-n`` hands back."""
    return newest - timedelta(seconds=n), f"t-{n}"
