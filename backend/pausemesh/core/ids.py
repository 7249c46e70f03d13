"""Time-ordered ids (UUID version 7, RFC 9562) for continuations and correlations.

Ids that grow with time land at the right edge of a B-tree index, so each insert touches one
leaf page instead of a random one: fewer pages per commit on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import os
import threading
import time

__all__ = ("uuid7",)

_MILLIS = (1 << 48) - 1
_RAND_A = (1 << 12) - 1
_RAND_B = (1 << 62) - 1
_STEP = 1 << 32
# The id's 122 free bits as one number: 48 of milliseconds, then rand_a (12) and rand_b (62).
_last = 0
_lock = threading.Lock()


def uuid7() -> str:
    """A UUIDv7: 48 bits of Unix milliseconds, version and variant bits, 74 random bits.

    Monotonic within a process (RFC 9562 6.2, method 2): an id made in the same millisecond as
    the one before (or after the clock stepped back) is the one before plus a random step, so
    the ids a process makes sort in the order it made them ("newest first" lists by id).
    Written out rather than through ``uuid.UUID`` and ``secrets.randbits``: each create calls
    this, and those two cost more than the id (the bytes come from ``os.urandom`` all the same).
    """
    global _last  # noqa: PLW0603 - the process's last id, behind the lock
    millis = time.time_ns() // 1_000_000
    drawn = int.from_bytes(os.urandom(10))
    # The bits a UUIDv7 keeps of 80 drawn: rand_a where it sits (above the variant) and rand_b.
    random = ((drawn >> 64) & _RAND_A) << 62 | drawn & _RAND_B
    with _lock:
        value = (millis & _MILLIS) << 74 | random
        if value <= _last:
            value = _last + 1 + random % _STEP
        _last = value
    # Spread into the layout: milliseconds, version 7, rand_a, variant 10, rand_b.
    value = (
        (value >> 74) << 80
        | 0x7 << 76
        | ((value >> 62) & _RAND_A) << 64
        | 0x2 << 62
        | (value & _RAND_B)
    )
    text = f"{value:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"
