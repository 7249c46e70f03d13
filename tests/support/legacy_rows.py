"""Rows as a store holds them: the created event's stored JSON, and rows written the way a
release before typed approvers wrote them (approvers as strings, no ``allowRequester``).

SQLite and PostgreSQL rows are read and written with plain SQL on the store's own database;
the memory store's snapshot is read from its stream (it never holds rows written before: it
starts empty with every process).
"""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

import msgspec

from pausemesh.core.ports import EventStore
from pausemesh.stores.memory import InMemoryEventStore
from pausemesh.stores.postgres import PostgresEventStore
from pausemesh.stores.postgres.database import Conn
from pausemesh.stores.sqlite import SqliteEventStore
from pausemesh.stores.sqlite.epoch import epoch_us

__all__ = ("stored_created", "write_legacy_created")


async def stored_created(store: EventStore, continuation_id: str) -> dict[str, Any]:
    """The stored JSON of ``continuation_id``'s ``continuation.created`` event."""
    if isinstance(store, InMemoryEventStore):
        raw: str | bytes = store._streams[continuation_id][0]
    elif isinstance(store, SqliteEventStore):
        [(raw,)] = await store.database.read(
            "SELECT event_json FROM continuation_events WHERE continuation_id = ? AND version = 1",
            (continuation_id,),
        )
    elif isinstance(store, PostgresEventStore):
        sql = (
            f"SELECT event_json FROM {store.database.q}.continuation_events"  # noqa: S608 - quoted schema
            " WHERE continuation_id = $1 AND version = 1"
        )

        async def fetch(conn: Conn) -> str:
            return str(await conn.fetchval(sql, continuation_id))

        raw = await store.database.run(fetch, read=True)
    else:
        raise TypeError(type(store).__name__)
    created: dict[str, Any] = msgspec.json.decode(raw)
    return created


async def write_legacy_created(
    store: EventStore,
    template_id: str,
    continuation_id: str,
    approvers: list[str],
    **fields: Any,
) -> str:
    """A pending ``continuation_id`` copied from ``template_id``'s created event (with
    ``fields`` replaced, camelCase), written as before typed approvers: ``approvers`` as strings
    in the event and in the inbox's index."""
    event = await stored_created(store, template_id)
    event.pop("allowRequester", None)
    event.update(fields, continuationId=continuation_id, approvers=approvers)
    text = msgspec.json.encode(event).decode()
    expires_at = datetime.fromisoformat(event["expiresAt"])
    if isinstance(store, SqliteEventStore):
        deadline = epoch_us(expires_at)

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO continuation_streams"
                " (continuation_id, version, pending_expires_at_us) VALUES (?, 1, ?)",
                (continuation_id, deadline),
            )
            conn.execute(
                "INSERT INTO continuation_events VALUES (?, 1, ?)", (continuation_id, text)
            )
            conn.executemany(
                "INSERT INTO continuation_approvers VALUES (?, ?)",
                [(approver, continuation_id) for approver in approvers],
            )

        await store.database.write(op)
    elif isinstance(store, PostgresEventStore):
        q = store.database.q

        async def insert(conn: Conn) -> None:
            async with conn.transaction():
                await conn.execute(
                    f"INSERT INTO {q}.continuation_streams"  # noqa: S608 - quoted schema
                    " (continuation_id, version, pending_expires_at) VALUES ($1, 1, $2)",
                    continuation_id,
                    expires_at,
                )
                await conn.execute(
                    f"INSERT INTO {q}.continuation_events VALUES ($1, 1, $2)",  # noqa: S608
                    continuation_id,
                    text,
                )
                await conn.executemany(
                    f"INSERT INTO {q}.continuation_approvers VALUES ($1, $2)",  # noqa: S608
                    [(approver, continuation_id) for approver in approvers],
                )

        await store.database.run(insert)
    else:
        raise TypeError(type(store).__name__)
    return continuation_id
