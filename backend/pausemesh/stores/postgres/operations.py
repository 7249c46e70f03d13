"""PostgreSQL operation ledger (table from migration ``operations``): at most once, any replica.

``begin`` inserts the attempt with ``ON CONFLICT DO NOTHING``: of any number of concurrent
first calls, on any replica, exactly one inserts and gets ``EXECUTE``; the others read the
committed row and ``decide``. ``complete`` writes the outcome once, fenced by the attempt id
(and by a write-once trigger in the database). ``declare_unknown`` writes the declaration
(``operation_unknowns``) and the webhooks it owes (``a2a_push_deliveries``) in one transaction
that holds the operation's row (``UnknownDeclarations``, shared with the gateway's fencing).
"""

# ruff: noqa: S608 - the only identifier put into SQL text is the validated, quoted schema name

from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import msgspec

from pausemesh.core.canonical import canonical_json
from pausemesh.core.errors import OperationConflictError, StoreError
from pausemesh.core.operations import (
    EXECUTE,
    RECOVERED,
    RESENT,
    OperationBegin,
    OperationRecord,
    OperationRecovery,
    OutcomeUnknownWebhooks,
    UnknownDeclaration,
    begun,
    check_completion,
    decide,
    new_attempt,
    result_hash,
)
from pausemesh.core.push import OutboxEntry
from pausemesh.core.validation import check_id
from pausemesh.stores.postgres.database import Conn, PostgresDatabase, SharedDatabaseStore

__all__ = (
    "OPERATION_COLUMNS",
    "PostgresOperationLedger",
    "UnknownDeclarations",
    "operation_record",
)

OPERATION_COLUMNS = (
    "operation_id, domain, business_key, tool, arguments_json, terms_hash, attempt_id,"
    " attempted_at, result_json, result_hash, completed_at"
)


def operation_record(row: Any) -> OperationRecord:
    try:
        arguments = msgspec.json.decode(row[4])
        result = None if row[8] is None else msgspec.json.decode(row[8])
    except msgspec.DecodeError:
        # ``decide`` would fail closed on mismatched digests too; this is earlier and clearer.
        msg = "stored operation does not decode"
        raise StoreError(msg, code="CORRUPT_STREAM") from None
    return OperationRecord(
        operation_id=row[0],
        domain=row[1],
        business_key=row[2],
        tool=row[3],
        arguments=arguments,
        terms_hash=row[5],
        attempt_id=row[6],
        attempted_at=row[7],
        result=result,
        result_hash=row[9],
        completed_at=row[10],
    )


class UnknownDeclarations:
    """Declarations that an operation's outcome is unknown, on one schema (the ledger's and the
    gateway fencing's ``declare_unknown``)."""

    def __init__(self, database: PostgresDatabase) -> None:
        self.database = database
        q = database.q
        # Locked until the transaction ends: a completion and a declaration serialise.
        self._sql_get_locked = (
            f"SELECT {OPERATION_COLUMNS} FROM {q}.operations WHERE operation_id = $1 FOR UPDATE"
        )
        self._sql_declare = f"""
            INSERT INTO {q}.operation_unknowns (operation_id, declared_by, reason, declared_at)
            VALUES ($1, $2, $3, $4) ON CONFLICT (operation_id) DO NOTHING RETURNING 1
        """
        self._sql_queue = f"""
            INSERT INTO {q}.a2a_push_deliveries (delivery_id, task_id, channel, config_json,
                payload_json, created_at, next_attempt_at)
            VALUES ($1, $2, $3, $4, $5, $6, $6) ON CONFLICT DO NOTHING
        """
        self._sql_unknown_of = f"""
            SELECT declared_by, reason, declared_at FROM {q}.operation_unknowns
            WHERE operation_id = $1
        """

    async def declare(
        self,
        operation_id: str,
        declared_by: str,
        reason: str,
        now: datetime,
        webhooks: OutcomeUnknownWebhooks | None,
        *,
        ledger: bool,
    ) -> OperationRecord:
        check_id(declared_by, "declaredBy")
        check_id(reason, "reason")
        await self.database.ensure_schema()
        encode = msgspec.json.encode

        async def op(conn: Conn) -> tuple[OperationRecord, list[OutboxEntry]]:
            async with conn.transaction():
                row = await conn.fetchrow(self._sql_get_locked, operation_id)
                record = begun(operation_id, None if row is None else operation_record(row))
                if record.completed:
                    return record, []
                declared = await conn.fetchval(
                    self._sql_declare, operation_id, declared_by, reason, now
                )
                if declared is None or webhooks is None:
                    return record, []
                entries = webhooks.for_unknown_outcome(
                    record, declared_by=declared_by, reason=reason, since=now, ledger=ledger
                )
                rows = [
                    (
                        entry.delivery_id,
                        entry.task_id,
                        entry.channel,
                        encode(entry.config).decode(),
                        encode(entry.payload).decode(),
                        now,
                    )
                    for entry in entries
                ]
                await conn.executemany(self._sql_queue, rows)
                return record, entries

        record, queued = await self.database.run(op)
        if webhooks is not None:
            webhooks.queued(queued)
        return record

    async def unknown_of(self, operation_id: str) -> UnknownDeclaration | None:
        row = await self.database.fetchrow(self._sql_unknown_of, operation_id, read=True)
        if row is None:
            return None
        return UnknownDeclaration(
            operation_id=operation_id, declared_by=row[0], reason=row[1], declared_at=row[2]
        )


