"""PostgreSQL migration 46 (issue 44): the message ids a rollback removed from a thread.

A ``rollback`` double-texting policy removes the stopped run's output, but a client that
streamed it (``@ag-ui/client`` keeps every message it saw) sends those messages back with its
next input. ``agui_thread_removed_messages`` remembers each removed id (one row per id, written
in the statement of the save that removes it) so a later input's copy is dropped by an index
lookup per id, never a read of the history. The runtime role only inserts; rows go with their
thread's erasure (``pausemesh_erase_thread``, redefined here). Threads stored before have none.
"""

from __future__ import annotations

from pausemesh.stores.migrations import Migration
from pausemesh.stores.postgres.schema_erasure import erase_only_triggers, erase_thread_function

__all__ = ("REMOVED_MESSAGES", "REMOVED_MESSAGES_OBJECTS")

REMOVED_MESSAGES = Migration(
    version=46,
    name="thread_removed_messages",
    statements=(
        """
        CREATE TABLE {schema}.agui_thread_removed_messages (
            thread_id TEXT NOT NULL,
            message_id TEXT NOT NULL,
            PRIMARY KEY (thread_id, message_id)
        )
        """,
        """
        CREATE TRIGGER pausemesh_agui_thread_removed_messages_no_update
            BEFORE UPDATE ON {schema}.agui_thread_removed_messages
            FOR EACH ROW EXECUTE FUNCTION {schema}.pausemesh_reject_mutation()
        """,
        *erase_only_triggers("agui_thread_removed_messages"),
        erase_thread_function(
            "agui_thread_events", "agui_thread_messages", "agui_thread_removed_messages"
        ),
    ),
)

# What readiness expects once it is applied (``schema._OBJECTS``).
REMOVED_MESSAGES_OBJECTS: dict[str, tuple[str, ...]] = {
    "agui_thread_removed_messages": (
        "pausemesh_agui_thread_removed_messages_no_update",
        "pausemesh_agui_thread_removed_messages_erase_only",
        "pausemesh_agui_thread_removed_messages_no_truncate",
    ),
}
