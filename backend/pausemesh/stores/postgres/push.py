"""PostgreSQL push store (tables from migration ``a2a_push``), shared by every replica.

``save_task`` runs the thread CAS update and the outbox insert in one transaction. ``claim``
leases due rows with ``FOR UPDATE SKIP LOCKED``, so two replicas polling at once never take
the same delivery; a lease left by a dead replica lapses and the row is taken again.
"""

# ruff: noqa: S608 - the only identifier put into SQL text is the validated, quoted schema name

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import msgspec

from pausemesh.core.push import (
    A2A_CHANNEL,
    NO_OUTCOME,
    PushClaim,
    PushConfigRecord,
    PushDelivery,
    PushDeliveryState,
    PushFailure,
    PushNotice,
    delivery_id,
)
from pausemesh.core.threads import ThreadRecord
from pausemesh.stores.postgres.database import Conn, PostgresDatabase
from pausemesh.stores.postgres.threads import PostgresThreadStore

__all__ = ("PostgresPushStore",)


def _json(value: Any) -> str:
    return msgspec.json.encode(value).decode()


class PostgresPushStore:
    def __init__(self, database: PostgresDatabase, threads: PostgresThreadStore) -> None:
        self.database = database
        self._threads = threads
        q = database.q
        self._sql_set = f"""
            INSERT INTO {q}.a2a_push_configs (task_id, config_id, owner, config_json, created_at)
            VALUES ($1, $2, $3, $4, $5)
            ON CONFLICT (task_id, config_id) DO UPDATE SET owner = excluded.owner,
                config_json = excluded.config_json, created_at = excluded.created_at,
                retired_at = NULL
        """
        self._sql_configs = f"""
            SELECT task_id, config_id, owner, config_json FROM {q}.a2a_push_configs
            WHERE task_id = $1 AND owner IS NOT DISTINCT FROM $2 AND retired_at IS NULL
            ORDER BY created_at, config_id
        """
        self._sql_retire = f"""
            UPDATE {q}.a2a_push_configs SET retired_at = $4
            WHERE task_id = $1 AND owner IS NOT DISTINCT FROM $2 AND retired_at IS NULL
              AND ($3::TEXT IS NULL OR config_id = $3)
        """
        self._sql_live = f"""
            SELECT config_id, config_json FROM {q}.a2a_push_configs
            WHERE task_id = $1 AND retired_at IS NULL
        """
        self._sql_queue = f"""
            INSERT INTO {q}.a2a_push_deliveries (delivery_id, task_id, config_json, payload_json,
                                                 created_at, next_attempt_at)
            VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT DO NOTHING
        """
        due = "next_attempt_at <= $1 AND (lease_until IS NULL OR lease_until <= $1)"
        self._sql_give_up = f"""
            UPDATE {q}.a2a_push_deliveries SET next_attempt_at = NULL, lease_holder = NULL,
                lease_until = NULL, last_error = COALESCE(last_error, $3)
            WHERE channel = $4 AND {due} AND attempts >= $2
            RETURNING delivery_id, task_id, attempts, last_error
        """
        # Oldest first, at most $6 rows per task and per webhook URL (ranked over every due
        # row); rows another replica is claiming right now are skipped, not waited for.
        self._sql_claim = f"""
            UPDATE {q}.a2a_push_deliveries d SET lease_holder = $2, lease_until = $3,
                next_attempt_at = $3, attempts = d.attempts + 1
            WHERE d.delivery_id IN (
                SELECT c.delivery_id FROM {q}.a2a_push_deliveries c JOIN (
                    SELECT delivery_id, next_attempt_at FROM (
                        SELECT delivery_id, next_attempt_at,
                            ROW_NUMBER() OVER (PARTITION BY task_id
                                ORDER BY next_attempt_at, delivery_id COLLATE "C") AS by_task,
                            ROW_NUMBER() OVER (PARTITION BY config_json::json ->> 'url'
                                ORDER BY next_attempt_at, delivery_id COLLATE "C") AS by_url
                        FROM {q}.a2a_push_deliveries
                        WHERE channel = $7 AND {due} AND attempts < $5
                            AND (config_json::json ->> 'url') <> ALL($8::text[])
                    ) ranked WHERE by_task <= $6 AND by_url <= $6
                    ORDER BY next_attempt_at, delivery_id COLLATE "C" LIMIT $4
                ) fair USING (delivery_id)
                FOR UPDATE OF c SKIP LOCKED)
              AND d.next_attempt_at <= $1 AND (d.lease_until IS NULL OR d.lease_until <= $1)
            RETURNING d.delivery_id, d.task_id, d.config_json, d.payload_json, d.attempts,
                d.created_at, d.channel
        """
        self._sql_settle = f"""
            UPDATE {q}.a2a_push_deliveries SET next_attempt_at = $3, lease_holder = NULL,
                lease_until = NULL, delivered_at = $4, last_error = $5
            WHERE delivery_id = $1 AND lease_holder = $2 AND next_attempt_at IS NOT NULL
        """
        self._sql_state = f"""
            SELECT attempts, CASE WHEN delivered_at IS NOT NULL THEN 'delivered'
                WHEN next_attempt_at IS NOT NULL THEN 'pending' ELSE 'failed' END, last_error
            FROM {q}.a2a_push_deliveries WHERE delivery_id = $1
        """

    async def set_config(self, record: PushConfigRecord, *, now: datetime) -> None:
        await self.database.ensure_schema()
        args = (record.task_id, record.config_id, record.owner, _json(record.config), now)

        async def op(conn: Conn) -> None:
            await conn.execute(self._sql_set, *args)

        await self.database.run(op)

    async def configs(self, task_id: str, owner: str | None) -> list[PushConfigRecord]:
        async def op(conn: Conn) -> list[Any]:
            return list(await conn.fetch(self._sql_configs, task_id, owner))

        rows = await self.database.run(op, read=True)
        return [
            PushConfigRecord(
                task_id=r[0], config_id=r[1], owner=r[2], config=msgspec.json.decode(r[3])
            )
            for r in rows
        ]

    async def delete_config(
        self, task_id: str, owner: str | None, config_id: str | None, *, now: datetime
    ) -> None:
        async def op(conn: Conn) -> None:
            await conn.execute(self._sql_retire, task_id, owner, config_id, now)

        await self.database.run(op)

    async def save_task(
        self, record: ThreadRecord, *, now: datetime, notice: PushNotice | None
    ) -> ThreadRecord:
        if notice is None:
            return await self._threads.save(record, now=now)
        await self.database.ensure_schema()
        payload = _json(notice.payload)

        async def op(conn: Conn) -> ThreadRecord:
            async with conn.transaction():
                saved = await self._threads.save_on(conn, record, now=now)
                rows = await conn.fetch(self._sql_live, notice.task_id)
                if rows:
                    await conn.executemany(
                        self._sql_queue,
                        [
                            (delivery_id(notice.event_id, r[0]), notice.task_id, r[1], payload, now)
                            for r in rows
                        ],
                    )
                return saved

        return await self.database.run(op)

    async def claim(
        self,
        *,
        now: datetime,
        holder: str,
        lease_until: datetime,
        limit: int,
        max_attempts: int,
        per_key: int,
        channel: str = A2A_CHANNEL,
        skip_urls: Sequence[str] = (),
    ) -> PushClaim:
        async def op(conn: Conn) -> tuple[list[Any], list[Any]]:
            async with conn.transaction():
                given_up = await conn.fetch(
                    self._sql_give_up, now, max_attempts, NO_OUTCOME, channel
                )
                rows = await conn.fetch(
                    self._sql_claim,
                    now,
                    holder,
                    lease_until,
                    limit,
                    max_attempts,
                    per_key,
                    channel,
                    list(skip_urls),
                )
                return list(given_up), list(rows)

        given_up, rows = await self.database.run(op)
        return PushClaim(
            deliveries=[
                PushDelivery(
                    delivery_id=r[0],
                    task_id=r[1],
                    config=msgspec.json.decode(r[2]),
                    payload=msgspec.json.decode(r[3]),
                    attempts=r[4],
                    created_at=r[5],
                    channel=r[6],
                )
                for r in rows
            ],
            given_up=[
                PushFailure(delivery_id=r[0], task_id=r[1], attempts=r[2], error=r[3])
                for r in given_up
            ],
        )

    async def settle(
        self,
        delivery_id: str,
        *,
        holder: str,
        now: datetime,
        delivered: bool,
        retry_at: datetime | None,
        error: str | None,
    ) -> bool:
        next_at = None if delivered else retry_at

        async def op(conn: Conn) -> str:
            status: str = await conn.execute(
                self._sql_settle,
                delivery_id,
                holder,
                next_at,
                now if delivered else None,
                error,
            )
            return status

        return (await self.database.run(op)).endswith(" 1")

    async def delivery_state(self, delivery_id: str) -> PushDeliveryState | None:
        async def op(conn: Conn) -> Any:
            return await conn.fetchrow(self._sql_state, delivery_id)

        row = await self.database.run(op, read=True)
        if row is None:
            return None
        return PushDeliveryState(attempts=row[0], status=row[1], last_error=row[2])
