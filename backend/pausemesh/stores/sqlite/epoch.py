"""Instants as integer microseconds since the Unix epoch (how the SQLite tables store them)."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ("epoch_us", "from_epoch_us")

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def epoch_us(moment: datetime) -> int:
    # Integer arithmetic: exact at any date, unlike timestamp() * 1e6.
    delta = moment.astimezone(UTC) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_epoch_us(value: int) -> datetime:
    return datetime.fromtimestamp(value // 1_000_000, tz=UTC).replace(microsecond=value % 1_000_000)
