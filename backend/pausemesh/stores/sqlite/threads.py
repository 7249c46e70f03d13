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
from typing import Any, NamedTuple

import msgspec

from pausemesh.core.errors import (
    LeaseLostError,
    ThreadBusyError,
    ThreadNotFoundError,
    VersionConflictError,
)
from pausemesh.core.keepalive import KeepAlive
from pausemesh.core.large_json import LARGE_BYTES, sliced
from pausemesh.core.threads import (
    PROTOCOL_THREAD_PREFIXES,
    UNREAD_STATE,
    IssuedCohort,
    RunLease,
    StoredMessage,
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

# Up to this many messages are decoded in one go; more, a piece at a time (``sliced``).
_DECODE_AT_ONCE = 100


def _select(messages: str, state: str, table: str = "agui_threads") -> str:
    return (
        f"SELECT thread_id, owner, {messages}, {state}, open_receipt_json, version,"
        " last_sequence, created_at_us, updated_at_us, lease_id, lease_run_id,"
        " lease_expires_at_us, closed_receipt_json, title, title_source, stored_bytes, rowid,"
        f" message_count, messages_bytes, state_bytes FROM {table}"
    )


# The state is a row of its own (migration 48); a thread without one has the empty state.
_STATE_OF = (
    "(SELECT s.state_json FROM agui_thread_state s WHERE s.thread_id = agui_threads.thread_id)"
)
# A read whose state or receipts (the row's JSON: the messages are rows of their own) are
# larger than LARGE_BYTES is made on the large-read thread, and so is a read of more than
# LARGE_BYTES of messages. The loop tells them apart by the sizes index alone.
_SIZES = (
    "SELECT stored_bytes, message_count, messages_bytes, state_bytes"
    " FROM agui_threads INDEXED BY agui_threads_by_sizes WHERE thread_id = ?"
)
_SELECT_ROW = _select("NULL", _STATE_OF) + " WHERE thread_id = ?"
_SELECT_ALL = _select("NULL", f"CASE WHEN state_bytes <= {LARGE_BYTES} THEN {_STATE_OF} END")
_SELECT_META = _select("NULL", "NULL") + " WHERE thread_id = ?"
_STATE_ROWID = "SELECT rowid FROM agui_thread_state WHERE thread_id = ?"
_EMPTY_STATE = b"{}"
_MESSAGES_FROM = (
    "SELECT message_json, stored_at_us FROM agui_thread_messages"
    " WHERE thread_id = ? AND position >= ? ORDER BY position"
)
_MESSAGE_SIZE = "length(CAST(message_json AS BLOB)) + 2"
# Each stored message is counted with its separator (``,\n`` in the old one-column form).
_SEPARATOR = 2
_ROWID = 16
_COUNT = 17
_STATE_BYTES = 19
_EMPTY_BYTES = len(b"[]") + len(b"{}")
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


def _record(
    row: sqlite3.Row | tuple[Any, ...],
    messages: list[Any],
    state: Any,
    messages_from: int,
    times: Sequence[int | None] = (),
) -> ThreadRecord:
    lease = None
    if row[9] is not None:
        lease = RunLease(lease_id=row[9], run_id=row[10], expires_at=from_epoch_us(row[11]))
    return ThreadRecord(
        thread_id=row[0],
        owner=row[1],
        messages=messages,
        state=state,
        open_receipt=decode_cohort(row[4]),
        version=row[5],
        last_sequence=row[6],
        created_at=from_epoch_us(row[7]),
        updated_at=from_epoch_us(row[8]),
        closed_receipt=decode_cohort(row[12]),
        lease=lease,
        title=row[13],
        title_source=row[14],
        stored_bytes=row[15] + row[18],
        # ``state``: the decoded state, or ``UNREAD_STATE`` (not read).
        messages_from=messages_from,
        message_count=row[_COUNT],
        message_times=[None if t is None else from_epoch_us(t) for t in times],
    )


class _Read(NamedTuple):
    """A record as read in one snapshot: the row, its state's JSON (None: not read), the
    messages' JSON texts from ``start`` on."""

    row: tuple[Any, ...]
    state: bytes | str | None
    start: int
    messages: list[str]
    times: list[int | None]


def _read_record(
    thread_id: str, tail: int | None, *, state: bool, blob_state: bool
) -> Callable[[sqlite3.Connection], _Read | None]:
    """The row, its state (if ``state``) and its messages (all, or the last ``tail``) in the
    caller's snapshot; None if the thread is gone. ``blob_state``: the state is read through a
    blob (with the GIL released), for a state of megabytes."""
    inline = state and not blob_state

    def read(conn: sqlite3.Connection) -> _Read | None:
        row = conn.execute(_SELECT_ROW if inline else _SELECT_META, (thread_id,)).fetchone()
        if row is None:
            return None
        text: bytes | str | None = None
        if inline:
            text = _EMPTY_STATE if row[3] is None else row[3]
        elif state:
            found = conn.execute(_STATE_ROWID, (thread_id,)).fetchone()
            text = _EMPTY_STATE
            if found is not None:
                with conn.blobopen("agui_thread_state", "state_json", found[0], readonly=True) as b:
                    text = b.read()
        count: int = row[_COUNT]
        start = 0 if tail is None else max(count - max(tail, 0), 0)
        rows = conn.execute(_MESSAGES_FROM, (thread_id, start)).fetchall() if start < count else []
        return _Read(tuple(row), text, start, [r[0] for r in rows], [r[1] for r in rows])

    return read


def _release(conn: sqlite3.Connection, thread_id: str, lease_id: str) -> None:
    """Drop ``lease_id``'s lease if it still holds the thread (in the caller's write)."""
    conn.execute(
        "UPDATE agui_threads SET lease_id = NULL, lease_run_id = NULL,"
        " lease_expires_at_us = NULL WHERE thread_id = ? AND lease_id = ?",
        (thread_id, lease_id),
    )


def _version(conn: sqlite3.Connection, thread_id: str) -> int:
    """The stored version; ``ThreadNotFoundError`` for an unknown thread."""
    row = conn.execute("SELECT version FROM agui_threads WHERE thread_id = ?", (thread_id,))
    found = row.fetchone()
    if found is None:
        raise ThreadNotFoundError(thread_id)
    version: int = found[0]
    return version


class _Texts(NamedTuple):
    """A record's JSON as ``save`` stores it (bytes: SQL casts them to TEXT, no copy here);
    ``state`` None: not written (the record's state was not read)."""

    messages: list[bytes]
    state: bytes | None
    receipt: bytes | None
    closed: bytes | None

    @property
    def size(self) -> int:
        """What the row itself holds: an empty ``messages_json``, the receipts."""
        return len(b"[]") + sum(len(t) for t in (self.receipt, self.closed) if t)

    @property
    def state_size(self) -> int:
        return 0 if self.state is None else len(self.state)

    @property
    def messages_size(self) -> int:
        return sum(len(m) + _SEPARATOR for m in self.messages)


def _cohort_json(cohort: IssuedCohort | None) -> bytes | None:
    return None if cohort is None else msgspec.json.encode(cohort)


def _state_json(state: Any) -> bytes | None:
    return None if state is UNREAD_STATE else msgspec.json.encode(state)


def _texts_now(record: ThreadRecord) -> _Texts:
    return _Texts(
        [msgspec.json.encode(m) for m in record.messages],
        _state_json(record.state),
        _cohort_json(record.open_receipt),
        _cohort_json(record.closed_receipt),
    )


async def _texts(record: ThreadRecord) -> _Texts:
    # Many messages (a whole history rewritten) are encoded a piece at a time between the
    # loop's other work (``core/large_json.py``); a run's own few in one go.
    return _Texts(
        await sliced(record.messages, msgspec.json.encode),
        _state_json(record.state),
        _cohort_json(record.open_receipt),
        _cohort_json(record.closed_receipt),
    )


def _message_id(message: Any) -> str | None:
    found = message.get("id") if isinstance(message, dict) else None
    return found if isinstance(found, str) else None


# The title rule of ``ThreadStore.save``, on the stored row: an agent's title replaces a
# derived or agent one (or none), never the owner's nor one of unknown source (NULL).
_AGENT_TITLE_WINS = ":agent IS NOT NULL AND (title IS NULL OR title_source IN ('agent', 'derived'))"
# The messages from :start on are replaced: their stored size comes off the running total
# (an indexed range: what the run rewrites, never the history before it).
# The state's size is kept (``state_bytes``) unless the save carries a state (:state_size
# NULL: not written), so ``stored_bytes`` stays the row, the state and nothing read.
_SAVE_SQL = (
    "UPDATE agui_threads SET"
    " open_receipt_json = CAST(:receipt AS TEXT),"
    " closed_receipt_json = CAST(:closed AS TEXT),"
    " stored_bytes = :size + coalesce(:state_size, state_bytes),"
    " state_bytes = coalesce(:state_size, state_bytes),"
    " messages_bytes = messages_bytes + :added - coalesce((SELECT sum("
    f"{_MESSAGE_SIZE}) FROM agui_thread_messages m WHERE m.thread_id = :thread_id"
    " AND m.position >= :start), 0),"
    " message_count = :start + :count,"
    " version = version + 1, updated_at_us = :now,"
    f" title = CASE WHEN {_AGENT_TITLE_WINS} THEN :agent ELSE coalesce(title, :derived) END,"
    f" title_source = CASE WHEN {_AGENT_TITLE_WINS} THEN 'agent'"
    " WHEN title IS NULL AND :derived IS NOT NULL THEN 'derived' ELSE title_source END,"
    " open_deadline_us = :deadline"
    " WHERE thread_id = :thread_id AND version = :version AND message_count >= :start"
    " RETURNING version, updated_at_us, title, title_source, last_sequence, lease_id,"
    " lease_run_id, lease_expires_at_us, stored_bytes + messages_bytes, message_count"
)


# The stored rows a save rewrites (from :start on, before the new count's end).
_TAIL_IDS = (
    "SELECT position, message_id, stored_at_us FROM agui_thread_messages"
    " WHERE thread_id = ? AND position >= ? ORDER BY position"
)


def save_op(
    record: ThreadRecord, now: datetime, *, agent_title: str | None = None
) -> Callable[[sqlite3.Connection], ThreadRecord]:
    """The CAS update of ``ThreadStore.save`` as a write op (the push outbox joins it)."""
    return _save_op(record, _texts_now(record), now, agent_title)


def _save_op(
    record: ThreadRecord,
    texts: _Texts,
    now: datetime,
    agent_title: str | None,
    removed_ids: Sequence[str] = (),
) -> Callable[[sqlite3.Connection], ThreadRecord]:
    deadline = cohort_deadline(record.open_receipt)
    start = max(record.messages_from, 0)
    params = {
        "state_size": None if texts.state is None else texts.state_size,
        "receipt": texts.receipt,
        "closed": texts.closed,
        "size": texts.size,
        "added": texts.messages_size,
        "start": start,
        "count": len(texts.messages),
        "now": epoch_us(now),
        "agent": agent_title,
        "derived": derive_title(record.messages),
        "deadline": None if deadline is None else epoch_us(deadline),
        "thread_id": record.thread_id,
        "version": record.version,
    }
    at = epoch_us(now)
    ids = [_message_id(m) for m in record.messages]

    def op(conn: sqlite3.Connection) -> ThreadRecord:
        row = conn.execute(_SAVE_SQL, params).fetchone()
        if row is None:
            actual = _version(conn, record.thread_id)
            raise VersionConflictError(record.thread_id, record.version, actual)
        # The rows this save replaces (the tail it rewrites, never the history before it): a
        # message rewritten at its position keeps the time it was first stored.
        kept_times = (
            {
                r[0]: r[2]
                for r in conn.execute(_TAIL_IDS, (record.thread_id, start))
                if r[0] - start < len(ids) and r[1] is not None and r[1] == ids[r[0] - start]
            }
            if ids
            else {}
        )
        conn.execute(
            "DELETE FROM agui_thread_messages WHERE thread_id = ? AND position >= ?",
            (record.thread_id, start),
        )
        times = [kept_times.get(start + i, at) for i in range(len(ids))]
        conn.executemany(
            "INSERT INTO agui_thread_messages"
            " (thread_id, position, message_id, message_json, stored_at_us)"
            " VALUES (?, ?, ?, CAST(? AS TEXT), ?)",
            [
                (record.thread_id, start + i, ids[i], text, times[i])
                for i, text in enumerate(texts.messages)
            ],
        )
        if texts.state is not None:
            # Only a save whose run changed (or first set) the state writes it.
            conn.execute(
                "INSERT INTO agui_thread_state (thread_id, state_json)"
                " VALUES (?, CAST(? AS TEXT))"
                " ON CONFLICT (thread_id) DO UPDATE SET state_json = excluded.state_json",
                (record.thread_id, texts.state),
            )
        # A rollback's tombstones, in the save's transaction (``removed_message_ids``).
        conn.executemany(
            "INSERT INTO agui_thread_removed_messages (thread_id, message_id) VALUES (?, ?)"
            " ON CONFLICT DO NOTHING",
            [(record.thread_id, i) for i in dict.fromkeys(removed_ids)],
        )
        lease = None
        if row[5] is not None:
            lease = RunLease(lease_id=row[5], run_id=row[6], expires_at=from_epoch_us(row[7]))
        # What was just stored is the caller's messages and state: not read back (nor decoded
        # again).
        return msgspec.structs.replace(
            record,
            version=row[0],
            updated_at=from_epoch_us(row[1]),
            title=row[2],
            title_source=row[3],
            last_sequence=row[4],
            lease=lease,
            stored_bytes=row[8],
            messages_from=start,
            message_count=row[9],
            message_times=[None if t is None else from_epoch_us(t) for t in times],
        )

    return op


class SqliteThreadStore:
    def __init__(self, database: SqliteDatabase, *, owns_database: bool = False) -> None:
        self.database = database
        self._owns_database = owns_database
        self._notifier = ThreadNotifier()
        self._watcher = ChangeWatcher(database, self._notifier)
        # Threads this process last read or saved with a large row (receipts of megabytes; the
        # state is a row of its own). SQLite rewrites (and first reads) the whole row on any
        # UPDATE of it: their leases and appends go to the writer thread too
        # (``SqliteDatabase.write(large=True)``), off the loop's.
        self._large_ids: set[str] = set()

    async def create_or_load(
        self, thread_id: str, *, owner: str | None, now: datetime
    ) -> ThreadRecord:
        at = epoch_us(now)

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO agui_threads (thread_id, owner, messages_json,"
                " open_receipt_json, version, last_sequence, created_at_us, updated_at_us,"
                " stored_bytes)"
                " SELECT ?, ?, '[]', NULL, 1, 0, ?, ?, ?"
                " WHERE NOT EXISTS (SELECT 1 FROM agui_thread_erasures WHERE thread_id = ?)"
                " ON CONFLICT DO NOTHING",
                (thread_id, owner, at, at, _EMPTY_BYTES, thread_id),
            )

        existing = await self.get(thread_id)
        if existing is not None:
            return existing
        await self.database.write(op)
        return await self._require(thread_id)

    async def _require(self, thread_id: str, tail: int | None = None) -> ThreadRecord:
        record = await self.get(thread_id, tail=tail)
        if record is None:
            raise ThreadNotFoundError(thread_id)
        return record

    def _known_large(self, thread_id: str) -> bool:
        """Whether a write to the thread's row is ``large`` (see ``_large_ids``)."""
        return thread_id in self._large_ids

    async def get(
        self, thread_id: str, *, tail: int | None = None, state: bool = True
    ) -> ThreadRecord | None:
        sizes = await self.database.read(_SIZES, (thread_id,))
        if not sizes:
            return None
        stored, count, messages_bytes, state_bytes = sizes[0]
        wanted = count if tail is None else min(max(tail, 0), count)
        # The messages asked for, estimated from the running size (rows are alike enough).
        many = wanted and messages_bytes * wanted // max(count, 1) > LARGE_BYTES
        large_row = stored - state_bytes > LARGE_BYTES
        large_state = state and state_bytes > LARGE_BYTES
        if large_row:
            self._large_ids.add(thread_id)
        else:
            self._large_ids.discard(thread_id)
        read = _read_record(thread_id, tail, state=state, blob_state=large_state)
        if large_row or large_state or many:
            found = await self.database.read_large(read)
        else:
            found = await self.database.read_snapshot(read)
        if found is None:
            return None
        if len(found.messages) > _DECODE_AT_ONCE:
            messages = await sliced(found.messages, msgspec.json.decode)
        else:
            messages = [msgspec.json.decode(m) for m in found.messages]
        decoded = UNREAD_STATE if found.state is None else msgspec.json.decode(found.state)
        return _record(found.row, messages, decoded, found.start, found.times)

    async def read_messages(
        self, thread_id: str, *, before: int | None, limit: int
    ) -> list[StoredMessage]:
        sql = (
            "SELECT position, message_json, stored_at_us FROM agui_thread_messages"
            " WHERE thread_id = ?"
        )
        params: list[Any] = [thread_id]
        if before is not None:
            sql += " AND position < ?"
            params.append(before)
        sql += " ORDER BY position DESC LIMIT ?"
        params.append(max(limit, 0))

        def read(conn: sqlite3.Connection) -> list[tuple[int, str, int | None]]:
            return conn.execute(sql, params).fetchall()

        if limit > _DECODE_AT_ONCE:
            rows = await self.database.read_large(read)
            decoded = await sliced(rows, lambda r: msgspec.json.decode(r[1]))
        else:
            rows = await self.database.read(sql, params)
            decoded = [msgspec.json.decode(r[1]) for r in rows]
        return [
            StoredMessage(
                position=r[0], message=m, stored_at=None if r[2] is None else from_epoch_us(r[2])
            )
            for r, m in zip(rows, decoded, strict=True)
        ]

    async def known_message_ids(self, thread_id: str, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()
        rows = await self.database.read(
            "SELECT message_id FROM agui_thread_messages WHERE thread_id = ?"
            " AND message_id IN (SELECT value FROM json_each(?))",
            (thread_id, msgspec.json.encode(list(ids)).decode()),
        )
        return {r[0] for r in rows}

    async def removed_message_ids(self, thread_id: str, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()
        rows = await self.database.read(
            "SELECT message_id FROM agui_thread_removed_messages WHERE thread_id = ?"
            " AND message_id IN (SELECT value FROM json_each(?))",
            (thread_id, msgspec.json.encode(list(ids)).decode()),
        )
        return {r[0] for r in rows}

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
        records = []
        for row in rows:
            # A large one (rare for protocol records) comes whole from ``get``.
            record = (
                await self.get(row[0])
                if row[_COUNT] or row[_STATE_BYTES] > LARGE_BYTES
                else _record(row, [], msgspec.json.decode(row[3] or _EMPTY_STATE), 0)
            )
            if record is not None:
                records.append(record)
        return records

    async def save(
        self,
        record: ThreadRecord,
        *,
        now: datetime,
        agent_title: str | None = None,
        removed_ids: Sequence[str] = (),
    ) -> ThreadRecord:
        texts = await _texts(record)
        op = _save_op(record, texts, now, agent_title, removed_ids)
        large = max(texts.size, texts.messages_size, texts.state_size) > LARGE_BYTES
        saved = await self.database.write(op, large=large or self._known_large(record.thread_id))
        if texts.size > LARGE_BYTES:
            self._large_ids.add(record.thread_id)
        else:
            self._large_ids.discard(record.thread_id)
        return saved

    async def acquire_lease(
        self, thread_id: str, *, lease_id: str, run_id: str, now: datetime, expires_at: datetime
    ) -> ThreadRecord:
        def op(conn: sqlite3.Connection) -> None:
            cursor = conn.execute(
                "UPDATE agui_threads SET lease_id = ?, lease_run_id = ?, lease_expires_at_us = ?"
                " WHERE thread_id = ? AND (lease_id IS NULL OR lease_id = ?"
                " OR lease_expires_at_us <= ?)",
                (lease_id, run_id, epoch_us(expires_at), thread_id, lease_id, epoch_us(now)),
            )
            if cursor.rowcount != 1:
                _version(conn, thread_id)  # raises ThreadNotFoundError for an unknown thread
                raise ThreadBusyError(thread_id)

        await self.database.write(op, large=self._known_large(thread_id))
        # Read after the write, without its messages nor its state (``get(tail=0,
        # state=False)``). The lease holds the thread, so no other run's save comes in between.
        record = await self.get(thread_id, tail=0, state=False)
        if record is None:
            raise ThreadNotFoundError(thread_id)
        return record

    async def release_lease(self, thread_id: str, *, lease_id: str) -> None:
        await self.database.write(
            lambda conn: _release(conn, thread_id, lease_id), large=self._known_large(thread_id)
        )

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

        return await self.database.write(op, large=any(map(self._known_large, leases)))

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
                _version(conn, thread_id)  # raises ThreadNotFoundError for an unknown thread
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

        # A long thread's snapshot at a pause is megabytes: written off the loop thread.
        large = self._known_large(thread_id) or sum(len(t) for t in texts) > LARGE_BYTES
        sequences = await self.database.write(op, large=large)
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
        sql = "SELECT last_sequence FROM agui_threads WHERE thread_id = ?"
        if self._known_large(thread_id):
            # Behind the row's overflow pages: read on the large-read thread.
            rows = await self.database.read_large(
                lambda conn: conn.execute(sql, (thread_id,)).fetchall()
            )
        else:
            rows = await self.database.read(sql, (thread_id,))
        if not rows:
            raise ThreadNotFoundError(thread_id)
        head: int = rows[0][0]
        return head

    async def wait_for_events(
        self,
        thread_id: str,
        *,
        after_sequence: int,
        wait_seconds: float,
        keep_alive: KeepAlive | None = None,
    ) -> bool:
        # Before the head is read: an append another process commits after the read is past
        # the watcher's mark, so it wakes us.
        await self._watcher.start()
        return await self._notifier.wait_past(
            thread_id, after_sequence, wait_seconds, lambda: self._head(thread_id), keep_alive
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

        await self.database.write(op, large=self._known_large(thread_id))

    async def erase(self, thread_id: str, *, now: datetime) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            # The ledger row first: the delete triggers allow only an erased thread's rows.
            conn.execute(
                "INSERT INTO agui_thread_erasures VALUES (?, ?) ON CONFLICT DO NOTHING",
                (thread_id, epoch_us(now)),
            )
            conn.execute("DELETE FROM agui_thread_events WHERE thread_id = ?", (thread_id,))
            conn.execute("DELETE FROM agui_thread_messages WHERE thread_id = ?", (thread_id,))
            conn.execute(
                "DELETE FROM agui_thread_removed_messages WHERE thread_id = ?", (thread_id,)
            )
            conn.execute("DELETE FROM agui_thread_state WHERE thread_id = ?", (thread_id,))
            cursor = conn.execute("DELETE FROM agui_threads WHERE thread_id = ?", (thread_id,))
            return cursor.rowcount == 1

        erased = await self.database.write(op, large=self._known_large(thread_id))
        self._large_ids.discard(thread_id)
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
