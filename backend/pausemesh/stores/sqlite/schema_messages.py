"""SQLite migration 42 (issue 42): a thread's messages one per row, appended by each run.

Until now a thread's messages lived in one JSON column of its ``agui_threads`` row, so every
save rewrote (and first re-read) the whole history. From here on each message is a row of
``agui_thread_messages`` at its position (0 the oldest): a run writes the rows it added or
changed, nothing else. The thread row keeps ``message_count`` and ``messages_bytes`` (the
running size of the rows, each counted with a two-byte separator) so the CAS, the title and the
``PAUSEMESH_MAX_THREAD_BYTES`` bound stay O(1); its ``stored_bytes`` becomes the size of what
the row itself holds (state, receipts, and an empty ``messages_json``), which still picks the
large-read path for a thread whose state is large.

Threads stored before are carried over here, in the migration's one transaction: their
messages split into rows (``json_each``), their sizes measured, ``messages_json`` emptied.
"""

from __future__ import annotations

from pausemesh.stores.migrations import Migration

__all__ = ("THREAD_MESSAGES",)

THREAD_MESSAGES = Migration(
    version=42,
    name="thread_message_rows",
    statements=(
        """
        CREATE TABLE agui_thread_messages (
            thread_id TEXT NOT NULL,
            position INTEGER NOT NULL CHECK (position >= 0),
            message_id TEXT,
            message_json TEXT NOT NULL,
            PRIMARY KEY (thread_id, position)
        ) STRICT
        """,
        "CREATE INDEX agui_thread_messages_by_id ON agui_thread_messages (thread_id, message_id)",
        "ALTER TABLE agui_threads ADD COLUMN message_count INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE agui_threads ADD COLUMN messages_bytes INTEGER NOT NULL DEFAULT 0",
        # What a read needs to pick its path, beside the id (never walking a row's overflow).
        """
        CREATE INDEX agui_threads_by_sizes
            ON agui_threads (thread_id, stored_bytes, message_count, messages_bytes)
        """,
        """
        INSERT INTO agui_thread_messages (thread_id, position, message_id, message_json)
        SELECT t.thread_id, e.key,
            CASE WHEN e.type = 'object' THEN json_extract(e.value, '$.id') END,
            CASE WHEN e.type IN ('object', 'array') THEN e.value
                WHEN e.type = 'true' THEN 'true' WHEN e.type = 'false' THEN 'false'
                ELSE json_quote(e.value) END
        FROM agui_threads t, json_each(t.messages_json) e
        """,
        """
        UPDATE agui_threads SET
            message_count = json_array_length(messages_json),
            messages_bytes = coalesce((SELECT sum(length(CAST(m.message_json AS BLOB)) + 2) FROM agui_thread_messages m
                WHERE m.thread_id = agui_threads.thread_id), 0),
            messages_json = '[]'
        """,
        """
        UPDATE agui_threads SET stored_bytes = 2
            + length(CAST(state_json AS BLOB))
            + coalesce(length(CAST(open_receipt_json AS BLOB)), 0)
            + coalesce(length(CAST(closed_receipt_json AS BLOB)), 0)
        """,
    ),
)