class PostgresOperationLedger(SharedDatabaseStore):
    def __init__(
        self,
        database: PostgresDatabase,
        *,
        owns_database: bool = False,
        readiness_checked_elsewhere: bool = False,
    ) -> None:
        super().__init__(
            database,
            owns_database=owns_database,
            readiness_checked_elsewhere=readiness_checked_elsewhere,
        )
        q = database.q
        self._sql_insert = f"""
            INSERT INTO {q}.operations (operation_id, domain, business_key, tool,
                                        arguments_json, terms_hash, attempt_id, attempted_at)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
            ON CONFLICT (operation_id) DO NOTHING RETURNING operation_id
        """
        self._sql_get = f"SELECT {OPERATION_COLUMNS} FROM {q}.operations WHERE operation_id = $1"
        self._sql_complete = f"""
            UPDATE {q}.operations SET result_json = $3, result_hash = $4, completed_at = $5
            WHERE operation_id = $1 AND attempt_id = $2 AND result_hash IS NULL
            RETURNING {OPERATION_COLUMNS}
        """
        # The audit row only when the recorded outcome is this very result.
        self._sql_audit_recovered = f"""
            INSERT INTO {q}.operation_recoveries (operation_id, step, recorded_at)
            SELECT $1, '{RECOVERED}', $3 FROM {q}.operations
            WHERE operation_id = $1 AND result_hash = $2
            ON CONFLICT DO NOTHING
        """
        # Only the next number (never a gap), and each number once (the primary key): a
        # claim read from an audit older than another claim records nothing.
        self._sql_claim_resend = f"""
            INSERT INTO {q}.operation_recoveries (operation_id, step, number, recorded_at)
            SELECT $1, '{RESENT}', $3, $4 FROM {q}.operations
            WHERE operation_id = $1 AND attempt_id = $2
              AND (SELECT count(*) FROM {q}.operation_recoveries
                   WHERE operation_id = $1 AND step = '{RESENT}') = $3 - 1
            ON CONFLICT DO NOTHING RETURNING operation_id
        """
        self._sql_recoveries = f"""
            SELECT operation_id, step, recorded_at, number FROM {q}.operation_recoveries
            WHERE operation_id = $1 ORDER BY position
        """
        self._sql_list = f"""
            SELECT {OPERATION_COLUMNS} FROM {q}.operations WHERE domain = $1 ORDER BY position LIMIT $2
        """
        self._unknowns = UnknownDeclarations(database)

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
        existing = await self.get(wanted.operation_id)
        if existing is not None:
            return decide(existing, wanted)
        await self.database.ensure_schema()
        inserted = await self.database.fetchrow(
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
            return OperationBegin(decision=EXECUTE, record=wanted)
        # Another caller inserted first; its row is committed and visible to this statement.
        existing = await self.get(wanted.operation_id)
        assert existing is not None  # noqa: S101 - rows are never deleted (trigger)
        return decide(existing, wanted)

    async def complete(
        self, operation_id: str, *, attempt_id: str, result: Any, now: datetime
    ) -> OperationRecord:
        digest = result_hash(result)
        record = begun(operation_id, await self.get(operation_id))
        if check_completion(record, attempt_id, digest):
            return record
        await self.database.ensure_schema()
        row = await self.database.fetchrow(
            self._sql_complete, operation_id, attempt_id, canonical_json(result), digest, now
        )
        if row is not None:
            return operation_record(row)
        # A concurrent complete won: the same outcome is fine, another one conflicts.
        record = begun(operation_id, await self.get(operation_id))
        check_completion(record, attempt_id, digest)
        return record

    async def recover(
        self, operation_id: str, *, attempt_id: str, result: Any, now: datetime
    ) -> OperationRecord:
        digest = result_hash(result)
        record = begun(operation_id, await self.get(operation_id))
        done = check_completion(record, attempt_id, digest)
        await self.database.ensure_schema()
        result_json = canonical_json(result)

        async def op(conn: Conn) -> Any:
            async with conn.transaction():
                row = None
                if not done:
                    row = await conn.fetchrow(
                        self._sql_complete, operation_id, attempt_id, result_json, digest, now
                    )
                await conn.execute(self._sql_audit_recovered, operation_id, digest, now)
                return row

        row = await self.database.run(op)
        if row is not None:
            return operation_record(row)
        record = begun(operation_id, await self.get(operation_id))
        check_completion(record, attempt_id, digest)
        return record

    async def claim_resend(
        self, operation_id: str, *, attempt_id: str, number: int, now: datetime
    ) -> bool:
        record = begun(operation_id, await self.get(operation_id))
        if record.attempt_id != attempt_id:
            raise OperationConflictError(operation_id)
        await self.database.ensure_schema()
        row = await self.database.fetchrow(
            self._sql_claim_resend, operation_id, attempt_id, number, now
        )
        return row is not None

    async def recoveries(self, operation_id: str) -> Sequence[OperationRecovery]:
        async def op(conn: Conn) -> builtins.list[Any]:
            return builtins.list(await conn.fetch(self._sql_recoveries, operation_id))

        return [
            OperationRecovery(operation_id=r[0], step=r[1], recorded_at=r[2], number=r[3])
            for r in await self.database.run(op, read=True)
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
        return await self._unknowns.declare(
            operation_id, declared_by, reason, now, webhooks, ledger=True
        )

    async def unknown_of(self, operation_id: str) -> UnknownDeclaration | None:
        return await self._unknowns.unknown_of(operation_id)

    async def get(self, operation_id: str) -> OperationRecord | None:
        row = await self.database.fetchrow(self._sql_get, operation_id, read=True)
        return None if row is None else operation_record(row)

    async def list(self, domain: str, *, limit: int = 100) -> Sequence[OperationRecord]:
        async def op(conn: Conn) -> builtins.list[Any]:
            return builtins.list(await conn.fetch(self._sql_list, domain, max(limit, 0)))

        return [operation_record(row) for row in await self.database.run(op, read=True)]
