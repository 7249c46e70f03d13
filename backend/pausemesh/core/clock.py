"""Clocks: the system one, and a settable one for tests and simulations."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

__all__ = ("ManualClock", "SystemClock", "iso_millis")


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class ManualClock:
    """A clock that only moves when told to (ships with the library for host tests)."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)

    def set(self, when: datetime) -> None:
        self._now = when


def iso_millis(moment: datetime) -> str:
    """ISO 8601 in UTC with milliseconds and ``Z``: JavaScript's ``toISOString`` form, which
    every protocol projection (AG-UI, MCP, A2A) emits so receipts hash alike everywhere."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
