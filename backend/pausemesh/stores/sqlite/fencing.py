"""SQLite ``FencedOperations`` (tables from migrations 4 and 11), on the shared ``SqliteDatabase``.

Each fenced write is one operation of the database's group commit: the epoch check and the
ledger write share a transaction under SQLite's write lock, so a retirement committed by
another process is either seen (refused, nothing written) or happens after the write. The same
lock orders a completion and a declaration that the operation's outcome is unknown.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

from pausemesh.core.canonical import canonical_json
from pausemesh.core.errors import InvalidInputError, RuntimeNotCurrentError
from pausemesh.core.fencing import (
    Dispatch,
    Resolution,
    UnknownDeclaration,
    check_reply_in_time,
)
from pausemesh.core.operations import (
    EXECUTE,
    OperationBegin,
    OperationRecord,
    OutcomeUnknownWebhooks,
    begun,
    result_hash,
)
from pausemesh.core.push import OutboxEntry
from pausemesh.core.validation import check_id, check_reason
from pausemesh.stores.sqlite.database import SqliteDatabase
from pausemesh.stores.sqlite.epoch import epoch_us, from_epoch_us
from pausemesh.stores.sqlite.operations import (
    begin_in,
    complete_in,
    declare_unknown_in,
    select_operation,
    unknown_of,
)

__all__ = ("SqliteFencedOperations",)


def _epoch(conn: sqlite3.Connection, domain: str, worker: str) -> int | None:
    row = conn.execute(
        "SELECT epoch FROM gateway_workers WHERE domain = ? AND worker = ?", (domain, worker)
    ).fetchone()
    return None if row is None else int(row[0])


def _fence(conn: sqlite3.Connection, domain: str, worker: str, epoch: int) -> None:
    if _epoch(conn, domain, worker) != epoch:
        raise RuntimeNotCurrentError(worker)


def _declared(conn: sqlite3.Connection, operation_id: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM operation_unknowns WHERE operation_id = ?", (operation_id,)
    ).fetchone()
    return row is not None


class SqliteFencedOperations:
    def __init__(self, database: SqliteDatabase) -> None:
        self.database = database

    async def claim_worker(self, domain: str, worker: str, *, now: datetime) -> int:
        check_id(worker, "worker")

        def op(conn: sqlite3.Connection) -> int:
            # Each claim advances the epoch: an older process with this name is fenced.
            conn.execute(
                "INSERT INTO gateway_workers (domain, worker, epoch, updated_at_us)"
                " VALUES (?, ?, 1, ?) ON CONFLICT (domain, worker)"
                " DO UPDATE SET epoch = epoch + 1, updated_at_us = excluded.updated_at_us",
                (domain, worker, epoch_us(now)),
            )
            epoch = _epoch(conn, domain, worker)
            assert epoch is not None  # noqa: S101 - just written
            return epoch

        return await self.database.write(op)

    async def retire_worker(self, domain: str, worker: str, *, now: datetime) -> int:
        check_id(worker, "worker")

        def op(conn: sqlite3.Connection) -> int:
            conn.execute(
                "INSERT INTO gateway_workers (domain, worker, epoch, updated_at_us)"
                " VALUES (?, ?, 2, ?) ON CONFLICT (domain, worker)"
                " DO UPDATE SET epoch = epoch + 1, updated_at_us = excluded.updated_at_us",
                (domain, worker, epoch_us(now)),
            )
            epoch = _epoch(conn, domain, worker)
            assert epoch is not None  # noqa: S101 - just written
            return epoch

        return await self.database.write(op)

    async def worker_epoch(self, domain: str, worker: str) -> int | None:
        rows = await self.database.read(
            "SELECT epoch FROM gateway_workers WHERE domain = ? AND worker = ?", (domain, worker)
        )
        return int(rows[0][0]) if rows else None

    async def begin_fenced(
        self, wanted: OperationRecord, *, worker: str, epoch: int, job: str
    ) -> OperationBegin:
        domain, now = wanted.domain, wanted.attempted_at

        def op(conn: sqlite3.Connection) -> OperationBegin:
            _fence(conn, domain, worker, epoch)
            begun_now = begin_in(conn, wanted)
            if begun_now.decision == EXECUTE:
                conn.execute(
                    "INSERT INTO gateway_dispatches (operation_id, worker, epoch, job,"
                    " dispatched_at_us) VALUES (?, ?, ?, ?, ?)",
                    (wanted.operation_id, worker, epoch, job, epoch_us(now)),
                )
            return begun_now

        return await self.database.write(op)

    async def complete_fenced(
        self,
        operation_id: str,
        *,
        attempt_id: str,
        result: Any,
        worker: str,
        epoch: int,
        now: datetime,
        deadline: datetime,
    ) -> OperationRecord:
        digest = result_hash(result)
        result_json = canonical_json(result)

        def op(conn: sqlite3.Connection) -> OperationRecord:
            record = begun(operation_id, select_operation(conn, operation_id))
            _fence(conn, record.domain, worker, epoch)
            declared = not record.completed and _declared(conn, operation_id)
            check_reply_in_time(record, declared=declared, now=now, deadline=deadline)
            return complete_in(conn, operation_id, attempt_id, result_json, digest, now)

        return await self.database.write(op)

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
                conn, operation_id, declared_by, reason, now, webhooks, ledger=False
            )

        record, queued = await self.database.write(op)
        if webhooks is not None:
            webhooks.queued(queued)
        return record

    async def unknown_of(self, operation_id: str) -> UnknownDeclaration | None:
        return await unknown_of(self.database, operation_id)

    async def resolve(
        self, operation_id: str, *, result: Any, resolved_by: str, reason: str, now: datetime
    ) -> OperationRecord:
        check_id(resolved_by, "resolvedBy")
        if not check_reason(reason):
            msg = "a resolution needs a reason"
            raise InvalidInputError(msg, code="INVALID_REASON")
        digest = result_hash(result)
        result_json = canonical_json(result)

        def op(conn: sqlite3.Connection) -> OperationRecord:
            record = begun(operation_id, select_operation(conn, operation_id))
            if record.completed:
                msg = "the operation already has an outcome; only an unknown one can be resolved"
                raise InvalidInputError(
                    msg, code="OPERATION_NOT_UNKNOWN", operation_id=operation_id
                )
            completed = complete_in(conn, operation_id, record.attempt_id, result_json, digest, now)
            conn.execute(
                "INSERT INTO operation_resolutions (operation_id, resolved_by, reason,"
                " resolved_at_us) VALUES (?, ?, ?, ?)",
                (operation_id, resolved_by, reason, epoch_us(now)),
            )
            return completed

        return await self.database.write(op)

    async def dispatch_of(self, operation_id: str) -> Dispatch | None:
        rows = await self.database.read(
            "SELECT worker, epoch, job, dispatched_at_us FROM gateway_dispatches"
            " WHERE operation_id = ?",
            (operation_id,),
        )
        if not rows:
            return None
        worker, epoch, job, at = rows[0]
        return Dispatch(
            operation_id=operation_id,
            worker=worker,
            epoch=epoch,
            job=job,
            dispatched_at=from_epoch_us(at),
        )

    async def resolution_of(self, operation_id: str) -> Resolution | None:
        rows = await self.database.read(
            "SELECT resolved_by, reason, resolved_at_us FROM operation_resolutions"
            " WHERE operation_id = ?",
            (operation_id,),
        )
        if not rows:
            return None
        by, reason, at = rows[0]
        return Resolution(
            operation_id=operation_id, resolved_by=by, reason=reason, resolved_at=from_epoch_us(at)
        )
