"""Counts over a whole store, for ``pausemesh stats`` (read-only, offline).

Only counts, ids and timestamps: never a payload, message, token or hash.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final, Protocol, runtime_checkable

import msgspec

__all__ = ("EVENT_STATUS", "OldestWaiting", "StatsReader", "StoreStats")

# A continuation's status is the type of its newest event.
EVENT_STATUS: Final = {
    "continuation.created": "pending",
    "continuation.resumed": "resumed",
    "continuation.cancelled": "cancelled",
    "continuation.expired": "expired",
}


class OldestWaiting(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """The pending continuation (a question waiting for its answer) created first."""

    continuation_id: str
    created_at: datetime
    expires_at: datetime


class StoreStats(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    # by status: pending, resumed, cancelled, expired (every key present)
    continuations: dict[str, int]
    # pending past their deadline that no sweeper has expired yet
    overdue: int
    oldest_waiting: OldestWaiting | None
    threads: int
    # threads with an open interrupt cohort (questions asked, not yet answered)
    threads_waiting: int
    # threads whose run lease is live now
    threads_running: int
    operations: int
    # gateway/ledger operations attempted without a recorded outcome (unknown or in flight)
    operations_without_outcome: int


@runtime_checkable
class StatsReader(Protocol):
    """Port: the counts of one store (SQLite and PostgreSQL implement it)."""

    async def stats(self, now: datetime) -> StoreStats: ...
