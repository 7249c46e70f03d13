"""The PostgreSQL event store (asyncpg), for several app replicas on one database.

Appends are a compare-and-swap through a stream-head row, written with the events in one
statement (one transaction, one round trip): the head moves from ``expected`` to
``expected + n`` or the statement inserts nothing. Concurrent appends of one replica share the
pool's connections, and the server groups their commits into shared WAL flushes.
"""

# ruff: noqa: S608 - the only identifier put into SQL text is the validated, quoted schema name

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import msgspec

from pausemesh.core.approvers import Approver
from pausemesh.core.errors import StoreError, VersionConflictError
from pausemesh.core.model import ContinuationEvent
from pausemesh.core.push import OutboxEntry
from pausemesh.stores.batch import (
    MAX_EVENTS_PER_STREAM,
    approver_index_keys,
    batch_approvers,
    batch_due,
    batch_owed_thread,
    check_batch,
    decode_stream,
)
from pausemesh.stores.postgres.database import Conn, PostgresDatabase
from pausemesh.stores.postgres.schema import DEFAULT_SCHEMA

__all__ = ("PostgresEventStore", "open_postgres_store")


class PostgresEventStore:
    """``EventStore`` over a ``PostgresDatabase``; it may share the database with other stores."""

    def __init__(
        self,
        database: PostgresDatabase,
        *,
        owns_database: bool = True,
    ) -> None:
        self.database = database
        self._owns_database = owns_database
        # The same cap as every store (check_batch enforces it on append).
        self._limit = MAX_EVENTS_PER_STREAM
        q = database.q
        self._sql_load = f"""
            SELECT s.version, e.version, e.event_json
            FROM {q}.continuation_streams s
            LEFT JOIN LATERAL (
                SELECT version, event_json FROM {q}.continuation_events ev
                WHERE ev.continuation_id = s.continuation_id
                ORDER BY version LIMIT $2
            ) e ON TRUE
            WHERE s.continuation_id = $1
            ORDER BY e.version
        """
        self._sql_head = f"SELECT version FROM {q}.continuation_streams WHERE continuation_id = $1"
        insert_events = f"""
            ins AS (
                INSERT INTO {q}.continuation_events (continuation_id, version, event_json)
                SELECT head.continuation_id, u.version, u.event_json
                FROM head, unnest($4::bigint[], $5::text[]) AS u (version, event_json)
                RETURNING 1
            )
            SELECT count(*) FROM ins
        """
        # The head row is the fence: 0 rows from it means another writer won; then the
        # events insert selects nothing, all in the same statement.
        create_head = f"""
            WITH head AS (
                INSERT INTO {q}.continuation_streams (continuation_id, version, pending_expires_at)
                VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING continuation_id
            ), appr AS (
                INSERT INTO {q}.continuation_approvers (approver, continuation_id)
                SELECT a, head.continuation_id FROM head, unnest($6::text[]) AS a
            ),"""
        advance_head = f"""
            WITH head AS (
                UPDATE {q}.continuation_streams SET version = $2, pending_expires_at = $3,
                    owed_thread = coalesce($7, owed_thread)
                WHERE continuation_id = $1 AND version = $6 RETURNING continuation_id
            ), appr AS (
                INSERT INTO {q}.continuation_approvers (approver, continuation_id)
                SELECT a, head.continuation_id FROM head, unnest($8::text[]) AS a
                ON CONFLICT DO NOTHING
            ),"""
        self._sql_create = f"{create_head} {insert_events}"
        self._sql_advance = f"{advance_head} {insert_events}"
        # The same, queueing outbox deliveries (webhooks) in the same statement, only when the
        # head row was written: the state change and its deliveries commit together.
        self._sql_create_boxed = f"{create_head} {_outbox_cte(q, 7)}, {insert_events}"
        self._sql_advance_boxed = f"{advance_head} {_outbox_cte(q, 9)}, {insert_events}"
        # Pending, whatever its next due time: a due timer not yet fired keeps it listed.
        self._sql_approvals = f"""
            SELECT DISTINCT a.continuation_id FROM {q}.continuation_approvers a
            JOIN {q}.continuation_streams s ON s.continuation_id = a.continuation_id
            WHERE a.approver = ANY($1::text[]) AND s.pending_expires_at IS NOT NULL
                AND ($2::text IS NULL OR a.continuation_id < $2)
            ORDER BY a.continuation_id DESC LIMIT $3
        """
        self._sql_owed = f"""
            SELECT continuation_id, owed_thread FROM {q}.continuation_streams
            WHERE owed_thread IS NOT NULL ORDER BY continuation_id LIMIT $1
        """
        self._sql_settle = f"""
            UPDATE {q}.continuation_streams SET owed_thread = NULL
            WHERE continuation_id = ANY($1::text[]) AND owed_thread IS NOT NULL
        """
        self._sql_erase = f"SELECT {q}.pausemesh_erase_continuations($1, $2, $3)"
        self._sql_due = f"""
            SELECT continuation_id FROM {q}.continuation_streams
            WHERE pending_expires_at IS NOT NULL AND pending_expires_at <= $1
            ORDER BY pending_expires_at LIMIT $2
        """

    async def load(self, continuation_id: str) -> Sequence[ContinuationEvent]:
        async def op(conn: Conn) -> list[Any]:
            return list(await conn.fetch(self._sql_load, continuation_id, self._limit + 1))

        rows = await self.database.run(op, read=True)
        if not rows:
            return []
        head = rows[0][0]
        if head > self._limit or len(rows) > self._limit:
            msg = f"a stream holds at most {self._limit} events"
            raise StoreError(msg, code="STREAM_TOO_LARGE")
        if head < 1 or len(rows) != head or rows[0][1] is None:
            msg = "stored stream disagrees with its head"
            raise StoreError(msg, code="CORRUPT_STREAM")
        if any(row[1] != index + 1 for index, row in enumerate(rows)):
            msg = "stored stream has a gap or a foreign event"
            raise StoreError(msg, code="CORRUPT_STREAM")
        return decode_stream(continuation_id, [row[2] for row in rows])

    async def _head(self, continuation_id: str) -> int:
        async def op(conn: Conn) -> int:
            value = await conn.fetchval(self._sql_head, continuation_id)
            return 0 if value is None else int(value)

        return await self.database.run(op, read=True)

    async def append(
        self,
        continuation_id: str,
        expected_version: int,
        events: Sequence[ContinuationEvent],
        *,
        outbox: Sequence[OutboxEntry] = (),
    ) -> None:
        encoded = check_batch(continuation_id, expected_version, events)
        if not encoded:
            actual = await self._head(continuation_id)
            if actual != expected_version:
                raise VersionConflictError(continuation_id, expected_version, actual)
            return
        await self.database.ensure_schema()
        new_version = expected_version + len(encoded)
        first = events[0]
        deadline = batch_due(events)
        versions = list(range(expected_version + 1, new_version + 1))
        texts = [snapshot.decode() for snapshot in encoded]
        if expected_version == 0:
            sql = self._sql_create
            approvers = batch_approvers(events)
            args: tuple[Any, ...] = (
                continuation_id,
                new_version,
                deadline,
                versions,
                texts,
                approvers,
            )
        else:
            sql = self._sql_advance
            owed = batch_owed_thread(events)
            args = (
                continuation_id,
                new_version,
                deadline,
                versions,
                texts,
                expected_version,
                owed,
                batch_approvers(events),  # an escalation's
            )

        if outbox:
            sql = self._sql_create_boxed if expected_version == 0 else self._sql_advance_boxed
            args = (*args, *_outbox_args(outbox), first.occurred_at)

        async def op(conn: Conn) -> int:
            return int(await conn.fetchval(sql, *args))

        written = await self.database.run(op)
        if written == len(encoded):
            return
        if written == 0:
            raise VersionConflictError(
                continuation_id, expected_version, await self._head(continuation_id)
            )
        msg = "stored stream disagrees with its head"
        raise StoreError(msg, code="CORRUPT_STREAM")

    async def list_due(self, now: datetime, limit: int) -> Sequence[str]:
        async def op(conn: Conn) -> list[str]:
            return [row[0] for row in await conn.fetch(self._sql_due, now, limit)]

        return await self.database.run(op, read=True)

    async def pending_for_approvers(
        self, approvers: Sequence[Approver], *, before: str | None, limit: int
    ) -> Sequence[str]:
        if not approvers:
            return []
        keys = approver_index_keys(approvers)

        async def op(conn: Conn) -> list[str]:
            rows = await conn.fetch(self._sql_approvals, keys, before, limit)
            return [row[0] for row in rows]

        return await self.database.run(op, read=True)

    async def erase_correlated(
        self, correlation_id: str, *, owner: str | None, now: datetime
    ) -> int:
        await self.database.ensure_schema()

        async def op(conn: Conn) -> int:
            return int(await conn.fetchval(self._sql_erase, correlation_id, owner, now))

        return await self.database.run(op)

    async def owed_runs(self, *, limit: int) -> Sequence[tuple[str, str]]:
        async def op(conn: Conn) -> list[tuple[str, str]]:
            return [(row[0], row[1]) for row in await conn.fetch(self._sql_owed, limit)]

        return await self.database.run(op, read=True)

    async def settle_owed(self, continuation_ids: Sequence[str]) -> None:
        ids = list(continuation_ids)
        if not ids:
            return

        async def op(conn: Conn) -> None:
            await conn.execute(self._sql_settle, ids)

        await self.database.run(op)

    async def check_readiness(self) -> None:
        await self.database.check_readiness()

    async def close(self) -> None:
        if self._owns_database:
            await self.database.close()


