"""PostgreSQL migration 42 (issue 42): a thread's messages one per row, appended by each run.

Until now a thread's messages lived in its record's JSON body, so every save rewrote the whole
history (and every lease and read decoded it). From here on each message is a row of
``agui_thread_messages`` at its position (0 the oldest): a run upserts the rows it added or
changed, nothing else. The record keeps ``message_count`` and ``messages_bytes`` (the running
size of the rows, each counted with a two-byte separator), so the CAS, the title and the
``PAUSEMESH_MAX_THREAD_BYTES`` bound stay O(1); its body keeps an empty ``messages``.

The runtime role deletes nothing: rows past ``message_count`` (left by a run that shortened
the history) are dead, never read, and overwritten by the next rows stored there; erasure
deletes a thread's rows through ``pausemesh_erase_thread``, redefined here.

Threads stored before are carried over in the migration's transaction: their messages split
into rows (``jsonb_array_elements``), measured, and emptied from the body.
"""

from __future__ import annotations

from pausemesh.stores.migrations import Migration
from pausemesh.stores.postgres.schema_erasure import erase_only_triggers, erase_thread_function

__all__ = ("THREAD_MESSAGES", "THREAD_MESSAGES_OBJECTS")

THREAD_MESSAGES = Migration(
    version=42,
    name="thread_message_rows",
    statements=(
        """
        CREATE TABLE {schema}.agui_thread_messages (
            thread_id TEXT NOT NULL,
            position INTEGER NOT NULL CHECK (position >= 0),
            message_id TEXT,
            message_json TEXT NOT NULL,
            PRIMARY KEY (thread_id, position)
        )
        """,
        """
        CREATE INDEX agui_thread_messages_by_id
            ON {schema}.agui_thread_messages (thread_id, message_id)
        """,
        *erase_only_triggers("agui_thread_messages"),
        """
        ALTER TABLE {schema}.agui_threads
            ADD COLUMN message_count INTEGER NOT NULL DEFAULT 0 CHECK (message_count >= 0)
        """,
        "ALTER TABLE {schema}.agui_threads ADD COLUMN messages_bytes BIGINT NOT NULL DEFAULT 0",
        """
        INSERT INTO {schema}.agui_thread_messages (thread_id, position, message_id, message_json)
        SELECT t.thread_id, (e.n - 1)::integer,
            CASE WHEN jsonb_typeof(e.value) = 'object' THEN e.value ->> 'id' END,
            e.value::text
        FROM {schema}.agui_threads t,
            jsonb_array_elements(
                CASE WHEN jsonb_typeof(t.body_json::jsonb -> 'messages') = 'array'
                    THEN t.body_json::jsonb -> 'messages' ELSE '[]'::jsonb END
            ) WITH ORDINALITY AS e (value, n)
        """,
        """
        UPDATE {schema}.agui_threads t SET
            message_count = m.count, messages_bytes = m.bytes,
            body_json = (t.body_json::jsonb || '{"messages": []}'::jsonb)::text
        FROM (
            SELECT thread_id, count(*)::integer AS count,
                sum(octet_length(message_json) + 2)::bigint AS bytes
            FROM {schema}.agui_thread_messages GROUP BY thread_id
        ) m
        WHERE t.thread_id = m.thread_id
        """,
        erase_thread_function("agui_thread_events", "agui_thread_messages"),
    ),
)

# What readiness expects once it is applied (``schema._OBJECTS``).
THREAD_MESSAGES_OBJECTS: dict[str, tuple[str, ...]] = {
    "agui_thread_messages": (
        "pausemesh_agui_thread_messages_erase_only",
        "pausemesh_agui_thread_messages_no_truncate",
    ),
}
