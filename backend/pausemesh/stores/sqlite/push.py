"""SQLite push store (tables from migration ``a2a_push``) on the shared ``SqliteDatabase``.

``save_task`` runs the thread store's CAS update and the outbox insert in one write op, so
both commit together or not at all. One process owns a SQLite file, so the claim lease only
matters across that process's restarts: a claim left by a killed process lapses, then the
delivery is sent again under the same id.
"""

from __future__ import annotations

import sqlite3
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
from pausemesh.stores.sqlite.database import SqliteDatabase
from pausemesh.stores.sqlite.epoch import epoch_us, from_epoch_us
from pausemesh.stores.sqlite.threads import save_op

__all__ = ("SqlitePushStore",)


def _json(value: Any) -> str:
    return msgspec.json.encode(value).decode()


# What a claim would give up and take, chosen by a read off the writer (see ``claim``): due
# (scheduled at or before now, with no live lease)
# rows past their attempts; and the due rest oldest first, at most :per_key rows per task and
# per webhook URL (ranked over every due row), leaving out the URLs in :skip (resting).
_TO_GIVE_UP = (
    "SELECT delivery_id FROM a2a_push_deliveries WHERE channel = :channel"
    " AND next_attempt_at_us <= :now AND (lease_until_us IS NULL OR lease_until_us <= :now)"
    " AND attempts >= :max"
)
_TO_CLAIM = (
    "SELECT delivery_id FROM (SELECT delivery_id, next_attempt_at_us,"
    "   ROW_NUMBER() OVER (PARTITION BY task_id"
    "     ORDER BY next_attempt_at_us, delivery_id) AS by_task,"
    "   ROW_NUMBER() OVER (PARTITION BY json_extract(config_json, '$.url')"
    "     ORDER BY next_attempt_at_us, delivery_id) AS by_url"
    "   FROM a2a_push_deliveries WHERE channel = :channel AND next_attempt_at_us <= :now"
    "   AND (lease_until_us IS NULL OR lease_until_us <= :now)"
    "   AND json_extract(config_json, '$.url') NOT IN (SELECT value FROM json_each(:skip))"
    "   AND attempts < :max)"
    " WHERE by_task <= :per_key AND by_url <= :per_key"
    " ORDER BY next_attempt_at_us, delivery_id LIMIT :limit"
)
# The same choice among the first :prefix due rows only (each row's ranks count only rows
# before it, so they are its ranks over every due row): when that finds :limit rows, they are
# the claim's, without ranking a backlog of thousands behind them.
_TO_CLAIM_FIRST = (
    "SELECT delivery_id FROM (SELECT delivery_id, next_attempt_at_us,"
    "   ROW_NUMBER() OVER (PARTITION BY task_id"
    "     ORDER BY next_attempt_at_us, delivery_id) AS by_task,"
    "   ROW_NUMBER() OVER (PARTITION BY url ORDER BY next_attempt_at_us, delivery_id) AS by_url"
    "   FROM (SELECT delivery_id, task_id, next_attempt_at_us,"
    "     json_extract(config_json, '$.url') AS url"
    "     FROM a2a_push_deliveries WHERE channel = :channel AND next_attempt_at_us <= :now"
    "     AND (lease_until_us IS NULL OR lease_until_us <= :now)"
    "     AND json_extract(config_json, '$.url') NOT IN (SELECT value FROM json_each(:skip))"
    "     AND attempts < :max ORDER BY next_attempt_at_us, delivery_id LIMIT :prefix))"
    " WHERE by_task <= :per_key AND by_url <= :per_key"
    " ORDER BY next_attempt_at_us, delivery_id LIMIT :limit"
)
_PREFIX_PER_ROW = 20
# The write then takes those rows that are still what the read saw (due, unleased, within or
# past their attempts): a row another claim took meanwhile is left alone.
_GIVE_UP = (
    "UPDATE a2a_push_deliveries SET next_attempt_at_us = NULL, lease_holder = NULL,"
    " lease_until_us = NULL, last_error = COALESCE(last_error, :no_outcome)"
    " WHERE delivery_id IN (SELECT value FROM json_each(:give_up)) AND channel = :channel"
    " AND next_attempt_at_us <= :now AND (lease_until_us IS NULL OR lease_until_us <= :now)"
    " AND attempts >= :max RETURNING delivery_id, task_id, attempts, last_error"
)
_CLAIM = (
    "UPDATE a2a_push_deliveries SET lease_holder = :holder, lease_until_us = :lease,"
    " next_attempt_at_us = :lease, attempts = attempts + 1"
    " WHERE delivery_id IN (SELECT value FROM json_each(:take)) AND channel = :channel"
    " AND next_attempt_at_us <= :now AND (lease_until_us IS NULL OR lease_until_us <= :now)"
    " AND attempts < :max"
    " RETURNING delivery_id, task_id, config_json, payload_json, attempts, created_at_us, channel"
)
# When another claim took some of the chosen rows first (claims of one file at once): the
# choice again inside the write, for the rest of the limit.
_CLAIM_RANKED = _CLAIM.replace("SELECT value FROM json_each(:take)", _TO_CLAIM)


