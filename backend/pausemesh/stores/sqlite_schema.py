"""The SQLite schema, as an ordered list of migrations (applied on open, inside one lock)."""

from __future__ import annotations

from pausemesh.stores.migrations import Migration

__all__ = ("SQLITE_MIGRATIONS",)

_CONTINUATIONS = Migration(
    version=1,
    name="continuation_streams",
    statements=(
        """
        CREATE TABLE continuation_streams (
            continuation_id TEXT PRIMARY KEY,
            version INTEGER NOT NULL CHECK (version >= 0),
            -- deadline in epoch microseconds while pending, NULL once settled (sweeper index)
            pending_expires_at_us INTEGER
        ) STRICT
        """,
        """
        CREATE INDEX continuation_streams_due
            ON continuation_streams (pending_expires_at_us)
            WHERE pending_expires_at_us IS NOT NULL
        """,
        """
        CREATE TABLE continuation_events (
            continuation_id TEXT NOT NULL REFERENCES continuation_streams (continuation_id),
            version INTEGER NOT NULL CHECK (version > 0),
            event_json TEXT NOT NULL CHECK (json_valid(event_json)),
            PRIMARY KEY (continuation_id, version)
        ) STRICT, WITHOUT ROWID
        """,
        """
        CREATE TRIGGER continuation_events_no_update BEFORE UPDATE ON continuation_events
        BEGIN SELECT RAISE(ABORT, 'continuation_events is append-only'); END
        """,
        """
        CREATE TRIGGER continuation_events_no_delete BEFORE DELETE ON continuation_events
        BEGIN SELECT RAISE(ABORT, 'continuation_events is append-only'); END
        """,
        """
        CREATE TRIGGER continuation_streams_no_delete BEFORE DELETE ON continuation_streams
        BEGIN SELECT RAISE(ABORT, 'continuation_streams rows are never deleted'); END
        """,
    ),
)

SQLITE_MIGRATIONS: tuple[Migration, ...] = (_CONTINUATIONS,)
