"""SQLite thread store on the shared ``SqliteDatabase`` (tables from migration ``agui_threads``).

Writes go through the group-commit writer; waiters of the live tail are woken in-process once
the append is committed, and by the change watcher (``changes.py``) when another process
sharing the file appended.
"""

# ruff: noqa: S608 - the only text put into SQL is _NOT_PROTOCOL, built from constant prefixes

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import msgspec

from pausemesh.core.errors import (
    LeaseLostError,
    ThreadBusyError,
    ThreadNotFoundError,
    VersionConflictError,
)
from pausemesh.core.threads import (
    PROTOCOL_THREAD_PREFIXES,
    RunLease,
    ThreadCursor,
    ThreadLogEntry,
    ThreadRecord,
    ThreadSummary,
    cohort_deadline,
    decode_cohort,
    derive_title,
)
from pausemesh.stores.sqlite.changes import ChangeWatcher
from pausemesh.stores.sqlite.database import SqliteDatabase
from pausemesh.stores.sqlite.epoch import epoch_us, from_epoch_us
from pausemesh.stores.thread_notify import ThreadNotifier

__all__ = ("SqliteThreadStore", "save_op")

_SELECT_ALL = (
    "SELECT thread_id, owner, messages_json, state_json, open_receipt_json, version,"
    " last_sequence, created_at_us, updated_at_us, lease_id, lease_run_id, lease_expires_at_us,"
    " closed_receipt_json, title, title_source"
    " FROM agui_threads"
)
_SELECT_ONE = _SELECT_ALL + " WHERE thread_id = ?"
# Protocol threads (A2A tasks) are neither listed nor purged by retention.
_NOT_PROTOCOL = " AND ".join(
    f"substr(thread_id, 1, {len(p)}) != '{p}'" for p in PROTOCOL_THREAD_PREFIXES
)
_SUMMARY = (
    "SELECT thread_id, title, created_at_us, updated_at_us,"
    " coalesce(json_array_length(open_receipt_json, '$.interrupts'), 0), last_sequence"
    " FROM agui_threads"
)
# ``owner IS ?`` matches NULL (no auth) too and still uses the (owner, ...) index.
LIST_THREADS_SQL = (
    f"{_SUMMARY} WHERE owner IS ? AND {_NOT_PROTOCOL}"
    " ORDER BY updated_at_us DESC, thread_id DESC LIMIT ?"
)
LIST_THREADS_AFTER_SQL = (
    f"{_SUMMARY} WHERE owner IS ? AND (updated_at_us, thread_id) < (?, ?) AND {_NOT_PROTOCOL}"
    " ORDER BY updated_at_us DESC, thread_id DESC LIMIT ?"
)


def _json(value: Any) -> str:
    return msgspec.json.encode(value).decode()


def _record(row: sqlite3.Row | tuple[Any, ...]) -> ThreadRecord:
    lease = None
    if row[9] is not None:
        lease = RunLease(lease_id=row[9], run_id=row[10], expires_at=from_epoch_us(row[11]))
    return ThreadRecord(
        thread_id=row[0],
        owner=row[1],
        messages=msgspec.json.decode(row[2]),
        state=msgspec.json.decode(row[3]),
        open_receipt=decode_cohort(row[4]),
        version=row[5],
        last_sequence=row[6],
        created_at=from_epoch_us(row[7]),
        updated_at=from_epoch_us(row[8]),
        closed_receipt=decode_cohort(row[12]),
        lease=lease,
        title=row[13],
        title_source=row[14],
    )


def _release(conn: sqlite3.Connection, thread_id: str, lease_id: str) -> None:
    """Drop ``lease_id``'s lease if it still holds the thread (in the caller's write)."""
    conn.execute(
        "UPDATE agui_threads SET lease_id = NULL, lease_run_id = NULL,"
        " lease_expires_at_us = NULL WHERE thread_id = ? AND lease_id = ?",
        (thread_id, lease_id),
    )


def _load(conn: sqlite3.Connection, thread_id: str) -> ThreadRecord:
    row = conn.execute(_SELECT_ONE, (thread_id,)).fetchone()
    if row is None:
        raise ThreadNotFoundError(thread_id)
    return _record(row)


