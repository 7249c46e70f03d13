"""SQLite migration 48 (issue 42): a thread's AG-UI state in a row of its own.

Until now the state lived in the thread's record row, so SQLite rewrote it (megabytes for a
large state) on every lease, append and save, and every lease read it. From here on it is the
one row of ``agui_thread_state`` per thread, written only by a save whose run changed the
state and read only by what needs it (``get``; a lease never). The record keeps
``state_bytes``, the stored state's size, so ``stored_bytes`` (what
``PAUSEMESH_MAX_THREAD_BYTES`` bounds) stays what it was without reading the state. A thread
with no row has the empty state ``{}``. Rows go only with their thread's erasure.

Threads stored before are carried over here: their state copied into a row, measured, and the
column dropped from the record. (Version 47 is left to the outbox's line of work.)
"""

from __future__ import annotations

from pausemesh.stores.migrations import Migration

__all__ = ("THREAD_STATE",)

THREAD_STATE = Migration(
    version=48,
    name="thread_state_rows",
    statements=(
        """
        CREATE TABLE agui_thread_state (
            thread_id TEXT PRIMARY KEY,
            state_json TEXT NOT NULL CHECK (json_valid(state_json))
        ) STRICT
        """,
        """
        CREATE TRIGGER agui_thread_state_no_delete
            BEFORE DELETE ON agui_thread_state
        WHEN NOT EXISTS (SELECT 1 FROM agui_thread_erasures e WHERE e.thread_id = OLD.thread_id)
        BEGIN SELECT RAISE(ABORT, 'agui_thread_state rows go only with an erasure'); END
        """,
        "ALTER TABLE agui_threads ADD COLUMN state_bytes INTEGER NOT NULL DEFAULT 2",
        """
        INSERT INTO agui_thread_state (thread_id, state_json)
        SELECT thread_id, state_json FROM agui_threads
        """,
        "UPDATE agui_threads SET state_bytes = length(CAST(state_json AS BLOB))",
        # The sizes index holds the state's size too: a read picks its path from it alone.
        "DROP INDEX agui_threads_by_sizes",
        "ALTER TABLE agui_threads DROP COLUMN state_json",
        """
        CREATE INDEX agui_threads_by_sizes ON agui_threads
            (thread_id, stored_bytes, message_count, messages_bytes, state_bytes)
        """,
    ),
)
