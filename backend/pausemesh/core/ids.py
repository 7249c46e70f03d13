"""Time-ordered ids (UUID version 7, RFC 9562) for continuations and correlations.

Ids that grow with time land at the right edge of a B-tree index, so each insert touches one
leaf page instead of a random one: fewer pages per commit on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import secrets
import time
import uuid

__all__ = ("uuid7",)


def uuid7() -> str:
    """A random UUIDv7: 48 bits of Unix milliseconds, version and variant bits, 74 random bits."""
    millis = time.time_ns() // 1_000_000
    value = (millis & ((1 << 48) - 1)) << 80 | secrets.randbits(80)
    value = (value & ~(0xF << 76)) | (0x7 << 76)  # version 7
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # RFC 9562 variant
    return str(uuid.UUID(int=value))
