"""SQLite operation ledger (table from migration 3), on a shared ``SqliteDatabase``.

``begin`` and ``complete`` run as single write operations in the database's group commit,
so each decision is made and committed atomically under SQLite's write lock: of any number
of concurrent first calls for one business key (in this process or another on the same
file), exactly one inserts the attempt and gets ``EXECUTE``. A trigger keeps terms and
outcomes write-once. A declaration that an outcome is unknown (``operation_unknowns``, migration
11) and the webhooks it owes (``a2a_push_deliveries``) are one write too.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import msgspec

from pausemesh.core.canonical import canonical_json
from pausemesh.core.errors import OperationConflictError
from pausemesh.core.operations import (
    EXECUTE,
    RECOVERED,
    RESENT,
    OperationBegin,
    OperationRecord,
    OperationRecovery,
    OutcomeUnknownWebhooks,
    RecoveryStep,
    UnknownDeclaration,
    begun,
    check_completion,
    decide,
    new_attempt,
    result_hash,
)
from pausemesh.core.push import OutboxEntry
from pausemesh.core.validation import check_id
from pausemesh.stores.sqlite.database import SqliteDatabase
from pausemesh.stores.sqlite.epoch import epoch_us, from_epoch_us
from pausemesh.stores.sqlite.outbox import QUEUE_OUTBOX, outbox_rows

__all__ = (
    "SqliteOperationLedger",
    "begin_in",
    "complete_in",
    "declare_unknown_in",
    "open_sqlite_operation_ledger",
    "select_operation",
    "unknown_of",
)

_COLUMNS = (
    "operation_id, domain, business_key, tool, arguments_json, terms_hash, attempt_id,"
    " attempted_at_us, result_json, result_hash, completed_at_us"
)


def _record(row: Sequence[Any]) -> OperationRecord:
    return OperationRecord(
        operation_id=row[0],
        domain=row[1],
        business_key=row[2],
        tool=row[3],
        arguments=msgspec.json.decode(row[4]),
        terms_hash=row[5],
        attempt_id=row[6],
        attempted_at=from_epoch_us(row[7]),
        result=None if row[8] is None else msgspec.json.decode(row[8]),
        result_hash=row[9],
        completed_at=None if row[10] is None else from_epoch_us(row[10]),
    )


def select_operation(conn: sqlite3.Connection, operation_id: str) -> OperationRecord | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM operations WHERE operation_id = ?",  # noqa: S608 - constant columns
        (operation_id,),
    ).fetchone()
    return None if row is None else _record(row)


def begin_in(conn: sqlite3.Connection, wanted: OperationRecord) -> OperationBegin:
    """``begin`` inside the caller's write transaction (the gateway adds its fence to it)."""
    cursor = conn.execute(
        "INSERT INTO operations (operation_id, domain, business_key, tool,"
        " arguments_json, terms_hash, attempt_id, attempted_at_us)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        (
            wanted.operation_id,
            wanted.domain,
            wanted.business_key,
            wanted.tool,
            canonical_json(wanted.arguments),
            wanted.terms_hash,
            wanted.attempt_id,
            epoch_us(wanted.attempted_at),
        ),
    )
    if cursor.rowcount == 1:
        return OperationBegin(decision=EXECUTE, record=wanted)
    existing = select_operation(conn, wanted.operation_id)
    assert existing is not None  # noqa: S101 - rows are never deleted (trigger)
    return decide(existing, wanted)


def complete_in(  # noqa: PLR0917 - the outcome and where it goes
    conn: sqlite3.Connection,
    operation_id: str,
    attempt_id: str,
    result_json: str,
    digest: str,
    now: datetime,
) -> OperationRecord:
    """``complete`` inside the caller's write transaction."""
    record = begun(operation_id, select_operation(conn, operation_id))
    if check_completion(record, attempt_id, digest):
        return record
    conn.execute(
        "UPDATE operations SET result_json = ?, result_hash = ?, completed_at_us = ?"
        " WHERE operation_id = ? AND attempt_id = ? AND result_hash IS NULL",
        (result_json, digest, epoch_us(now), operation_id, attempt_id),
    )
    completed = select_operation(conn, operation_id)
    assert completed is not None  # noqa: S101 - read back inside the same transaction
    return completed


def declare_unknown_in(  # noqa: PLR0917 - the declaration and what it owes
    conn: sqlite3.Connection,
    operation_id: str,
    declared_by: str,
    reason: str,
    now: datetime,
    webhooks: OutcomeUnknownWebhooks | None,
    *,
    ledger: bool,
) -> tuple[OperationRecord, list[OutboxEntry]]:
    """``declare_unknown`` inside the caller's write transaction: the stored record and the
    webhook deliveries queued with the declaration (none unless this call wrote it)."""
    record = begun(operation_id, select_operation(conn, operation_id))
    if record.completed:
        return record, []
    at = epoch_us(now)
    declared = conn.execute(
        "INSERT INTO operation_unknowns (operation_id, declared_by, reason,"
        " declared_at_us) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
        (operation_id, declared_by, reason, at),
    )
    if declared.rowcount != 1 or webhooks is None:
        return record, []
    entries = webhooks.for_unknown_outcome(
        record, declared_by=declared_by, reason=reason, since=now, ledger=ledger
    )
    conn.executemany(QUEUE_OUTBOX, outbox_rows(entries, at))
    return record, entries


