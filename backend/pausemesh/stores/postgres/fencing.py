"""PostgreSQL ``FencedOperations`` (migrations ``gateway_fencing``, ``operation_unknowns``).

Each fenced write is one transaction that reads the worker's epoch ``FOR SHARE`` before it
writes: ``retire`` updates that row, so it waits for a fenced write in progress or makes the
write wait and then refuse — never both a retirement and a write by the retired epoch. A
completion and a declaration that the outcome is unknown both lock the operation's row
``FOR UPDATE`` first, so one of them sees the other: a reply is recorded, or refused after a
declaration, never both.
"""

# ruff: noqa: S608 - the only identifier put into SQL text is the validated, quoted schema name

from __future__ import annotations

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
    check_completion,
    decide,
    result_hash,
)
from pausemesh.core.validation import check_id, check_reason
from pausemesh.stores.postgres.database import Conn, PostgresDatabase
from pausemesh.stores.postgres.operations import (
    OPERATION_COLUMNS,
    UnknownDeclarations,
    operation_record,
)

__all__ = ("PostgresFencedOperations",)


class PostgresFencedOperations:
    def __init__(self, database: PostgresDatabase) -> None:
        self.database = database
        q = database.q
        self._sql_epoch = f"SELECT epoch FROM {q}.gateway_workers WHERE domain = $1 AND worker = $2"
        # Each claim advances the epoch: an older process with this name is fenced.
        self._sql_claim = f"""
            INSERT INTO {q}.gateway_workers AS w (domain, worker, epoch, updated_at)
            VALUES ($1, $2, 1, $3)
            ON CONFLICT (domain, worker) DO UPDATE SET epoch = w.epoch + 1, updated_at = $3
            RETURNING epoch
        """
        self._sql_retire = f"""
            INSERT INTO {q}.gateway_workers AS w (domain, worker, epoch, updated_at)
            VALUES ($1, $2, 2, $3)
            ON CONFLICT (domain, worker) DO UPDATE SET epoch = w.epoch + 1, updated_at = $3
            RETURNING epoch
        """
        self._sql_get = f"SELECT {OPERATION_COLUMNS} FROM {q}.operations WHERE operation_id = $1"
        self._sql_insert = f"""
            INSERT INTO {q}.operations (operation_id, domain, business_key, tool,
                                        arguments_json, terms_hash, attempt_id, attempted_at)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
            ON CONFLICT (operation_id) DO NOTHING RETURNING operation_id
        """
        self._sql_dispatch = f"""
            INSERT INTO {q}.gateway_dispatches (operation_id, worker, epoch, job, dispatched_at)
            VALUES ($1, $2, $3, $4, $5)
        """
        self._sql_complete = f"""
            UPDATE {q}.operations SET result_json = $3, result_hash = $4, completed_at = $5
            WHERE operation_id = $1 AND attempt_id = $2 AND result_hash IS NULL
            RETURNING {OPERATION_COLUMNS}
        """
        self._sql_resolution = f"""
            INSERT INTO {q}.operation_resolutions (operation_id, resolved_by, reason, resolved_at)
            VALUES ($1, $2, $3, $4)
        """
        self._sql_declared = f"SELECT 1 FROM {q}.operation_unknowns WHERE operation_id = $1"
        self._sql_dispatch_of = f"""
            SELECT worker, epoch, job, dispatched_at FROM {q}.gateway_dispatches
            WHERE operation_id = $1
        """
        self._sql_resolution_of = f"""
            SELECT resolved_by, reason, resolved_at FROM {q}.operation_resolutions
            WHERE operation_id = $1
        """
        self._unknowns = UnknownDeclarations(database)

    async def _fence(self, conn: Conn, domain: str, worker: str, epoch: int) -> None:
        current = await conn.fetchval(self._sql_epoch + " FOR SHARE", domain, worker)
        if current != epoch:
            raise RuntimeNotCurrentError(worker)

    async def _get(self, conn: Conn, operation_id: str) -> OperationRecord | None:
        row = await conn.fetchrow(self._sql_get, operation_id)
        return None if row is None else operation_record(row)

    async def _get_locked(self, conn: Conn, operation_id: str) -> OperationRecord:
        """The operation's row, locked until the transaction ends (completion vs declaration)."""
        row = await conn.fetchrow(self._sql_get + " FOR UPDATE", operation_id)
        return begun(operation_id, None if row is None else operation_record(row))

    async def claim_worker(self, domain: str, worker: str, *, now: datetime) -> int:
        check_id(worker, "worker")
        await self.database.ensure_schema()

        async def op(conn: Conn) -> int:
            epoch: int = await conn.fetchval(self._sql_claim, domain, worker, now)
            return epoch

        return await self.database.run(op)

    async def retire_worker(self, domain: str, worker: str, *, now: datetime) -> int:
        check_id(worker, "worker")
        await self.database.ensure_schema()

        async def op(conn: Conn) -> int:
            epoch: int = await conn.fetchval(self._sql_retire, domain, worker, now)
            return epoch

        return await self.database.run(op)

    async def worker_epoch(self, domain: str, worker: str) -> int | None:
        async def op(conn: Conn) -> int | None:
            epoch: int | None = await conn.fetchval(self._sql_epoch, domain, worker)
            return epoch

        return await self.database.run(op, read=True)

    async def begin_fenced(
        self, wanted: OperationRecord, *, worker: str, epoch: int, job: str
    ) -> OperationBegin:
        domain, now = wanted.domain, wanted.attempted_at
        await self.database.ensure_schema()

        async def op(conn: Conn) -> OperationBegin:
            async with conn.transaction():
                await self._fence(conn, domain, worker, epoch)
                inserted = await conn.fetchval(
                    self._sql_insert,
                    wanted.operation_id,
                    wanted.domain,
                    wanted.business_key,
                    wanted.tool,
                    canonical_json(wanted.arguments),
                    wanted.terms_hash,
                    wanted.attempt_id,
                    wanted.attempted_at,
                )
                if inserted is not None:
                    await conn.execute(
                        self._sql_dispatch, wanted.operation_id, worker, epoch, job, now
                    )
                    return OperationBegin(decision=EXECUTE, record=wanted)
                # Another caller's row is committed (the insert waited for it): decide on it.
                existing = await self._get(conn, wanted.operation_id)
                assert existing is not None  # noqa: S101 - rows are never deleted (trigger)
                return decide(existing, wanted)

        return await self.database.run(op)

    async def _complete(  # noqa: PLR0917 - the outcome and where it goes
        self,
        conn: Conn,
        record: OperationRecord,
        attempt_id: str,
        result: Any,
        digest: str,
        now: datetime,
    ) -> OperationRecord:
        if check_completion(record, attempt_id, digest):
            return record
        row = await conn.fetchrow(
            self._sql_complete,
            record.operation_id,
            attempt_id,
            canonical_json(result),
            digest,
            now,
        )
        if row is not None:
            return operation_record(row)
        latest = begun(record.operation_id, await self._get(conn, record.operation_id))
        check_completion(latest, attempt_id, digest)
        return latest

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
        await self.database.ensure_schema()

        async def op(conn: Conn) -> OperationRecord:
            async with conn.transaction():
                record = await self._get_locked(conn, operation_id)
                await self._fence(conn, record.domain, worker, epoch)
                declared = not record.completed and (
                    await conn.fetchval(self._sql_declared, operation_id) is not None
                )
                check_reply_in_time(record, declared=declared, now=now, deadline=deadline)
                return await self._complete(conn, record, attempt_id, result, digest, now)

        return await self.database.run(op)

    async def declare_unknown(
        self,
        operation_id: str,
        *,
        declared_by: str,
        reason: str,
        now: datetime,
        webhooks: OutcomeUnknownWebhooks | None = None,
    ) -> OperationRecord:
        return await self._unknowns.declare(
            operation_id, declared_by, reason, now, webhooks, ledger=False
        )

    async def unknown_of(self, operation_id: str) -> UnknownDeclaration | None:
        return await self._unknowns.unknown_of(operation_id)

    async def resolve(
        self, operation_id: str, *, result: Any, resolved_by: str, reason: str, now: datetime
    ) -> OperationRecord:
        check_id(resolved_by, "resolvedBy")
        if not check_reason(reason):
            msg = "a resolution needs a reason"
            raise InvalidInputError(msg, code="INVALID_REASON")
        digest = result_hash(result)
        await self.database.ensure_schema()

        async def op(conn: Conn) -> OperationRecord:
            async with conn.transaction():
                record = begun(operation_id, await self._get(conn, operation_id))
                if record.completed:
                    msg = (
                        "the operation already has an outcome; only an unknown one can be resolved"
                    )
                    raise InvalidInputError(
                        msg, code="OPERATION_NOT_UNKNOWN", operation_id=operation_id
                    )
                completed = await self._complete(
                    conn, record, record.attempt_id, result, digest, now
                )
                await conn.execute(self._sql_resolution, operation_id, resolved_by, reason, now)
                return completed

        return await self.database.run(op)

    async def dispatch_of(self, operation_id: str) -> Dispatch | None:
        row = await self.database.fetchrow(self._sql_dispatch_of, operation_id, read=True)
        if row is None:
            return None
        return Dispatch(
            operation_id=operation_id,
            worker=row[0],
            epoch=row[1],
            job=row[2],
            dispatched_at=row[3],
        )

    async def resolution_of(self, operation_id: str) -> Resolution | None:
        row = await self.database.fetchrow(self._sql_resolution_of, operation_id, read=True)
        if row is None:
            return None
        return Resolution(
            operation_id=operation_id, resolved_by=row[0], reason=row[1], resolved_at=row[2]
        )
