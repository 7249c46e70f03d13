"""SQLite migration 44 (issue 44): the queue of a thread's waiting inputs (double texting).

One row per input that arrived while a run held its thread, under ``enqueue``, ``interrupt``
or ``rollback`` (``core/run_queue.py``); ``priority`` 0 for the interrupting kinds, 1 for
``enqueue``, so the head is ``ORDER BY priority, position`` on one index. A row is deleted once
its run ended (or its thread is gone).
"""

from __future__ import annotations

from pausemesh.stores.migrations import Migration

__all__ = ("THREAD_QUEUE",)

THREAD_QUEUE = Migration(
    version=44,
    name="agui_thread_queue",
    statements=(
        """
        CREATE TABLE agui_thread_queue (
            position INTEGER PRIMARY KEY AUTOINCREMENT,
            entry_id TEXT NOT NULL UNIQUE,
            thread_id TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('enqueue', 'interrupt', 'rollback')),
            priority INTEGER NOT NULL CHECK (priority IN (0, 1)),
            run_id TEXT NOT NULL,
            input_json TEXT NOT NULL CHECK (json_valid(input_json)),
            principal TEXT,
            roles_json TEXT NOT NULL CHECK (json_valid(roles_json)),
            message_ids_json TEXT NOT NULL CHECK (json_valid(message_ids_json)),
            after_sequence INTEGER NOT NULL CHECK (after_sequence >= 0),
            queued_at_us INTEGER NOT NULL
        ) STRICT
        """,
        """
        CREATE INDEX agui_thread_queue_order
            ON agui_thread_queue (thread_id, priority, position)
        """,
    ),
)
