"""PostgreSQL migration 48 (issue 42): a thread's AG-UI state in a row of its own.

Until now the state lived in the record's JSON body, so every save wrote it again (megabytes
for a large state) and every lease read it. From here on it is the one row of
``agui_thread_state`` per thread, written only by a save whose run changed the state and read
only by what needs it (``get``; a lease never). The record keeps ``state_bytes``, the stored
state's size, so ``stored_bytes`` (what ``PAUSEMESH_MAX_THREAD_BYTES`` bounds) stays what it
was without reading the state. A thread with no row has the empty state ``{}``.

The runtime role inserts and updates rows, never deletes them: they go with their thread's
erasure (``pausemesh_erase_thread``, redefined here). Threads stored before are carried over
in the migration's transaction: their state copied into a row, measured, and taken out of the
body. (Version 47 is left to the outbox's line of work.)
"""

from __future__ import annotations

from pausemesh.stores.migrations import Migration
from pausemesh.stores.postgres.schema_erasure import erase_only_triggers, erase_thread_function

__all__ = ("THREAD_STATE", "THREAD_STATE_OBJECTS")

THREAD_STATE = Migration(
    version=48,
    name="thread_state_rows",
    statements=(
        """
        CREATE TABLE {schema}.agui_thread_state (
            thread_id TEXT PRIMARY KEY,
            state_json TEXT NOT NULL
        )
        """,
        *erase_only_triggers("agui_thread_state"),
        "ALTER TABLE {schema}.agui_threads ADD COLUMN state_bytes BIGINT NOT NULL DEFAULT 2",
        """
        INSERT INTO {schema}.agui_thread_state (thread_id, state_json)
        SELECT thread_id, (body_json::jsonb -> 'state')::text FROM {schema}.agui_threads
        WHERE body_json::jsonb -> 'state' IS NOT NULL
        """,
        """
        UPDATE {schema}.agui_threads t SET
            state_bytes = coalesce(
                (SELECT octet_length(s.state_json) FROM {schema}.agui_thread_state s
                 WHERE s.thread_id = t.thread_id), 2),
            body_json = (t.body_json::jsonb - 'state')::text
        """,
        erase_thread_function(
            "agui_thread_events",
            "agui_thread_messages",
            "agui_thread_removed_messages",
            "agui_thread_state",
        ),
    ),
)

# What readiness expects once it is applied (``schema._OBJECTS``).
THREAD_STATE_OBJECTS: dict[str, tuple[str, ...]] = {
    "agui_thread_state": (
        "pausemesh_agui_thread_state_erase_only",
        "pausemesh_agui_thread_state_no_truncate",
    ),
}
