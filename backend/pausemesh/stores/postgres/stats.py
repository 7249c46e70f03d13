"""``StatsReader`` over a ``PostgresDatabase``."""

from __future__ import annotations

from datetime import datetime

from pausemesh.core.stats import EVENT_STATUS, OldestWaiting, StoreStats
from pausemesh.stores.postgres.database import Conn, PostgresDatabase

__all__ = ("PostgresStats",)


class PostgresStats:
    def __init__(self, database: PostgresDatabase) -> None:
        self.database = database

    async def stats(self, now: datetime) -> StoreStats:
        q = self.database.q

        async def op(conn: Conn) -> StoreStats:
            counts = dict.fromkeys(EVENT_STATUS.values(), 0)
            # The head event of each stream is the one at the stream's version.
            for kind, count in await conn.fetch(
                f"SELECT e.event_json::jsonb ->> 'type', count(*)"  # noqa: S608 - quoted schema
                f" FROM {q}.continuation_streams s JOIN {q}.continuation_events e"
                " ON e.continuation_id = s.continuation_id AND e.version = s.version GROUP BY 1"
            ):
                status = EVENT_STATUS.get(kind)
                if status is not None:
                    counts[status] += count
            overdue = await conn.fetchval(
                f"SELECT count(*) FROM {q}.continuation_streams"  # noqa: S608 - quoted schema
                " WHERE pending_expires_at IS NOT NULL AND pending_expires_at <= $1",
                now,
            )
            oldest = await conn.fetchrow(
                "SELECT s.continuation_id,"  # noqa: S608 - quoted schema
                " (e.event_json::jsonb ->> 'occurredAt')::timestamptz AS created_at,"
                f" s.pending_expires_at FROM {q}.continuation_streams s"
                f" JOIN {q}.continuation_events e ON e.continuation_id = s.continuation_id"
                " AND e.version = 1 WHERE s.pending_expires_at IS NOT NULL"
                " ORDER BY created_at, s.continuation_id LIMIT 1"
            )
            threads = await conn.fetchrow(
                "SELECT count(*), count(*) FILTER"  # noqa: S608 - quoted schema
                " (WHERE jsonb_typeof(body_json::jsonb -> 'open_receipt') = 'object'),"
                f" count(*) FILTER (WHERE lease_expires_at > $1) FROM {q}.agui_threads",
                now,
            )
            operations = await conn.fetchrow(
                "SELECT count(*), count(*) FILTER (WHERE result_hash IS NULL)"  # noqa: S608
                f" FROM {q}.operations"
            )
            # Aggregates without GROUP BY always return one row.
            assert threads is not None  # noqa: S101
            assert operations is not None  # noqa: S101
            return StoreStats(
                continuations=counts,
                overdue=overdue,
                oldest_waiting=None
                if oldest is None
                else OldestWaiting(
                    continuation_id=oldest[0], created_at=oldest[1], expires_at=oldest[2]
                ),
                threads=threads[0],
                threads_waiting=threads[1],
                threads_running=threads[2],
                operations=operations[0],
                operations_without_outcome=operations[1],
            )

        return await self.database.run(op, read=True)
