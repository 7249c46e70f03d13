"""The SQLite event store: continuation streams over a ``SqliteDatabase``.

Each append is one compare-and-swap on the stream's head row plus its events, queued as one
operation of the database's group commit.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import msgspec

from pausemesh.core.approvers import Approver
from pausemesh.core.errors import VersionConflictError
from pausemesh.core.model import ContinuationEvent
from pausemesh.core.push import OutboxEntry
from pausemesh.stores.batch import (
    approver_index_keys,
    batch_approvers,
    batch_due,
    batch_owed_thread,
    check_batch,
    decode_stream,
)
from pausemesh.stores.sqlite.database import SqliteDatabase
from pausemesh.stores.sqlite.epoch import epoch_us
from pausemesh.stores.sqlite.outbox import OUTBOX_GROUP_INSERT, outbox_rows

__all__ = ("SqliteEventStore", "open_sqlite_store")

# ``erase_correlated``: the owner's continuations of a correlation id not yet erased (on the
# ``continuation_events_by_correlation`` index), then their events redacted in place.
_CORRELATED = (
    "SELECT continuation_id FROM continuation_events"
    " WHERE version = 1 AND json_extract(event_json, '$.correlationId') = ?"
    " AND json_extract(event_json, '$.owner') IS ?"
    " AND continuation_id NOT IN (SELECT continuation_id FROM continuation_erasures)"
)
_REDACT = (
    "UPDATE continuation_events SET event_json = CASE json_extract(event_json, '$.type')"
    " WHEN 'continuation.created'"
    " THEN json_set(event_json, '$.payload', json('null'), '$.metadata', json('{}'))"
    " ELSE json_set(event_json, '$.resumePayload', json('null')) END"
    " WHERE continuation_id = ?"
    " AND json_extract(event_json, '$.type') IN ('continuation.created', 'continuation.resumed')"
)


class SqliteEventStore:
    """``EventStore`` over a ``SqliteDatabase``; it may share the database with other stores."""

    def __init__(self, database: SqliteDatabase, *, owns_database: bool = True) -> None:
        self.database = database
        self._owns_database = owns_database

    async def load(self, continuation_id: str) -> Sequence[ContinuationEvent]:
        rows = await self.database.read(
            "SELECT event_json FROM continuation_events WHERE continuation_id = ? ORDER BY version",
            (continuation_id,),
        )
        return decode_stream(continuation_id, [row[0] for row in rows])

    async def append(
        self,
        continuation_id: str,
        expected_version: int,
        events: Sequence[ContinuationEvent],
        *,
        outbox: Sequence[OutboxEntry] = (),
    ) -> None:
        encoded = [e.decode() for e in check_batch(continuation_id, expected_version, events)]
        if not encoded:
            rows = await self.database.read(
                "SELECT version FROM continuation_streams WHERE continuation_id = ?",
                (continuation_id,),
            )
            actual = rows[0][0] if rows else 0
            if actual != expected_version:
                raise VersionConflictError(continuation_id, expected_version, actual)
            return
        new_version = expected_version + len(encoded)
        due = batch_due(events)
        deadline = None if due is None else epoch_us(due)
        approvers = batch_approvers(events)
        owed = batch_owed_thread(events)
        queued = outbox_rows(outbox, epoch_us(events[0].occurred_at)) if outbox else []

        def op(conn: sqlite3.Connection) -> None:
            if expected_version == 0:
                cursor = conn.execute(
                    "INSERT INTO continuation_streams"
                    " (continuation_id, version, pending_expires_at_us, owed_thread)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (continuation_id, new_version, deadline, owed),
                )
            else:
                cursor = conn.execute(
                    "UPDATE continuation_streams SET version = ?, pending_expires_at_us = ?,"
                    " owed_thread = coalesce(?, owed_thread)"
                    " WHERE continuation_id = ? AND version = ?",
                    (new_version, deadline, owed, continuation_id, expected_version),
                )
            if cursor.rowcount != 1:
                row = conn.execute(
                    "SELECT version FROM continuation_streams WHERE continuation_id = ?",
                    (continuation_id,),
                ).fetchone()
                raise VersionConflictError(continuation_id, expected_version, row[0] if row else 0)
            conn.executemany(
                "INSERT INTO continuation_events VALUES (?, ?, ?)",
                [
                    (continuation_id, expected_version + i + 1, text)
                    for i, text in enumerate(encoded)
                ],
            )
            if approvers:
                conn.executemany(
                    # OR IGNORE: an escalation may name an approver the pause already has.
                    "INSERT OR IGNORE INTO continuation_approvers VALUES (?, ?)",
                    [(approver, continuation_id) for approver in approvers],
                )

        # The webhooks' rows go in with the group's others, one statement for all (see
        # ``GroupInsert``), in the same transaction, only if this CAS succeeded.
        await self.database.write(op, rows=(OUTBOX_GROUP_INSERT, queued) if queued else None)

    async def list_due(self, now: datetime, limit: int) -> Sequence[str]:
        rows = await self.database.read(
            "SELECT continuation_id FROM continuation_streams"
            " WHERE pending_expires_at_us IS NOT NULL AND pending_expires_at_us <= ?"
            " ORDER BY pending_expires_at_us LIMIT ?",
            (epoch_us(now), limit),
        )
        return [row[0] for row in rows]

    async def pending_for_approvers(
        self, approvers: Sequence[Approver], *, before: str | None, limit: int
    ) -> Sequence[str]:
        if not approvers:
            return []
        keys = approver_index_keys(approvers)
        rows = await self.database.read(
            "SELECT DISTINCT a.continuation_id FROM continuation_approvers a"
            " JOIN continuation_streams s ON s.continuation_id = a.continuation_id"
            " WHERE a.approver IN (SELECT value FROM json_each(?))"
            # Pending, whatever its next due time: a due timer not yet fired keeps it listed.
            " AND s.pending_expires_at_us IS NOT NULL AND (? IS NULL OR a.continuation_id < ?)"
            " ORDER BY a.continuation_id DESC LIMIT ?",
            (msgspec.json.encode(keys).decode(), before, before, limit),
        )
        return [row[0] for row in rows]

    async def erase_correlated(
        self, correlation_id: str, *, owner: str | None, now: datetime
    ) -> int:
        at = epoch_us(now)

        def op(conn: sqlite3.Connection) -> int:
            ids = [row[0] for row in conn.execute(_CORRELATED, (correlation_id, owner))]
            # The ledger first: the update trigger allows only an erased continuation's rows.
            conn.executemany(
                "INSERT INTO continuation_erasures VALUES (?, ?)", [(i, at) for i in ids]
            )
            conn.executemany(_REDACT, [(i,) for i in ids])
            return len(ids)

        return await self.database.write(op)

    async def owed_runs(self, *, limit: int) -> Sequence[tuple[str, str]]:
        rows = await self.database.read(
            "SELECT continuation_id, owed_thread FROM continuation_streams"
            " WHERE owed_thread IS NOT NULL ORDER BY continuation_id LIMIT ?",
            (limit,),
        )
        return [(row[0], row[1]) for row in rows]

    async def settle_owed(self, continuation_ids: Sequence[str]) -> None:
        ids = list(continuation_ids)
        if not ids:
            return

        def op(conn: sqlite3.Connection) -> None:
            conn.executemany(
                "UPDATE continuation_streams SET owed_thread = NULL WHERE continuation_id = ?",
                [(cid,) for cid in ids],
            )

        await self.database.write(op)

    async def check_readiness(self) -> None:
        await self.database.check_readiness()

    async def close(self) -> None:
        if self._owns_database:
            await self.database.close()


async def open_sqlite_store(path: str | Path, *, busy_timeout_ms: int = 5000) -> SqliteEventStore:
    """Open (creating and migrating if needed) a SQLite file and return its event store."""
    database = await SqliteDatabase(path, busy_timeout_ms=busy_timeout_ms).open()
    return SqliteEventStore(database)
