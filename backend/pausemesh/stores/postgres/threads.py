"""PostgreSQL thread store (tables from migration ``agui_threads``), tailed across replicas.

Each method is one statement on a pooled connection. ``append_events`` advances the thread's
``last_sequence`` (fenced by the run lease), inserts the events and notifies the schema's
channel in that one transaction; ``wait_for_events`` wakes on those notifications from any
replica (``ThreadListener``) and always confirms against the log itself.
"""

# ruff: noqa: S608 - the only identifier put into SQL text is the validated, quoted schema name

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import Any

import msgspec

from pausemesh.core.errors import (
    LeaseLostError,
    StoreError,
    ThreadBusyError,
    ThreadNotFoundError,
    VersionConflictError,
)
from pausemesh.core.keepalive import KeepAlive
from pausemesh.core.large_json import LARGE_BYTES, decode_lines, sliced
from pausemesh.core.threads import (
    PROTOCOL_THREAD_PREFIXES,
    UNREAD_STATE,
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
from pausemesh.stores.postgres.database import Conn, PostgresDatabase, SharedDatabaseStore
from pausemesh.stores.postgres.listen import ThreadListener

__all__ = ("PostgresThreadStore", "list_threads_sql")

# Up to this many messages are decoded in one go; more, a piece at a time (``sliced``).
_DECODE_AT_ONCE = 100

# The fields ``save`` writes live in one JSON body, so a new one needs no migration.
_IDENTITY = frozenset(
    {
        "thread_id",
        "owner",
        "version",
        "last_sequence",
        "created_at",
        "updated_at",
        "lease",
        "title",
        "title_source",
        "stored_bytes",
        "messages_from",
        "message_count",
        "message_times",
        # A row of its own (migration 48), written only by a save that carries it.
        "state",
    }
)
_BODY_FIELDS = tuple(f for f in ThreadRecord.__struct_fields__ if f not in _IDENTITY)
_REQUIRED = frozenset(f.name for f in msgspec.structs.fields(ThreadRecord) if f.required)
# The body as bytes (no UTF-8 decode of a long thread on the loop) and its size, which
# ``octet_length`` takes from the value's header without reading it.
_COLUMNS = (
    "thread_id, owner, convert_to(body_json, 'UTF8'), version, last_sequence, created_at,"
    " updated_at, lease_id, lease_run_id, lease_expires_at, title, title_source,"
    " octet_length(body_json), message_count, messages_bytes, state_bytes"
)
_COUNT = 13
# Where the columns after ``_COLUMNS`` start.
_AFTER = 16
# What ``save`` returns besides what it was given (it does not read the body back).
_SAVED = (
    "version, updated_at, title, title_source, last_sequence, lease_id, lease_run_id,"
    " lease_expires_at, octet_length(body_json) + messages_bytes + state_bytes, message_count"
)
# A message row's size in the running total (with its separator, as SQLite counts it).
_MESSAGE_SIZE = "octet_length(message_json) + 2"
# Protocol threads (A2A tasks) are neither listed nor purged by retention.
_NOT_PROTOCOL = " AND ".join(
    f"left(thread_id, {len(p)}) <> '{p}'" for p in PROTOCOL_THREAD_PREFIXES
)
_SUMMARY_COLUMNS = (
    "thread_id, title, created_at, updated_at,"
    " coalesce(jsonb_array_length(body_json::jsonb -> 'open_receipt' -> 'interrupts'), 0),"
    " last_sequence"
)
_EMPTY_BODY = msgspec.json.encode({"messages": [], "open_receipt": None})
_EMPTY_STATE = b"{}"


def _state_of(q: str, alias: str) -> str:
    """The thread's state as bytes (NULL: no row, the empty state)."""
    return (
        f"(SELECT convert_to(s.state_json, 'UTF8') FROM {q}.agui_thread_state s"
        f" WHERE s.thread_id = {alias}.thread_id)"
    )


_BODY: msgspec.json.Decoder[dict[str, Any]] = msgspec.json.Decoder(dict[str, Any])
_RAW_BODY: msgspec.json.Decoder[dict[str, msgspec.Raw]] = msgspec.json.Decoder(
    dict[str, msgspec.Raw]
)


# The messages go last, one per line (``core/large_json.py``), so a reader finds them after
# the body's first raw newline and decodes them a piece at a time.
_MESSAGES_AT = b',"messages":[\n'


def _head(record: ThreadRecord) -> bytes:
    """Every body field but the messages, compact."""
    return msgspec.json.encode(
        {name: getattr(record, name) for name in _BODY_FIELDS if name != "messages"}
    )


def _with_messages(head: bytes, messages: bytes) -> bytes:
    return head[:-1] + b',"messages":' + messages + b"}"


def _body(record: ThreadRecord) -> bytes:
    """The record's body: the messages are rows of their own (migration 42), the body keeps
    an empty list where they were."""
    return _with_messages(_head(record), b"[]")


def _message_row(message: Any) -> tuple[str | None, str]:
    found = message.get("id") if isinstance(message, dict) else None
    return (found if isinstance(found, str) else None), msgspec.json.encode(message).decode()


async def _message_rows(messages: list[Any]) -> tuple[list[str | None], list[str]]:
    """The ids and JSON texts of messages to store, in order; many (a whole history
    rewritten) a piece at a time between the loop's other work."""
    rows = (
        await sliced(messages, _message_row)
        if len(messages) > _DECODE_AT_ONCE
        else [_message_row(m) for m in messages]
    )
    return [r[0] for r in rows], [r[1] for r in rows]


async def _body_fields(data: bytes) -> dict[str, Any]:
    """The body's fields; a large body's messages decoded between the loop's other work."""
    if len(data) <= LARGE_BYTES:
        return _BODY.decode(data)
    nl = data.find(b"\n")
    if (
        nl > 0
        and data.endswith(b"\n]}")
        and data.startswith(_MESSAGES_AT, nl + 1 - len(_MESSAGES_AT))
    ):
        fields = _BODY.decode(data[: nl + 1 - len(_MESSAGES_AT)] + b"}")
        fields["messages"] = await decode_lines(data[nl - 1 : -1])
        return fields
    # Stored before the messages went last: one scan for the fields, then the messages sliced.
    raw = _RAW_BODY.decode(data)
    fields = {name: msgspec.json.decode(value) for name, value in raw.items() if name != "messages"}
    if "messages" in raw:
        fields["messages"] = await decode_lines(bytes(raw["messages"]))
    return fields


async def _record(
    row: Any,
    messages: Sequence[str] | None = None,
    messages_from: int | None = None,
    *,
    state: bool = False,
    state_json: bytes | None = None,
) -> ThreadRecord:
    """The record of a ``_COLUMNS`` row with ``messages`` (their JSON texts, from position
    ``messages_from`` on; None: none read, the record starts after the last); ``state``: the
    state was read (``state_json``, None for no row: ``{}``), else ``UNREAD_STATE``."""
    lease = None
    if row[7] is not None:
        lease = RunLease(lease_id=row[7], run_id=row[8], expires_at=row[9])
    try:
        # A body that is not a JSON object is a ValidationError, itself a DecodeError.
        body = await _body_fields(row[2])
    except msgspec.DecodeError:
        msg = "stored thread record does not decode"
        raise StoreError(msg, code="CORRUPT_STREAM") from None
    # Fields added to the record later take their defaults in rows written before them.
    fields: dict[str, Any] = {
        name: body.get(name) for name in _BODY_FIELDS if name in body or name in _REQUIRED
    }
    for name in ("open_receipt", "closed_receipt"):
        if fields.get(name) is not None:
            fields[name] = decode_cohort(msgspec.json.encode(fields[name]))
    count: int = row[_COUNT]
    texts = list(messages or ())
    fields["messages"] = (
        await sliced(texts, msgspec.json.decode)
        if len(texts) > _DECODE_AT_ONCE
        else [msgspec.json.decode(t) for t in texts]
    )
    return ThreadRecord(
        thread_id=row[0],
        owner=row[1],
        version=row[3],
        last_sequence=row[4],
        created_at=row[5],
        updated_at=row[6],
        lease=lease,
        title=row[10],
        title_source=row[11],
        stored_bytes=row[12] + row[14] + row[15],
        messages_from=count if messages_from is None else messages_from,
        message_count=count,
        state=msgspec.json.decode(state_json or _EMPTY_STATE) if state else UNREAD_STATE,
        **fields,
    )


def _saved(record: ThreadRecord, row: Any) -> ThreadRecord:
    """``record`` as ``save`` stored it (``_SAVED``): its messages and state are the caller's,
    not read back (nor decoded again, which for a long thread costs as much as the write)."""
    lease = None
    if row[5] is not None:
        lease = RunLease(lease_id=row[5], run_id=row[6], expires_at=row[7])
    return msgspec.structs.replace(
        record,
        version=row[0],
        updated_at=row[1],
        title=row[2],
        title_source=row[3],
        last_sequence=row[4],
        lease=lease,
        stored_bytes=row[8],
        message_count=row[9],
        message_times=list(row[10]),
    )


def list_threads_sql(q: str, *, after: bool) -> str:
    """The thread list's query (``$1`` owner or '' for none, ``$2`` limit, ``$3``/``$4`` the
    cursor), matching the ``(coalesce(owner, ''), updated_at DESC, thread_id DESC)`` index."""
    cursor = "AND (updated_at, thread_id) < ($3, $4)" if after else ""
    return f"""
        SELECT {_SUMMARY_COLUMNS} FROM {q}.agui_threads
        WHERE coalesce(owner, '') = $1 {cursor} AND {_NOT_PROTOCOL}
        ORDER BY updated_at DESC, thread_id DESC LIMIT $2
    """


class PostgresThreadStore(SharedDatabaseStore):
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
        self.listener = ThreadListener(database)
        database.on_close(self.listener.close)
        q = database.q
        self._sql_get = f"SELECT {_COLUMNS} FROM {q}.agui_threads WHERE thread_id = $1"
        self._sql_get_state = (
            f"SELECT {_COLUMNS}, {_state_of(q, 't')} FROM {q}.agui_threads t WHERE thread_id = $1"
        )
        self._sql_create = f"""
            INSERT INTO {q}.agui_threads (thread_id, owner, body_json, version, last_sequence,
                                          created_at, updated_at)
            SELECT $1, $2, convert_from($3, 'UTF8'), 1, 0, $4, $4
            WHERE NOT EXISTS (SELECT 1 FROM {q}.agui_thread_erasures WHERE thread_id = $1)
            ON CONFLICT DO NOTHING RETURNING {_COLUMNS}
        """
        # The title rule of ``ThreadStore.save``: $7, the agent's title, replaces a derived or
        # agent one (or none), never the owner's nor one of unknown source (NULL).
        agent_wins = (
            "$7::text IS NOT NULL AND (title IS NULL OR title_source IN ('agent', 'derived'))"
        )
        # The CAS on the record, and the messages from $8 on upserted (the runtime role
        # deletes nothing: rows past the new count are dead until overwritten), in one
        # statement: the size of the rows replaced comes off the running total, measured
        # before the upsert (every part of the statement sees the same snapshot).
        self._sql_save = f"""
            WITH head AS (
                UPDATE {q}.agui_threads SET body_json = convert_from($2, 'UTF8'),
                    version = version + 1, updated_at = $3,
                    title = CASE WHEN {agent_wins} THEN $7 ELSE coalesce(title, $5) END,
                    title_source = CASE WHEN {agent_wins} THEN 'agent'
                        WHEN title IS NULL AND $5::text IS NOT NULL THEN 'derived'
                        ELSE title_source END,
                    open_deadline = $6,
                    messages_bytes = messages_bytes + $11 - coalesce((
                        SELECT sum({_MESSAGE_SIZE}) FROM {q}.agui_thread_messages m
                        WHERE m.thread_id = $1 AND m.position >= $8
                          AND m.position < agui_threads.message_count), 0),
                    message_count = $8 + cardinality($10::text[]),
                    state_bytes = coalesce(octet_length($13::text), state_bytes)
                WHERE thread_id = $1 AND version = $4 AND message_count >= $8
                RETURNING {_SAVED}
            ), stored_state AS (
                INSERT INTO {q}.agui_thread_state (thread_id, state_json)
                SELECT $1, $13::text FROM head WHERE $13::text IS NOT NULL
                ON CONFLICT (thread_id) DO UPDATE SET state_json = excluded.state_json
            ), written AS (
                INSERT INTO {q}.agui_thread_messages AS m
                    (thread_id, position, message_id, message_json, stored_at)
                SELECT $1, $8 + u.n - 1, u.message_id, u.message_json, $3
                FROM head, unnest($9::text[], $10::text[]) WITH ORDINALITY
                    AS u (message_id, message_json, n)
                ON CONFLICT (thread_id, position) DO UPDATE
                    SET message_id = excluded.message_id, message_json = excluded.message_json,
                        stored_at = CASE WHEN m.message_id = excluded.message_id
                            AND m.position < (SELECT message_count FROM {q}.agui_threads
                                WHERE thread_id = $1)
                            THEN m.stored_at ELSE excluded.stored_at END
                RETURNING m.position, m.stored_at
            ), removed AS (
                INSERT INTO {q}.agui_thread_removed_messages (thread_id, message_id)
                SELECT DISTINCT $1, r.message_id FROM head, unnest($12::text[]) AS r (message_id)
                ON CONFLICT DO NOTHING
            )
            SELECT head.*, (
                SELECT coalesce(array_agg(w.stored_at ORDER BY w.position), '{{}}')
                FROM written w
            ) FROM head
        """
        # A record and its messages: all ($2 NULL) or the last $2, in one statement (one
        # snapshot).
        self._sql_get_tail = f"""
            SELECT {_COLUMNS}, (
                SELECT coalesce(array_agg(m.message_json ORDER BY m.position), '{{}}')
                FROM {q}.agui_thread_messages m
                WHERE m.thread_id = t.thread_id
                  AND m.position >= greatest(t.message_count - coalesce($2, t.message_count), 0)
                  AND m.position < t.message_count
            ), greatest(t.message_count - coalesce($2, t.message_count), 0), (
                SELECT coalesce(array_agg(m.stored_at ORDER BY m.position), '{{}}')
                FROM {q}.agui_thread_messages m
                WHERE m.thread_id = t.thread_id
                  AND m.position >= greatest(t.message_count - coalesce($2, t.message_count), 0)
                  AND m.position < t.message_count
            ), CASE WHEN $3::boolean THEN {_state_of(q, "t")} END
            FROM {q}.agui_threads t WHERE t.thread_id = $1
        """
        self._sql_page = f"""
            SELECT m.position, m.message_json, m.stored_at FROM {q}.agui_thread_messages m
            WHERE m.thread_id = $1 AND m.position < least(coalesce($2, 2147483647),
                (SELECT message_count FROM {q}.agui_threads WHERE thread_id = $1))
            ORDER BY m.position DESC LIMIT $3
        """
        self._sql_known = f"""
            SELECT m.message_id FROM {q}.agui_thread_messages m
            WHERE m.thread_id = $1 AND m.message_id = ANY($2::text[])
              AND m.position < (SELECT message_count FROM {q}.agui_threads WHERE thread_id = $1)
        """
        self._sql_removed = f"""
            SELECT r.message_id FROM {q}.agui_thread_removed_messages r
            WHERE r.thread_id = $1 AND r.message_id = ANY($2::text[])
        """
        self._sql_list = {after: list_threads_sql(q, after=after) for after in (True, False)}
        self._sql_title = (
            f"UPDATE {q}.agui_threads SET title = $2, title_source = 'owner' WHERE thread_id = $1"
        )
        self._sql_erase = f"SELECT {q}.pausemesh_erase_thread($1, $2)"
        self._sql_lapsed = f"""
            SELECT thread_id FROM {q}.agui_threads WHERE open_deadline <= $1
            ORDER BY open_deadline LIMIT $2
        """
        self._sql_idle = f"""
            SELECT thread_id FROM {q}.agui_threads
            WHERE updated_at < $1 AND {_NOT_PROTOCOL} ORDER BY updated_at LIMIT $2
        """
        self._sql_lease = f"""
            UPDATE {q}.agui_threads
            SET lease_id = $2, lease_run_id = $3, lease_expires_at = $5
            WHERE thread_id = $1
              AND (lease_id IS NULL OR lease_id = $2 OR lease_expires_at <= $4)
            RETURNING {_COLUMNS}
        """
        self._sql_release = f"""
            UPDATE {q}.agui_threads
            SET lease_id = NULL, lease_run_id = NULL, lease_expires_at = NULL
            WHERE thread_id = $1 AND lease_id = $2
        """
        self._sql_renew = f"""
            UPDATE {q}.agui_threads AS t SET lease_expires_at = $3
            FROM unnest($1::text[], $2::text[]) AS u (thread_id, lease_id)
            WHERE t.thread_id = u.thread_id AND t.lease_id = u.lease_id
            RETURNING t.thread_id
        """
        # left(), not LIKE: an instance name may hold LIKE's wildcards.
        self._sql_release_instance = f"""
            UPDATE {q}.agui_threads
            SET lease_id = NULL, lease_run_id = NULL, lease_expires_at = NULL
            WHERE left(lease_id, length($1)) = $1 AND left(lease_id, length($2)) <> $2
        """
        # Fence on the lease, take the sequences, insert, notify: one statement, one commit.
        self._sql_append = f"""
            WITH head AS (
                UPDATE {q}.agui_threads SET last_sequence = last_sequence + $3,
                    lease_id = CASE WHEN $7 THEN NULL ELSE lease_id END,
                    lease_run_id = CASE WHEN $7 THEN NULL ELSE lease_run_id END,
                    lease_expires_at = CASE WHEN $7 THEN NULL ELSE lease_expires_at END
                WHERE thread_id = $1 AND lease_id = $2
                RETURNING last_sequence
            ), ins AS (
                INSERT INTO {q}.agui_thread_events (thread_id, sequence, run_id, event_json)
                SELECT $1, head.last_sequence - $3 + u.n, $4, u.event_json
                FROM head, unnest($5::text[]) WITH ORDINALITY AS u (event_json, n)
            )
            SELECT head.last_sequence, pg_notify($6, head.last_sequence || ' ' || $1)
            FROM head
        """
        self._sql_read = f"""
            SELECT sequence, run_id, event_json FROM {q}.agui_thread_events
            WHERE thread_id = $1 AND sequence > $2 ORDER BY sequence LIMIT $3
        """
        self._sql_head = f"SELECT last_sequence FROM {q}.agui_threads WHERE thread_id = $1"
        # Keyset pagination on (updated_at, thread_id); $4 NULL = from the start.
        self._sql_list_records = f"""
            SELECT {_COLUMNS}, {_state_of(q, "t")} FROM {q}.agui_threads t
            WHERE starts_with(thread_id, $1) AND owner IS NOT DISTINCT FROM $2
              AND ($4::text IS NULL OR (updated_at, thread_id) < ($3, $4::text))
            ORDER BY updated_at DESC, thread_id DESC LIMIT $5
        """

    async def get(
        self, thread_id: str, *, tail: int | None = None, state: bool = True
    ) -> ThreadRecord | None:
        if tail is not None and tail <= 0:
            sql = self._sql_get_state if state else self._sql_get
            row = await self.database.fetchrow(sql, thread_id, read=True)
            if row is None:
                return None
            return await _record(row, state=state, state_json=row[_AFTER] if state else None)
        row = await self.database.fetchrow(self._sql_get_tail, thread_id, tail, state, read=True)
        if row is None:
            return None
        record = await _record(
            row, row[_AFTER], row[_AFTER + 1], state=state, state_json=row[_AFTER + 3]
        )
        return msgspec.structs.replace(record, message_times=list(row[_AFTER + 2]))

    async def read_messages(
        self, thread_id: str, *, before: int | None, limit: int
    ) -> list[StoredMessage]:
        async def op(conn: Conn) -> list[Any]:
            return list(await conn.fetch(self._sql_page, thread_id, before, max(limit, 0)))

        rows = await self.database.run(op, read=True)
        texts = [r[1] for r in rows]
        messages = (
            await sliced(texts, msgspec.json.decode)
            if len(texts) > _DECODE_AT_ONCE
            else [msgspec.json.decode(t) for t in texts]
        )
        return [
            StoredMessage(position=r[0], message=m, stored_at=r[2])
            for r, m in zip(rows, messages, strict=True)
        ]

    async def known_message_ids(self, thread_id: str, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()

        async def op(conn: Conn) -> list[Any]:
            return list(await conn.fetch(self._sql_known, thread_id, list(ids)))

        return {r[0] for r in await self.database.run(op, read=True)}

    async def removed_message_ids(self, thread_id: str, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()

        async def op(conn: Conn) -> list[Any]:
            return list(await conn.fetch(self._sql_removed, thread_id, list(ids)))

        return {r[0] for r in await self.database.run(op, read=True)}

    async def list_records(
        self,
        prefix: str,
        *,
        owner: str | None,
        before: tuple[datetime, str] | None,
        limit: int,
    ) -> list[ThreadRecord]:
        at, after_id = before if before is not None else (None, None)

        async def op(conn: Conn) -> list[Any]:
            return list(
                await conn.fetch(self._sql_list_records, prefix, owner, at, after_id, limit)
            )

        records = []
        for row in await self.database.run(op, read=True):
            # Protocol records hold no messages as a rule; one that does comes whole.
            record = (
                await self.get(row[0])
                if row[_COUNT]
                else await _record(row, [], 0, state=True, state_json=row[_AFTER])
            )
            if record is not None:
                records.append(record)
        return records

    async def _load(self, thread_id: str) -> ThreadRecord:
        record = await self.get(thread_id)
        if record is None:
            raise ThreadNotFoundError(thread_id)
        return record

    async def create_or_load(
        self, thread_id: str, *, owner: str | None, now: datetime
    ) -> ThreadRecord:
        existing = await self.get(thread_id)
        if existing is not None:
            return existing
        await self.database.ensure_schema()
        row = await self.database.fetchrow(self._sql_create, thread_id, owner, _EMPTY_BODY, now)
        # None: another replica created it first; its row is committed and visible now. A new
        # thread's state is the empty one (no row yet).
        if row is None:
            return await self._load(thread_id)
        return await _record(row, state=True)

    async def _save_args(
        self,
        record: ThreadRecord,
        now: datetime,
        agent_title: str | None,
        removed_ids: Sequence[str] = (),
    ) -> list[Any]:
        ids, texts = await _message_rows(record.messages)
        return [
            record.thread_id,
            _body(record),
            now,
            record.version,
            derive_title(record.messages),
            cohort_deadline(record.open_receipt),
            agent_title,
            max(record.messages_from, 0),
            ids,
            texts,
            sum(len(t.encode()) + 2 for t in texts),
            list(removed_ids),
            # None: the state was not read, the stored one stays (no state bytes written).
            None if record.state is UNREAD_STATE else msgspec.json.encode(record.state).decode(),
        ]

    async def save(
        self,
        record: ThreadRecord,
        *,
        now: datetime,
        agent_title: str | None = None,
        removed_ids: Sequence[str] = (),
    ) -> ThreadRecord:
        await self.database.ensure_schema()
        row = await self.database.fetchrow(
            self._sql_save, *await self._save_args(record, now, agent_title, removed_ids)
        )
        if row is None:
            actual = await self._version(record.thread_id)
            raise VersionConflictError(record.thread_id, record.version, actual)
        return _saved(record, row)

    async def _version(self, thread_id: str) -> int:
        sql = f"SELECT version FROM {self.database.q}.agui_threads WHERE thread_id = $1"
        row = await self.database.fetchrow(sql, thread_id)
        if row is None:
            raise ThreadNotFoundError(thread_id)
        return int(row[0])

    async def save_on(self, conn: Conn, record: ThreadRecord, *, now: datetime) -> ThreadRecord:
        """``save`` on the caller's connection, inside the caller's transaction (the push
        outbox commits with it)."""
        row = await conn.fetchrow(self._sql_save, *await self._save_args(record, now, None))
        if row is None:
            actual = await conn.fetchval(
                f"SELECT version FROM {self.database.q}.agui_threads WHERE thread_id = $1",
                record.thread_id,
            )
            if actual is None:
                raise ThreadNotFoundError(record.thread_id)
            raise VersionConflictError(record.thread_id, record.version, actual)
        return _saved(record, row)

    async def acquire_lease(
        self, thread_id: str, *, lease_id: str, run_id: str, now: datetime, expires_at: datetime
    ) -> ThreadRecord:
        await self.database.ensure_schema()
        row = await self.database.fetchrow(
            self._sql_lease, thread_id, lease_id, run_id, now, expires_at
        )
        if row is None:
            await self._version(thread_id)  # ThreadNotFoundError for an unknown thread
            raise ThreadBusyError(thread_id)
        return await _record(row)

    async def release_lease(self, thread_id: str, *, lease_id: str) -> None:
        async def op(conn: Conn) -> None:
            await conn.execute(self._sql_release, thread_id, lease_id)

        await self.database.run(op)

    async def renew_leases(self, leases: Mapping[str, str], *, expires_at: datetime) -> set[str]:
        if not leases:
            return set()
        ids = list(leases)
        lease_ids = [leases[t] for t in ids]

        async def op(conn: Conn) -> set[str]:
            rows = await conn.fetch(self._sql_renew, ids, lease_ids, expires_at)
            return {row[0] for row in rows}

        return await self.database.run(op)

    async def release_instance_leases(self, instance_name: str, *, keep: str) -> int:
        await self.database.ensure_schema()

        async def op(conn: Conn) -> int:
            status = await conn.execute(self._sql_release_instance, f"{instance_name}@", keep)
            return int(status.rsplit(" ", 1)[-1])

        return await self.database.run(op)

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
        if not texts:
            record = await self._load(thread_id)
            if record.lease is None or record.lease.lease_id != lease_id:
                raise LeaseLostError(thread_id)
            if release:
                await self.release_lease(thread_id, lease_id=lease_id)
            return []
        await self.database.ensure_schema()
        row = await self.database.fetchrow(
            self._sql_append,
            thread_id,
            lease_id,
            len(texts),
            run_id,
            texts,
            self.listener.channel,
            release,
        )
        if row is None:
            await self._version(thread_id)  # ThreadNotFoundError for an unknown thread
            raise LeaseLostError(thread_id)
        last = int(row[0])
        # Local waiters need not wait for the notification's round trip.
        self.listener.wake(thread_id, last)
        return list(range(last - len(texts) + 1, last + 1))

    async def read_events(
        self, thread_id: str, *, after_sequence: int, limit: int = 1000
    ) -> list[ThreadLogEntry]:
        async def op(conn: Conn) -> list[Any]:
            return list(await conn.fetch(self._sql_read, thread_id, after_sequence, max(limit, 0)))

        rows = await self.database.run(op, read=True)
        return [ThreadLogEntry(sequence=r[0], run_id=r[1], event_json=r[2]) for r in rows]

    async def _head(self, thread_id: str) -> int:
        row = await self.database.fetchrow(self._sql_head, thread_id, read=True)
        if row is None:
            raise ThreadNotFoundError(thread_id)
        return int(row[0])

    async def wait_for_events(
        self,
        thread_id: str,
        *,
        after_sequence: int,
        wait_seconds: float,
        keep_alive: KeepAlive | None = None,
    ) -> bool:
        await self.listener.start()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_seconds
        head = partial(self._head, thread_id)
        while True:
            # Take the wake-up before reading the head, so a commit in between still wakes us.
            wake = self.listener.notifier.current(thread_id)
            try:
                if await wake.read_head(head) > after_sequence:
                    return True
            except StoreError as error:
                if error.code != "STORE_UNAVAILABLE":
                    raise
                # The database is away (restart, failover): the tail waits, it does not end.
                await asyncio.sleep(max(0.0, min(deadline - loop.time(), 0.5)))
                if loop.time() >= deadline:
                    return False
                continue
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            # Woken by a notification, a reconnect or the wheel's safety read: re-check. Timed
            # out: the tail sends a keep-alive, and its next wait reads the head first. While
            # the wheel writes the keep-alives (given ``keep_alive``), it reads the head itself
            # every few of them.
            notifier = self.listener.notifier
            woke = await notifier.wait(
                wake,
                remaining,
                thread_id=thread_id,
                after_sequence=after_sequence,
                head=head,
                interval=wait_seconds,
                keep_alive=keep_alive,
            )
            if not woke or notifier.stopped:
                return False
            if wake.past(after_sequence):
                return True  # the append that woke us said how far the thread now goes

    def stop_waiting(self) -> None:
        self.listener.notifier.stop()

    async def list_threads(
        self, owner: str | None, *, limit: int, after: ThreadCursor | None = None
    ) -> list[ThreadSummary]:
        sql = self._sql_list[after is not None]
        # No owner (no auth) is '' in the index; the principal rule refuses '' as a principal.
        args: tuple[Any, ...] = (owner or "", max(limit, 0))
        if after is not None:
            args += (after.updated_at, after.thread_id)

        async def op(conn: Conn) -> list[Any]:
            return list(await conn.fetch(sql, *args))

        rows = await self.database.run(op, read=True)
        return [
            ThreadSummary(
                thread_id=r[0],
                title=r[1],
                created_at=r[2],
                updated_at=r[3],
                pending_interrupts=int(r[4]),
                last_sequence=int(r[5]),
            )
            for r in rows
        ]

    async def set_title(self, thread_id: str, title: str) -> None:
        async def op(conn: Conn) -> str:
            return str(await conn.execute(self._sql_title, thread_id, title))

        status = await self.database.run(op)
        if status != "UPDATE 1":
            raise ThreadNotFoundError(thread_id)

    async def erase(self, thread_id: str, *, now: datetime) -> bool:
        await self.database.ensure_schema()
        row = await self.database.fetchrow(self._sql_erase, thread_id, now)
        # Wake local tails so they notice the thread is gone.
        self.listener.wake(thread_id)
        return bool(row is not None and row[0])

    async def forget_erased(self) -> None:
        # Dead tuples stay until VACUUM reuses their space, which the runtime role may not run
        # (it owns no table): autovacuum's, or the operator's (docs/agui.md, erasure).
        pass

    async def idle_threads(self, *, updated_before: datetime, limit: int) -> list[str]:
        async def op(conn: Conn) -> list[Any]:
            return list(await conn.fetch(self._sql_idle, updated_before, max(limit, 0)))

        return [r[0] for r in await self.database.run(op, read=True)]

    async def lapsed_cohorts(self, *, now: datetime, limit: int) -> list[str]:
        async def op(conn: Conn) -> list[Any]:
            return list(await conn.fetch(self._sql_lapsed, now, max(limit, 0)))

        return [r[0] for r in await self.database.run(op, read=True)]

    async def close(self) -> None:
        await self.listener.close()
        await super().close()
