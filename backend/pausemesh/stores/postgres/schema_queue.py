"""PostgreSQL migration 44 (issue 44): the queue of a thread's waiting inputs (double texting).

One row per input that arrived while a run held its thread, under ``enqueue``, ``interrupt``
or ``rollback`` (``core/run_queue.py``), shared by every replica; ``priority`` 0 for the
interrupting kinds, 1 for ``enqueue``. The runtime role deletes nothing: a row whose run ended
gets ``done_at`` and loses its input in one UPDATE, and the partial index holds only the rows
still waiting. TRUNCATE is refused like everywhere else.
"""

from __future__ import annotations

from pausemesh.stores.migrations import Migration

__all__ = ("THREAD_QUEUE", "THREAD_QUEUE_OBJECTS")

THREAD_QUEUE = Migration(
    version=44,
    name="agui_thread_queue",
    statements=(
        """
        CREATE TABLE {schema}.agui_thread_queue (
            position BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            entry_id TEXT NOT NULL UNIQUE,
            thread_id TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('enqueue', 'interrupt', 'rollback')),
            priority SMALLINT NOT NULL CHECK (priority IN (0, 1)),
            run_id TEXT NOT NULL,
            input_json TEXT,
            principal TEXT,
            roles_json TEXT NOT NULL,
            message_ids_json TEXT NOT NULL,
            after_sequence BIGINT NOT NULL CHECK (after_sequence >= 0),
            queued_at TIMESTAMPTZ NOT NULL,
            done_at TIMESTAMPTZ,
            CHECK ((done_at IS NULL) = (input_json IS NOT NULL))
        )
        """,
        """
        CREATE INDEX agui_thread_queue_waiting
            ON {schema}.agui_thread_queue (thread_id, priority, position)
            WHERE done_at IS NULL
        """,
        """
        CREATE TRIGGER pausemesh_agui_thread_queue_no_delete
            BEFORE DELETE ON {schema}.agui_thread_queue
            FOR EACH ROW EXECUTE FUNCTION {schema}.pausemesh_reject_mutation()
        """,
        """
        CREATE TRIGGER pausemesh_agui_thread_queue_no_truncate
            BEFORE TRUNCATE ON {schema}.agui_thread_queue
            FOR EACH STATEMENT EXECUTE FUNCTION {schema}.pausemesh_reject_mutation()
        """,
    ),
)

# What readiness expects once it is applied (``schema._OBJECTS``).
THREAD_QUEUE_OBJECTS: dict[str, tuple[str, ...]] = {
    "agui_thread_queue": (
        "pausemesh_agui_thread_queue_no_delete",
        "pausemesh_agui_thread_queue_no_truncate",
    ),
}
