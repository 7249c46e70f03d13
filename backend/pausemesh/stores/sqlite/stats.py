"""``StatsReader`` over a ``SqliteDatabase`` (usually opened read-only)."""

from __future__ import annotations

from datetime import datetime

from pausemesh.core.stats import EVENT_STATUS, OldestWaiting, StoreStats
from pausemesh.stores.sqlite.database import SqliteDatabase
from pausemesh.stores.sqlite.epoch import epoch_us, from_epoch_us

__all__ = ("SqliteStats",)


class SqliteStats:
    def __init__(self, database: SqliteDatabase) -> None:
        self.database = database

    async def stats(self, now: datetime) -> StoreStats:
        read = self.database.read
        counts = dict.fromkeys(EVENT_STATUS.values(), 0)
        # The head event of each stream is the one at the stream's version.
        for kind, count in await read(
            "SELECT json_extract(e.event_json, '$.type'), count(*) FROM continuation_streams s"
            " JOIN continuation_events e"
            " ON e.continuation_id = s.continuation_id AND e.version = s.version GROUP BY 1"
        ):
            status = EVENT_STATUS.get(kind)
            if status is not None:
                counts[status] += count
        overdue = await read(
            "SELECT count(*) FROM continuation_streams"
            " WHERE pending_expires_at_us IS NOT NULL AND pending_expires_at_us <= ?",
            (epoch_us(now),),
        )
        oldest = await read(
            "SELECT s.continuation_id, json_extract(e.event_json, '$.occurredAt'),"
            " s.pending_expires_at_us FROM continuation_streams s"
            " JOIN continuation_events e ON e.continuation_id = s.continuation_id"
            " AND e.version = 1 WHERE s.pending_expires_at_us IS NOT NULL"
            " ORDER BY julianday(json_extract(e.event_json, '$.occurredAt')),"
            " s.continuation_id LIMIT 1"
        )
        threads = await read(
            "SELECT count(*), count(open_receipt_json),"
            " coalesce(sum(lease_expires_at_us > ?), 0) FROM agui_threads",
            (epoch_us(now),),
        )
        operations = await read(
            "SELECT count(*), coalesce(sum(result_hash IS NULL), 0) FROM operations"
        )
        return StoreStats(
            continuations=counts,
            overdue=overdue[0][0],
            oldest_waiting=None
            if not oldest
            else OldestWaiting(
                continuation_id=oldest[0][0],
                created_at=datetime.fromisoformat(oldest[0][1]),
                expires_at=from_epoch_us(oldest[0][2]),
            ),
            threads=threads[0][0],
            threads_waiting=threads[0][1],
            threads_running=threads[0][2],
            operations=operations[0][0],
            operations_without_outcome=operations[0][1],
        )
