"""Time-ordered ids (UUID version 7, RFC 9562) for continuations and correlations.

Ids that grow with time land at the right edge of a B-tree index, so each insert touches one
leaf page instead of a random one: fewer pages per commit on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import os
import time

__all__ = ("uuid7",)

_MILLIS = (1 << 48) - 1
# The 80 bits below the milliseconds keep 74 random bits: the version nibble and the variant
# bits are cleared and set.
_CLEAR = ~((0xF << 76) | (0x3 << 62))
_VERSION_AND_VARIANT = (0x7 << 76) | (0x2 << 62)


def uuid7() -> str:
    """A random UUIDv7: 48 bits of Unix milliseconds, version and variant bits, 74 random bits.

    Written out rather than through ``uuid.UUID`` and ``secrets.randbits``: each create calls
    this, and those two cost more than the id (the bytes come from ``os.urandom`` all the same).
    """
    millis = time.time_ns() // 1_000_000
    value = (millis & _MILLIS) << 80 | int.from_bytes(os.urandom(10))
    value = value & _CLEAR | _VERSION_AND_VARIANT
    text = f"{value:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"
