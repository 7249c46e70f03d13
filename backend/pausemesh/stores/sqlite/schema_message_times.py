"""SQLite migration 45 (issue 44): when the server first stored each message.

``agui_thread_messages.stored_at_us`` (microseconds since the epoch, UTC) is set by the save
that first stores a message at its position and kept when a later save rewrites that position
with the same message id. Rows stored before this migration keep NULL: their time was never
recorded, and a client falls back to its own.
"""

from __future__ import annotations

from pausemesh.stores.migrations import Migration

__all__ = ("MESSAGE_TIMES",)

MESSAGE_TIMES = Migration(
    version=45,
    name="thread_message_times",
    statements=("ALTER TABLE agui_thread_messages ADD COLUMN stored_at_us INTEGER",),
)