# The title rule of ``ThreadStore.save``, on the stored row: an agent's title replaces a
# derived or agent one (or none), never the owner's nor one of unknown source (NULL).
_AGENT_TITLE_WINS = ":agent IS NOT NULL AND (title IS NULL OR title_source IN ('agent', 'derived'))"
_SAVE_SQL = (
    "UPDATE agui_threads SET messages_json = :messages, state_json = :state,"
    " open_receipt_json = :receipt, closed_receipt_json = :closed, version = version + 1,"
    " updated_at_us = :now,"
    f" title = CASE WHEN {_AGENT_TITLE_WINS} THEN :agent ELSE coalesce(title, :derived) END,"
    f" title_source = CASE WHEN {_AGENT_TITLE_WINS} THEN 'agent'"
    " WHEN title IS NULL AND :derived IS NOT NULL THEN 'derived' ELSE title_source END,"
    " open_deadline_us = :deadline"
    " WHERE thread_id = :thread_id AND version = :version"
)


def save_op(
    record: ThreadRecord, now: datetime, *, agent_title: str | None = None
) -> Callable[[sqlite3.Connection], ThreadRecord]:
    """The CAS update of ``ThreadStore.save`` as a write op (the push outbox joins it)."""
    deadline = cohort_deadline(record.open_receipt)
    params = {
        "messages": _json(record.messages),
        "state": _json(record.state),
        "receipt": None if record.open_receipt is None else _json(record.open_receipt),
        "closed": None if record.closed_receipt is None else _json(record.closed_receipt),
        "now": epoch_us(now),
        "agent": agent_title,
        "derived": derive_title(record.messages),
        "deadline": None if deadline is None else epoch_us(deadline),
        "thread_id": record.thread_id,
        "version": record.version,
    }

    def op(conn: sqlite3.Connection) -> ThreadRecord:
        cursor = conn.execute(_SAVE_SQL, params)
        if cursor.rowcount != 1:
            actual = _load(conn, record.thread_id).version
            raise VersionConflictError(record.thread_id, record.version, actual)
        return _load(conn, record.thread_id)

    return op