async def open_postgres_store(
    dsn: str, *, schema: str = DEFAULT_SCHEMA, max_size: int = 16
) -> PostgresEventStore:
    """Connect (owning the pool), check the migration, and return the event store."""
    database = await PostgresDatabase.connect(dsn, schema=schema, max_size=max_size)
    try:
        await database.check_migrations()
    except BaseException:
        await database.close()
        raise
    return PostgresEventStore(database)


def _outbox_cte(q: str, first: int) -> str:
    """A CTE queueing the outbox rows given as five arrays from parameter ``first`` (ids, keys,
    channels, configs, payloads) and their time after them, once per written head."""
    n = [f"${first + i}" for i in range(6)]
    return f"""box AS (
                INSERT INTO {q}.a2a_push_deliveries (delivery_id, task_id, channel, config_json,
                    payload_json, created_at, next_attempt_at)
                SELECT o.delivery_id, o.task_id, o.channel, o.config_json, o.payload_json,
                    {n[5]}, {n[5]}
                FROM head, unnest({n[0]}::text[], {n[1]}::text[], {n[2]}::text[],
                    {n[3]}::text[], {n[4]}::text[])
                    AS o (delivery_id, task_id, channel, config_json, payload_json)
                ON CONFLICT DO NOTHING
            )"""


def _outbox_args(outbox: Sequence[OutboxEntry]) -> tuple[list[str], ...]:
    encode = msgspec.json.encode
    return (
        [entry.delivery_id for entry in outbox],
        [entry.task_id for entry in outbox],
        [entry.channel for entry in outbox],
        [encode(entry.config).decode() for entry in outbox],
        [encode(entry.payload).decode() for entry in outbox],
    )
