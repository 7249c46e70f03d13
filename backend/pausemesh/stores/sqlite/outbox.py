"""The outbox rows a SQLite write queues (``a2a_push_deliveries``, its ``channel`` column from
migration ``outbox_channels``), shared by the event store (webhooks queued with a
continuation's events) and the push store (A2A notices queued with a task's save)."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from pausemesh.core.push import OutboxEntry
from pausemesh.stores.sqlite.database import GroupInsert

__all__ = ("OUTBOX_GROUP_INSERT", "QUEUE_OUTBOX", "outbox_rows")

QUEUE_OUTBOX = (
    "INSERT INTO a2a_push_deliveries (delivery_id, task_id, channel, config_json,"
    " payload_json, created_at_us, next_attempt_at_us) VALUES (?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT DO NOTHING"
)

# The same rows as a group commit's one statement for all its writes (``GroupInsert``).
OUTBOX_GROUP_INSERT = GroupInsert(
    "INSERT INTO a2a_push_deliveries (delivery_id, task_id, channel, config_json,"
    " payload_json, created_at_us, next_attempt_at_us)",
    7,
    " ON CONFLICT DO NOTHING",
)


def outbox_rows(
    entries: Sequence[OutboxEntry], at_us: int
) -> list[tuple[str, str, str, str, str, int, int]]:
    """``QUEUE_OUTBOX``'s parameters for ``entries``, due at ``at_us``."""
    encode = msgspec.json.encode
    return [
        (
            entry.delivery_id,
            entry.task_id,
            entry.channel,
            encode(entry.config).decode(),
            encode(entry.payload).decode(),
            at_us,
            at_us,
        )
        for entry in entries
    ]
