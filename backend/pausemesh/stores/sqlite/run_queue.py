# ruff: noqa: S608 - SQL text is built from constants only; values are always parameters

"""The SQLite input queue (double texting, ``core/run_queue.py``): table ``agui_thread_queue``
(migration 30), on the process's one database file, written through its group writer."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection
from typing import Any

import msgspec

from pausemesh.core.run_queue import QueuedInput, QueueSignal, queue_priority
from pausemesh.stores.sqlite.database import SqliteDatabase
from pausemesh.stores.sqlite.epoch import epoch_us, from_epoch_us

__all__ = ("SqliteRunQueue",)

_COLUMNS = (
    "position, entry_id, thread_id, kind, run_id, input_json, principal, roles_json,"
    " message_ids_json, after_sequence, queued_at_us"
)
_ORDER = "ORDER BY priority, position"
_HEAD = f"SELECT {_COLUMNS} FROM agui_thread_queue WHERE thread_id = ? {_ORDER} LIMIT 1"
_BY_ID = f"SELECT {_COLUMNS} FROM agui_thread_queue WHERE entry_id = ?"
_ENCODE = msgspec.json.encode


def _entry(row: sqlite3.Row | tuple[Any, ...]) -> QueuedInput:
    return QueuedInput(
        position=row[0],
        entry_id=row[1],
        thread_id=row[2],
        kind=row[3],
        run_id=row[4],
        input_json=row[5],
        principal=row[6],
        roles=tuple(msgspec.json.decode(row[7])),
        message_ids=tuple(msgspec.json.decode(row[8])),
        after_sequence=row[9],
        queued_at=from_epoch_us(row[10]),
    )


class SqliteRunQueue:
    def __init__(self, database: SqliteDatabase) -> None:
        self.database = database

    async def enqueue(self, entry: QueuedInput, *, limit: int) -> QueuedInput | None:
        def op(conn: sqlite3.Connection) -> tuple[Any, ...] | None:
            known = conn.execute(_BY_ID, (entry.entry_id,)).fetchone()
            if known is not None:
                return tuple(known)
            (waiting,) = conn.execute(
                "SELECT count(*) FROM agui_thread_queue WHERE thread_id = ?", (entry.thread_id,)
            ).fetchone()
            if waiting >= limit:
                return None
            conn.execute(
                "INSERT INTO agui_thread_queue (entry_id, thread_id, kind, priority, run_id,"
                " input_json, principal, roles_json, message_ids_json, after_sequence,"
                " queued_at_us) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
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
                    epoch_us(entry.queued_at),
                ),
            )
            return tuple(conn.execute(_BY_ID, (entry.entry_id,)).fetchone())

        row = await self.database.write(op)
        return None if row is None else _entry(row)

    async def head(self, thread_id: str) -> QueuedInput | None:
        rows = await self.database.read(_HEAD, (thread_id,))
        return _entry(rows[0]) if rows else None

    async def contains(self, thread_id: str, entry_id: str) -> bool:
        rows = await self.database.read(
            "SELECT 1 FROM agui_thread_queue WHERE thread_id = ? AND entry_id = ?",
            (thread_id, entry_id),
        )
        return bool(rows)

    async def remove(self, thread_id: str, entry_id: str) -> None:
        await self.database.write(
            lambda conn: conn.execute(
                "DELETE FROM agui_thread_queue WHERE thread_id = ? AND entry_id = ?",
                (thread_id, entry_id),
            )
        )

    async def interrupting(self, thread_ids: Collection[str]) -> dict[str, list[QueueSignal]]:
        ids = list(thread_ids)
        if not ids:
            return {}
        marks = ", ".join("?" for _ in ids)
        rows = await self.database.read(
            "SELECT thread_id, entry_id, kind FROM agui_thread_queue"
            f" WHERE priority = 0 AND thread_id IN ({marks}) {_ORDER}",
            ids,
        )
        out: dict[str, list[QueueSignal]] = {}
        for thread_id, entry_id, kind in rows:
            out.setdefault(thread_id, []).append(QueueSignal(entry_id=entry_id, kind=kind))
        return out

    async def waiting_threads(self, *, limit: int) -> list[str]:
        rows = await self.database.read(
            "SELECT DISTINCT thread_id FROM agui_thread_queue LIMIT ?", (limit,)
        )
        return [row[0] for row in rows]

    async def discard(self, thread_id: str) -> int:
        def op(conn: sqlite3.Connection) -> int:
            return conn.execute(
                "DELETE FROM agui_thread_queue WHERE thread_id = ?", (thread_id,)
            ).rowcount

        return await self.database.write(op)

    async def close(self) -> None:
        """Nothing of its own: the database closes with the storage."""