class SqliteThreadStore:
    def __init__(self, database: SqliteDatabase, *, owns_database: bool = False) -> None:
        self.database = database
        self._owns_database = owns_database
        self._notifier = ThreadNotifier()
        self._watcher = ChangeWatcher(database, self._notifier)

    async def create_or_load(
        self, thread_id: str, *, owner: str | None, now: datetime
    ) -> ThreadRecord:
        at = epoch_us(now)

        def op(conn: sqlite3.Connection) -> ThreadRecord:
            conn.execute(
                "INSERT INTO agui_threads (thread_id, owner, messages_json, state_json,"
                " open_receipt_json, version, last_sequence, created_at_us, updated_at_us)"
                " SELECT ?, ?, '[]', '{}', NULL, 1, 0, ?, ?"
                " WHERE NOT EXISTS (SELECT 1 FROM agui_thread_erasures WHERE thread_id = ?)"
                " ON CONFLICT DO NOTHING",
                (thread_id, owner, at, at, thread_id),
            )
            return _load(conn, thread_id)

        existing = await self.get(thread_id)
        return existing if existing is not None else await self.database.write(op)

    async def get(self, thread_id: str) -> ThreadRecord | None:
        rows = await self.database.read(_SELECT_ONE, (thread_id,))
        return _record(rows[0]) if rows else None

    async def list_records(
        self,
        prefix: str,
        *,
        owner: str | None,
        before: tuple[datetime, str] | None,
        limit: int,
    ) -> list[ThreadRecord]:
        # Keyset pagination on (updated_at, thread_id); a prefix compare keeps LIKE wildcards out.
        sql = _SELECT_ALL + " WHERE substr(thread_id, 1, ?) = ? AND owner IS ?"
        params: list[Any] = [len(prefix), prefix, owner]
        if before is not None:
            at = epoch_us(before[0])
            sql += " AND (updated_at_us < ? OR (updated_at_us = ? AND thread_id < ?))"
            params += [at, at, before[1]]
        sql += " ORDER BY updated_at_us DESC, thread_id DESC LIMIT ?"
        rows = await self.database.read(sql, [*params, limit])
        return [_record(row) for row in rows]

    async def save(
        self, record: ThreadRecord, *, now: datetime, agent_title: str | None = None
    ) -> ThreadRecord:
        return await self.database.write(save_op(record, now, agent_title=agent_title))

    async def acquire_lease(
        self, thread_id: str, *, lease_id: str, run_id: str, now: datetime, expires_at: datetime
    ) -> ThreadRecord:
        def op(conn: sqlite3.Connection) -> ThreadRecord:
            cursor = conn.execute(
                "UPDATE agui_threads SET lease_id = ?, lease_run_id = ?, lease_expires_at_us = ?"
                " WHERE thread_id = ? AND (lease_id IS NULL OR lease_id = ?"
                " OR lease_expires_at_us <= ?)",
                (lease_id, run_id, epoch_us(expires_at), thread_id, lease_id, epoch_us(now)),
            )
            if cursor.rowcount != 1:
                _load(conn, thread_id)  # raises ThreadNotFoundError for an unknown thread
                raise ThreadBusyError(thread_id)
            return _load(conn, thread_id)

        return await self.database.write(op)

    async def release_lease(self, thread_id: str, *, lease_id: str) -> None:
        await self.database.write(lambda conn: _release(conn, thread_id, lease_id))

    async def renew_leases(self, leases: Mapping[str, str], *, expires_at: datetime) -> set[str]:
        if not leases:
            return set()
        at = epoch_us(expires_at)

        def op(conn: sqlite3.Connection) -> set[str]:
            renewed: set[str] = set()
            for thread_id, lease_id in leases.items():
                cursor = conn.execute(
                    "UPDATE agui_threads SET lease_expires_at_us = ?"
                    " WHERE thread_id = ? AND lease_id = ?",
                    (at, thread_id, lease_id),
                )
                if cursor.rowcount == 1:
                    renewed.add(thread_id)
            return renewed

        return await self.database.write(op)

    async def release_instance_leases(self, instance_name: str, *, keep: str) -> int:
        prefix = f"{instance_name}@"

        def op(conn: sqlite3.Connection) -> int:
            # substr, not LIKE: an instance name may hold LIKE's wildcards.
            cursor = conn.execute(
                "UPDATE agui_threads SET lease_id = NULL, lease_run_id = NULL,"
                " lease_expires_at_us = NULL"
                " WHERE substr(lease_id, 1, length(?)) = ? AND substr(lease_id, 1, length(?)) <> ?",
                (prefix, prefix, keep, keep),
            )
            return cursor.rowcount

        return await self.database.write(op)

    async def append_events(
        self,
        thread_id: str,
        *,
        lease_id: str,
        run_id: str,
        events: Sequence[str],
        release: bool = False,
    ) -> list[int]:
        texts = list(events)

        def op(conn: sqlite3.Connection) -> list[int]:
            row = conn.execute(
                "UPDATE agui_threads SET last_sequence = last_sequence + ?,"
                " change_seq = (SELECT value + 1 FROM agui_change_clock)"
                " WHERE thread_id = ? AND lease_id = ? RETURNING last_sequence",
                (len(texts), thread_id, lease_id),
            ).fetchone()
            if row is None:
                _load(conn, thread_id)
                raise LeaseLostError(thread_id)
            conn.execute("UPDATE agui_change_clock SET value = value + 1")
            first = row[0] - len(texts) + 1
            sequences = list(range(first, row[0] + 1))
            conn.executemany(
                "INSERT INTO agui_thread_events VALUES (?, ?, ?, ?)",
                [
                    (thread_id, seq, run_id, text)
                    for seq, text in zip(sequences, texts, strict=True)
                ],
            )
            if release:
                _release(conn, thread_id, lease_id)
            return sequences

        sequences = await self.database.write(op)
        if sequences:
            self._notifier.notify(thread_id, sequences[-1])
        return sequences

    async def read_events(
        self, thread_id: str, *, after_sequence: int, limit: int = 1000
    ) -> list[ThreadLogEntry]:
        rows = await self.database.read(
            "SELECT sequence, run_id, event_json FROM agui_thread_events"
            " WHERE thread_id = ? AND sequence > ? ORDER BY sequence LIMIT ?",
            (thread_id, after_sequence, max(limit, 0)),
        )
        return [ThreadLogEntry(sequence=r[0], run_id=r[1], event_json=r[2]) for r in rows]

    async def _head(self, thread_id: str) -> int:
        rows = await self.database.read(
            "SELECT last_sequence FROM agui_threads WHERE thread_id = ?", (thread_id,)
        )
        if not rows:
            raise ThreadNotFoundError(thread_id)
        head: int = rows[0][0]
        return head

    async def wait_for_events(
        self, thread_id: str, *, after_sequence: int, wait_seconds: float
    ) -> bool:
        # Before the head is read: an append another process commits after the read is past
        # the watcher's mark, so it wakes us.
        await self._watcher.start()
        return await self._notifier.wait_past(
            thread_id, after_sequence, wait_seconds, lambda: self._head(thread_id)
        )

    def stop_waiting(self) -> None:
        self._notifier.stop()

    async def list_threads(
        self, owner: str | None, *, limit: int, after: ThreadCursor | None = None
    ) -> list[ThreadSummary]:
        if after is None:
            rows = await self.database.read(LIST_THREADS_SQL, (owner, max(limit, 0)))
        else:
            rows = await self.database.read(
                LIST_THREADS_AFTER_SQL,
                (owner, epoch_us(after.updated_at), after.thread_id, max(limit, 0)),
            )
        return [
            ThreadSummary(
                thread_id=r[0],
                title=r[1],
                created_at=from_epoch_us(r[2]),
                updated_at=from_epoch_us(r[3]),
                pending_interrupts=r[4],
                last_sequence=r[5],
            )
            for r in rows
        ]

    async def set_title(self, thread_id: str, title: str) -> None:
        def op(conn: sqlite3.Connection) -> None:
            cursor = conn.execute(
                "UPDATE agui_threads SET title = ?, title_source = 'owner' WHERE thread_id = ?",
                (title, thread_id),
            )
            if cursor.rowcount != 1:
                raise ThreadNotFoundError(thread_id)

        await self.database.write(op)

    async def erase(self, thread_id: str, *, now: datetime) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            # The ledger row first: the delete triggers allow only an erased thread's rows.
            conn.execute(
                "INSERT INTO agui_thread_erasures VALUES (?, ?) ON CONFLICT DO NOTHING",
                (thread_id, epoch_us(now)),
            )
            conn.execute("DELETE FROM agui_thread_events WHERE thread_id = ?", (thread_id,))
            cursor = conn.execute("DELETE FROM agui_threads WHERE thread_id = ?", (thread_id,))
            return cursor.rowcount == 1

        erased = await self.database.write(op)
        self._notifier.notify(thread_id)
        return erased

    async def forget_erased(self) -> None:
        # The deleted rows' pages are zeroed (secure_delete); their old frames in the -wal
        # file go with it.
        await self.database.truncate_wal()

    async def idle_threads(self, *, updated_before: datetime, limit: int) -> list[str]:
        rows = await self.database.read(
            f"SELECT thread_id FROM agui_threads WHERE updated_at_us < ? AND {_NOT_PROTOCOL}"
            " ORDER BY updated_at_us LIMIT ?",
            (epoch_us(updated_before), max(limit, 0)),
        )
        return [r[0] for r in rows]

    async def lapsed_cohorts(self, *, now: datetime, limit: int) -> list[str]:
        rows = await self.database.read(
            "SELECT thread_id FROM agui_threads WHERE open_deadline_us <= ?"
            " ORDER BY open_deadline_us LIMIT ?",
            (epoch_us(now), max(limit, 0)),
        )
        return [r[0] for r in rows]

    async def close(self) -> None:
        await self._watcher.close()
        await self._notifier.close()
        if self._owns_database:
            await self.database.close()
