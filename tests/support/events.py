"""Builders for raw continuation events (store-level tests bypass the service)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pausemesh.core.model import (
    CONTINUATION_SCHEMA_VERSION,
    ContinuationCancelled,
    ContinuationCreated,
    ContinuationResumed,
)
from pausemesh.core.tokens import hash_token

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def created(
    continuation_id: str, *, expires_in: float = 900, token: str = "t" * 43
) -> ContinuationCreated:
    return ContinuationCreated(
        schema_version=CONTINUATION_SCHEMA_VERSION,
        continuation_id=continuation_id,
        version=1,
        occurred_at=T0,
        correlation_id="thread-1",
        expires_at=T0 + timedelta(seconds=expires_in),
        payload={"kind": "input", "message": "Which flight?"},
        metadata={},
        resume_token_hash=hash_token(token),
    )


def resumed(continuation_id: str, version: int = 2, key: str = "k1") -> ContinuationResumed:
    return ContinuationResumed(
        schema_version=CONTINUATION_SCHEMA_VERSION,
        continuation_id=continuation_id,
        version=version,
        occurred_at=T0,
        idempotency_key=key,
        resume_payload={"flight": "PM101"},
    )


def cancelled(continuation_id: str, version: int = 2) -> ContinuationCancelled:
    return ContinuationCancelled(
        schema_version=CONTINUATION_SCHEMA_VERSION,
        continuation_id=continuation_id,
        version=version,
        occurred_at=T0,
        reason="user said no",
    )
