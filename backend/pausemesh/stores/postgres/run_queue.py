"""The PostgreSQL input queue (double texting, ``core/run_queue.py``), shared by every replica:
table ``agui_thread_queue`` (migration 30).

The runtime role deletes nothing: an entry taken off the queue is marked done and its input
cleared in the same UPDATE (the partial index keeps only waiting entries). ``enqueue`` counts
and inserts under a transaction-scoped advisory lock on the thread, so the bound holds when
replicas queue at once.
"""

# ruff: noqa: S608 - the only identifier put into SQL text is the validated, quoted schema name

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime
from typing import Any

import msgspec

from pausemesh.core.run_queue import QueuedInput, QueueSignal, queue_priority
from pausemesh.stores.postgres.database import Conn, PostgresDatabase

__all__ = ("PostgresRunQueue",)

_COLUMNS = (
    "position, entry_id, thread_id, kind, run_id, input_json, principal, roles_json,"
    " message_ids_json, after_sequence, queued_at"
)
# pg_advisory_xact_lock(key1, key2): "PMSQ" (a thread's queue) and the thread id's hash.
_LOCK = 0x504D5351
_ENCODE = msgspec.json.encode


def _entry(row: Any) -> QueuedInput:
    return QueuedInput(
        position=row["position"],
        entry_id=row["entry_id"],
        thread_id=row["thread_id"],
        kind=row["kind"],
        run_id=row["run_id"],
        input_json=row["input_json"],
        principal=row["principal"],
        roles=tuple(msgspec.json.decode(row["roles_json"])),
        message_ids=tuple(msgspec.json.decode(row["message_ids_json"])),
        after_sequence=row["after_sequence"],
        queued_at=row["queued_at"],
    )


class PostgresRunQueue:
    def __init__(self, database: PostgresDatabase) -> None:
        self.database = database
        q = database.q
        waiting = f"{q}.agui_thread_queue WHERE done_at IS NULL"
        self._sql_by_id = f"SELECT {_COLUMNS} FROM {q}.agui_thread_queue WHERE entry_id = $1"
        self._sql_count = f"SELECT count(*) FROM {waiting} AND thread_id = $1"
        self._sql_insert = f"""
            INSERT INTO {q}.agui_thread_queue (entry_id, thread_id, kind, priority, run_id,
                input_json, principal, roles_json, message_ids_json, after_sequence, queued_at)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
            RETURNING {_COLUMNS}
        """
        self._sql_head = f"""
            SELECT {_COLUMNS} FROM {waiting} AND thread_id = $1
            ORDER BY priority, position LIMIT 1
        """
        self._sql_contains = f"SELECT 1 FROM {waiting} AND thread_id = $1 AND entry_id = $2"
        self._sql_remove = f"""
            UPDATE {q}.agui_thread_queue SET done_at = $3, input_json = NULL
            WHERE done_at IS NULL AND thread_id = $1 AND ($2::TEXT IS NULL OR entry_id = $2)
        """
        self._sql_interrupting = f"""
            SELECT thread_id, entry_id, kind FROM {waiting}
              AND priority = 0 AND thread_id = ANY($1::TEXT[])
            ORDER BY priority, position
        """
        self._sql_threads = f"SELECT DISTINCT thread_id FROM {waiting} LIMIT $1"

    async def enqueue(self, entry: QueuedInput, *, limit: int) -> QueuedInput | None:
        async def op(conn: Conn) -> Any:
            async with conn.transaction():
                await conn.execute(
                    "SELECT pg_advisory_xact_lock($1, hashtext($2))", _LOCK, entry.thread_id
                )
                known = await conn.fetchrow(self._sql_by_id, entry.entry_id)
                if known is not None:
                    return known
                if await conn.fetchval(self._sql_count, entry.thread_id) >= limit:
                    return None
                return await conn.fetchrow(
                    self._sql_insert,
                    entry.entry_id,
                    entry.thread_id,
                    entry.kind,
                    queue_priority(entry.kind),
                    entry.run_id,
                    entry.input_json,
                    entry.principal,
                    _ENCODE(list(entry.roles)).decode(),
                    _ENCODE(list(entry.message_ids)).decode(),
                    entry.after_sequence,
                    entry.queued_at,
                )

        row = await self.database.run(op)
        return None if row is None else _entry(row)

    async def head(self, thread_id: str) -> QueuedInput | None:
        row = await self.database.fetchrow(self._sql_head, thread_id, read=True)
        return None if row is None else _entry(row)

    async def contains(self, thread_id: str, entry_id: str) -> bool:
        row = await self.database.fetchrow(self._sql_contains, thread_id, entry_id, read=True)
        return row is not None

    async def _done(self, thread_id: str, entry_id: str | None) -> int:
        async def op(conn: Conn) -> int:
            status = await conn.execute(self._sql_remove, thread_id, entry_id, datetime.now(UTC))
            return int(status.split()[-1])

        return await self.database.run(op)

    async def remove(self, thread_id: str, entry_id: str) -> None:
        await self._done(thread_id, entry_id)

    async def interrupting(self, thread_ids: Collection[str]) -> dict[str, list[QueueSignal]]:
        ids = list(thread_ids)
        if not ids:
            return {}

        async def op(conn: Conn) -> list[Any]:
            return list(await conn.fetch(self._sql_interrupting, ids))

        out: dict[str, list[QueueSignal]] = {}
        for row in await self.database.run(op, read=True):
            out.setdefault(row["thread_id"], []).append(
                QueueSignal(entry_id=row["entry_id"], kind=row["kind"])
            )
        return out

    async def waiting_threads(self, *, limit: int) -> list[str]:
        async def op(conn: Conn) -> list[Any]:
            return list(await conn.fetch(self._sql_threads, limit))

        return [row["thread_id"] for row in await self.database.run(op, read=True)]

    async def discard(self, thread_id: str) -> int:
        return await self._done(thread_id, None)

    async def close(self) -> None:
        """Nothing of its own: the pool closes with the storage."""
