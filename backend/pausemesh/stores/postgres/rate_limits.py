"""The rate limit's counters in PostgreSQL (migration ``rate_limits``): one budget for every replica.

One upsert per check, on one row per key: a hit in the row's window adds one, a hit in a later
window starts it again at one. The window index is computed by the replica from its clock; a
replica whose clock lags never moves a row back to an older window (``GREATEST``).
"""

# ruff: noqa: S608 - the only identifier put into SQL text is the validated, quoted schema name

from __future__ import annotations

from pausemesh.core.limits import RateLimit, window_of
from pausemesh.stores.postgres.database import PostgresDatabase

__all__ = ("PostgresRateLimiter",)


class PostgresRateLimiter:
    """``RateLimiter`` over the ``rate_limits`` table (fixed windows shared by replicas)."""

    __slots__ = ("_database", "_sql")

    def __init__(self, database: PostgresDatabase) -> None:
        self._database = database
        q = database.q
        self._sql = f"""
            INSERT INTO {q}.rate_limits AS r (bucket, window_index, hits)
            VALUES ($1, $2, 1)
            ON CONFLICT (bucket) DO UPDATE SET
                hits = CASE WHEN EXCLUDED.window_index > r.window_index THEN 1
                            ELSE LEAST(r.hits, 2147483646) + 1 END,
                window_index = GREATEST(r.window_index, EXCLUDED.window_index)
            RETURNING hits, window_index
        """

    async def hit(self, key: str, limit: RateLimit, now: float) -> int | None:
        # The bucket names the period too: changing the setting starts fresh counters.
        bucket = f"{limit.period_seconds}:{key}"
        index, left = window_of(limit, now)
        row = await self._database.fetchrow(self._sql, bucket, index)
        hits, stored_index = int(row[0]), int(row[1])
        if hits <= limit.count:
            return None
        # Another replica's clock is ahead: the window it opened ends later than ours.
        return left + (stored_index - index) * limit.period_seconds