def _config(row: Any) -> PushConfigRecord:
    return PushConfigRecord(
        task_id=row[0], config_id=row[1], owner=row[2], config=msgspec.json.decode(row[3])
    )


class SqlitePushStore:
    def __init__(self, database: SqliteDatabase) -> None:
        self.database = database

    async def set_config(self, record: PushConfigRecord, *, now: datetime) -> None:
        at = epoch_us(now)

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO a2a_push_configs (task_id, config_id, owner, config_json,"
                " created_at_us) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (task_id, config_id) DO UPDATE SET owner = excluded.owner,"
                " config_json = excluded.config_json, created_at_us = excluded.created_at_us,"
                " retired_at_us = NULL",
                (record.task_id, record.config_id, record.owner, _json(record.config), at),
            )

        await self.database.write(op)

    async def configs(self, task_id: str, owner: str | None) -> list[PushConfigRecord]:
        rows = await self.database.read(
            "SELECT task_id, config_id, owner, config_json FROM a2a_push_configs"
            " WHERE task_id = ? AND owner IS ? AND retired_at_us IS NULL"
            " ORDER BY created_at_us, config_id",
            (task_id, owner),
        )
        return [_config(row) for row in rows]

    async def delete_config(
        self, task_id: str, owner: str | None, config_id: str | None, *, now: datetime
    ) -> None:
        sql = (
            "UPDATE a2a_push_configs SET retired_at_us = ?"
            " WHERE task_id = ? AND owner IS ? AND retired_at_us IS NULL"
        )
        params: list[Any] = [epoch_us(now), task_id, owner]
        if config_id is not None:
            sql += " AND config_id = ?"
            params.append(config_id)

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(sql, params)

        await self.database.write(op)

    async def save_task(
        self, record: ThreadRecord, *, now: datetime, notice: PushNotice | None
    ) -> ThreadRecord:
        save = save_op(record, now)
        at = epoch_us(now)

        def op(conn: sqlite3.Connection) -> ThreadRecord:
            saved = save(conn)
            if notice is None:
                return saved
            payload = _json(notice.payload)
            rows = conn.execute(
                "SELECT config_id, config_json FROM a2a_push_configs"
                " WHERE task_id = ? AND retired_at_us IS NULL",
                (notice.task_id,),
            ).fetchall()
            conn.executemany(
                "INSERT INTO a2a_push_deliveries (delivery_id, task_id, config_json,"
                " payload_json, created_at_us, next_attempt_at_us) VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT DO NOTHING",
                [
                    (delivery_id(notice.event_id, cid), notice.task_id, cfg, payload, at, at)
                    for cid, cfg in rows
                ],
            )
            return saved

        return await self.database.write(op)

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
        at = epoch_us(now)
        # A read first: an idle poll (the usual case) then costs no write transaction.
        due = await self.database.read(
            "SELECT 1 FROM a2a_push_deliveries WHERE channel = ? AND next_attempt_at_us <= ?"
            " AND (lease_until_us IS NULL OR lease_until_us <= ?) LIMIT 1",
            (channel, at, at),
        )
        if not due:
            return PushClaim(deliveries=[], given_up=[])
        params = {
            "now": at,
            "max": max_attempts,
            "per_key": per_key,
            "limit": limit,
            "channel": channel,
            "skip": msgspec.json.encode(list(skip_urls)).decode(),
        }

        def choose(conn: sqlite3.Connection) -> tuple[list[str], list[str]]:
            give_up = [row[0] for row in conn.execute(_TO_GIVE_UP, params)]
            first = {**params, "prefix": limit * _PREFIX_PER_ROW}
            take = [row[0] for row in conn.execute(_TO_CLAIM_FIRST, first)]
            if len(take) < limit:  # the first rows were not enough: rank them all
                take = [row[0] for row in conn.execute(_TO_CLAIM, params)]
            return give_up, take

        # The choice ranks every due row: with a backlog of thousands (a destination that is
        # down) that takes a good part of a second, so it is a read on a thread of its own,
        # and the write that takes the rows is as short as a create's, never holding the
        # group commit of the creates beside it.
        to_give_up, to_take = await self.database.read_large(choose)
        if not to_give_up and not to_take:
            return PushClaim(deliveries=[], given_up=[])
        writes = {
            **params,
            "holder": holder,
            "lease": epoch_us(lease_until),
            "no_outcome": NO_OUTCOME,
            "give_up": msgspec.json.encode(to_give_up).decode(),
            "take": msgspec.json.encode(to_take).decode(),
        }

        def op(conn: sqlite3.Connection) -> tuple[list[Any], list[Any]]:
            given_up = conn.execute(_GIVE_UP, writes).fetchall() if to_give_up else []
            rows = conn.execute(_CLAIM, writes).fetchall() if to_take else []
            if len(rows) < len(to_take):
                rows += conn.execute(_CLAIM_RANKED, {**writes, "limit": limit - len(rows)})
            return given_up, rows

        given_up, rows = await self.database.write(op)
        order = {delivery: n for n, delivery in enumerate(to_take)}
        rows.sort(key=lambda row: order.get(row[0], len(order)))  # oldest first, as chosen
        return PushClaim(
            deliveries=[
                PushDelivery(
                    delivery_id=row[0],
                    task_id=row[1],
                    config=msgspec.json.decode(row[2]),
                    payload=msgspec.json.decode(row[3]),
                    attempts=row[4],
                    created_at=from_epoch_us(row[5]),
                    channel=row[6],
                )
                for row in rows
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
        at = epoch_us(now)
        next_at = None if delivered or retry_at is None else epoch_us(retry_at)

        def op(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(
                "UPDATE a2a_push_deliveries SET next_attempt_at_us = ?, lease_holder = NULL,"
                " lease_until_us = NULL, delivered_at_us = ?, last_error = ?"
                " WHERE delivery_id = ? AND lease_holder = ? AND next_attempt_at_us IS NOT NULL",
                (next_at, at if delivered else None, error, delivery_id, holder),
            )
            return cursor.rowcount == 1

        return await self.database.write(op)

    async def delivery_state(self, delivery_id: str) -> PushDeliveryState | None:
        rows = await self.database.read(
            "SELECT attempts, CASE WHEN delivered_at_us IS NOT NULL THEN 'delivered'"
            " WHEN next_attempt_at_us IS NOT NULL THEN 'pending' ELSE 'failed' END, last_error"
            " FROM a2a_push_deliveries WHERE delivery_id = ?",
            (delivery_id,),
        )
        if not rows:
            return None
        return PushDeliveryState(attempts=rows[0][0], status=rows[0][1], last_error=rows[0][2])
