"""Per-principal limits on work and streams (framework-free; the web layer applies them).

* ``RateLimit``: ``PAUSEMESH_RATE_LIMIT`` parsed (``120/minute``: 120 starts per minute).
* ``RateLimiter``: the port. A fixed window per key: the first hit of a window opens it, a hit
  past the limit is refused with the seconds left in the window. ``LocalRateLimiter`` counts in
  this process (SQLite and memory: one process is the deployment); the PostgreSQL store counts
  in a table, so replicas share one budget.
* ``StreamSlots``: how many SSE streams a principal holds open in this process (one count for
  runs, one for idle tails).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

from pausemesh.core.errors import SettingsError, TooManyStreamsError

__all__ = (
    "RATE_LIMIT_PATTERN",
    "LocalRateLimiter",
    "RateLimit",
    "RateLimiter",
    "StreamSlot",
    "StreamSlots",
    "window_of",
)

RATE_LIMIT_PATTERN: Final = r"^\s*[1-9][0-9]{0,8}\s*/\s*(second|minute|hour)\s*$"
_PERIODS: Final = {"second": 1, "minute": 60, "hour": 3600}
# Past this many keys the local limiter forgets the windows that have ended.
_PRUNE_AT: Final = 10_000


@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most ``count`` hits per key in each window of ``period_seconds``."""

    count: int
    period_seconds: int

    @classmethod
    def parse(cls, text: str) -> RateLimit:
        """``"120/minute"`` (also ``/second``, ``/hour``); ``SettingsError`` otherwise."""
        if re.fullmatch(RATE_LIMIT_PATTERN, text) is None:
            msg = "PAUSEMESH_RATE_LIMIT must look like 120/minute (per second, minute or hour)"
            raise SettingsError(msg)
        count, _, period = text.partition("/")
        return cls(int(count), _PERIODS[period.strip()])


def window_of(limit: RateLimit, now: float) -> tuple[int, int]:
    """The window ``now`` falls in (its index) and the whole seconds until it ends (>= 1)."""
    index = math.floor(now / limit.period_seconds)
    left = (index + 1) * limit.period_seconds - now
    return index, max(1, math.ceil(left))


@runtime_checkable
class RateLimiter(Protocol):
    async def hit(self, key: str, limit: RateLimit, now: float) -> int | None:
        """Count one hit of ``key`` at ``now`` (epoch seconds): None if within ``limit``,
        else the seconds until the window ends (the ``Retry-After``)."""
        ...


class LocalRateLimiter:
    """Fixed windows counted in this process (per process: document it, never share it)."""

    __slots__ = ("_windows",)

    def __init__(self) -> None:
        self._windows: dict[str, tuple[int, int]] = {}

    async def hit(self, key: str, limit: RateLimit, now: float) -> int | None:
        index, left = window_of(limit, now)
        seen_index, hits = self._windows.get(key, (index, 0))
        hits = hits + 1 if seen_index == index else 1
        if len(self._windows) >= _PRUNE_AT and key not in self._windows:
            self._windows = {k: v for k, v in self._windows.items() if v[0] >= index}
        self._windows[key] = (index, hits)
        return None if hits <= limit.count else left


class StreamSlot:
    """One open stream's place; ``release`` is idempotent (a stream ends once, however)."""

    __slots__ = ("_key", "_slots")

    def __init__(self, slots: StreamSlots, key: str) -> None:
        self._slots: StreamSlots | None = slots
        self._key = key

    def release(self) -> None:
        slots, self._slots = self._slots, None
        if slots is not None:
            slots._free(self._key)  # noqa: SLF001 - the slot's other half


class StreamSlots:
    """At most ``limit`` open streams per key in this process (``what`` names them in the
    refusal: ``streams``, ``tails``)."""

    __slots__ = ("_open", "limit", "what")

    def __init__(self, limit: int, *, what: str = "streams") -> None:
        self.limit = limit
        self.what = what
        self._open: dict[str, int] = {}

    def acquire(self, key: str) -> StreamSlot:
        """A slot for one more stream of ``key``; ``TooManyStreamsError`` when it has none left."""
        held = self._open.get(key, 0)
        if held >= self.limit:
            raise TooManyStreamsError(self.limit, self.what)
        self._open[key] = held + 1
        return StreamSlot(self, key)

    def held(self, key: str) -> int:
        return self._open.get(key, 0)

    def _free(self, key: str) -> None:
        held = self._open.get(key, 0) - 1
        if held > 0:
            self._open[key] = held
        else:
            self._open.pop(key, None)
