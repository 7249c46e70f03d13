"""A continuation built by hand, for the protocol projection tests (no store involved)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from pausemesh.core.model import Continuation, ContinuationStatus

__all__ = ("make_continuation",)

CREATED = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def make_continuation(
    payload: Any,
    *,
    status: ContinuationStatus = "pending",
    continuation_id: str = "cont-1",
    correlation_id: str = "thread-1",
) -> Continuation:
    """``payload`` in a continuation created at a fixed moment, due 15 minutes later."""
    return Continuation(
        schema_version=1,
        continuation_id=continuation_id,
        correlation_id=correlation_id,
        version=1 if status == "pending" else 2,
        status=status,
        created_at=CREATED,
        expires_at=CREATED + timedelta(minutes=15),
        payload=payload,
        metadata={},
    )
