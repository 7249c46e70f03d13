"""SQLite migration 46 (issue 44): the message ids a rollback removed from a thread.

A ``rollback`` double-texting policy removes the stopped run's output, but a client that
streamed it (``@ag-ui/client`` keeps every message it saw) sends those messages back with its
next input. ``agui_thread_removed_messages`` remembers each removed id (one row per id, written
by the save that removes it) so a later input's copy is dropped by an index lookup per id,
never a read of the history. Rows go only with their thread's erasure; threads stored before
have none (nothing was rolled back with a memory of it).
"""

from __future__ import annotations

from pausemesh.stores.migrations import Migration

__all__ = ("REMOVED_MESSAGES",)

REMOVED_MESSAGES = Migration(
    version=46,
    name="thread_removed_messages",
    statements=(
        """
        CREATE TABLE agui_thread_removed_messages (
            thread_id TEXT NOT NULL,
            message_id TEXT NOT NULL,
            PRIMARY KEY (thread_id, message_id)
        ) STRICT, WITHOUT ROWID
        """,
        """
        CREATE TRIGGER agui_thread_removed_messages_no_update
            BEFORE UPDATE ON agui_thread_removed_messages
        BEGIN SELECT RAISE(ABORT, 'agui_thread_removed_messages is append-only'); END
        """,
        """
        CREATE TRIGGER agui_thread_removed_messages_no_delete
            BEFORE DELETE ON agui_thread_removed_messages
        WHEN NOT EXISTS (SELECT 1 FROM agui_thread_erasures e WHERE e.thread_id = OLD.thread_id)
        BEGIN SELECT RAISE(ABORT, 'agui_thread_removed_messages rows go only with an erasure');
        END
        """,
    ),
)