async def unknown_of(database: SqliteDatabase, operation_id: str) -> UnknownDeclaration | None:
    rows = await database.read(
        "SELECT declared_by, reason, declared_at_us FROM operation_unknowns WHERE operation_id = ?",
        (operation_id,),
    )
    if not rows:
        return None
    by, reason, at = rows[0]
    return UnknownDeclaration(
        operation_id=operation_id, declared_by=by, reason=reason, declared_at=from_epoch_us(at)
    )


def _audit(conn: sqlite3.Connection, operation_id: str, step: RecoveryStep, now: datetime) -> bool:
    """Record a recovery step once; True if this call recorded it."""
    cursor = conn.execute(
        "INSERT INTO operation_recoveries (operation_id, step, recorded_at_us)"
        " VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
        (operation_id, step, epoch_us(now)),
    )
    return cursor.rowcount == 1


class SqliteOperationLedger:
    """``OperationLedger`` over a ``SqliteDatabase`` (usually shared with the other stores)."""

    def __init__(self, database: SqliteDatabase, *, owns_database: bool = False) -> None:
        self.database = database
        self._owns_database = owns_database

    async def begin(
        self,
        domain: str,
        business_key: str,
        *,
        tool: str,
        arguments: Any,
        now: datetime,
    ) -> OperationBegin:
        wanted = new_attempt(domain, business_key, tool, arguments, now=now)

        def op(conn: sqlite3.Connection) -> OperationBegin:
            return begin_in(conn, wanted)

        return await self.database.write(op)

    async def complete(
        self, operation_id: str, *, attempt_id: str, result: Any, now: datetime
    ) -> OperationRecord:
        return await self._complete(operation_id, attempt_id, result, now, audit=False)

    async def recover(
        self, operation_id: str, *, attempt_id: str, result: Any, now: datetime
    ) -> OperationRecord:
        return await self._complete(operation_id, attempt_id, result, now, audit=True)

    async def _complete(
        self, operation_id: str, attempt_id: str, result: Any, now: datetime, *, audit: bool
    ) -> OperationRecord:
        digest = result_hash(result)
        result_json = canonical_json(result)

        def op(conn: sqlite3.Connection) -> OperationRecord:
            completed = complete_in(conn, operation_id, attempt_id, result_json, digest, now)
            if audit:
                _audit(conn, operation_id, RECOVERED, now)
            return completed

        return await self.database.write(op)

    async def claim_resend(
        self, operation_id: str, *, attempt_id: str, number: int, now: datetime
    ) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            record = begun(operation_id, select_operation(conn, operation_id))
            if record.attempt_id != attempt_id:
                raise OperationConflictError(operation_id)
            # Only the next number: a claim read from an older audit records nothing.
            cursor = conn.execute(
                "INSERT INTO operation_recoveries (operation_id, step, number, recorded_at_us)"
                " SELECT ?1, ?2, ?3, ?4 WHERE (SELECT count(*) FROM operation_recoveries"
                " WHERE operation_id = ?1 AND step = ?2) = ?3 - 1 ON CONFLICT DO NOTHING",
                (operation_id, RESENT, number, epoch_us(now)),
            )
            return cursor.rowcount == 1

        return await self.database.write(op)

    async def recoveries(self, operation_id: str) -> Sequence[OperationRecovery]:
        rows = await self.database.read(
            "SELECT operation_id, step, recorded_at_us, number FROM operation_recoveries"
            " WHERE operation_id = ? ORDER BY rowid",
            (operation_id,),
        )
        return [
            OperationRecovery(
                operation_id=r[0], step=r[1], recorded_at=from_epoch_us(r[2]), number=r[3]
            )
            for r in rows
        ]

    async def declare_unknown(
        self,
        operation_id: str,
        *,
        declared_by: str,
        reason: str,
        now: datetime,
        webhooks: OutcomeUnknownWebhooks | None = None,
    ) -> OperationRecord:
        check_id(declared_by, "declaredBy")
        check_id(reason, "reason")

        def op(conn: sqlite3.Connection) -> tuple[OperationRecord, list[OutboxEntry]]:
            return declare_unknown_in(
                conn, operation_id, declared_by, reason, now, webhooks, ledger=True
            )

        record, queued = await self.database.write(op)
        if webhooks is not None:
            webhooks.queued(queued)
        return record

    async def unknown_of(self, operation_id: str) -> UnknownDeclaration | None:
        return await unknown_of(self.database, operation_id)

    async def get(self, operation_id: str) -> OperationRecord | None:
        rows = await self.database.read(
            f"SELECT {_COLUMNS} FROM operations WHERE operation_id = ?",  # noqa: S608 - constant columns
            (operation_id,),
        )
        return _record(rows[0]) if rows else None

    async def list(self, domain: str, *, limit: int = 100) -> Sequence[OperationRecord]:
        rows = await self.database.read(
            f"SELECT {_COLUMNS} FROM operations WHERE domain = ? ORDER BY rowid LIMIT ?",  # noqa: S608 - constant columns
            (domain, max(limit, 0)),
        )
        return [_record(row) for row in rows]

    async def check_readiness(self) -> None:
        await self.database.check_readiness()

    async def close(self) -> None:
        if self._owns_database:
            await self.database.close()


async def open_sqlite_operation_ledger(path: str) -> SqliteOperationLedger:
    """A ledger that owns its own database connection (tests, tools)."""
    database = await SqliteDatabase(path).open()
    return SqliteOperationLedger(database, owns_database=True)
