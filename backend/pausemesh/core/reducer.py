"""The pure lifecycle reducer: events in, envelope out, no I/O.

``created`` (version 1) → any of ``reminded``, ``escalated`` while it waits (each once, by
its timer: ``core/timers.py``) → one of ``resumed | cancelled | expired`` (terminal).
"""

from __future__ import annotations

from collections.abc import Iterable

from msgspec.structs import replace

from pausemesh.core.errors import (
    ContinuationIdMismatchError,
    InvalidTransitionError,
    UnsupportedSchemaVersionError,
    VersionConflictError,
)
from pausemesh.core.model import (
    CONTINUATION_SCHEMA_VERSION,
    Continuation,
    ContinuationCancelled,
    ContinuationCreated,
    ContinuationEscalated,
    ContinuationEvent,
    ContinuationExpired,
    ContinuationReminded,
    ContinuationResumed,
)

__all__ = ("apply_event", "replay")


def _event_type(event: ContinuationEvent) -> str:
    return type(event).__struct_config__.tag  # type: ignore[return-value]


def apply_event(state: Continuation | None, event: ContinuationEvent) -> Continuation:  # noqa: PLR0911 - one return per event kind
    """Fold one event into ``state``; raise a typed error for anything out of order."""
    if event.schema_version != CONTINUATION_SCHEMA_VERSION:
        raise UnsupportedSchemaVersionError(event.schema_version)
    if state is not None and event.continuation_id != state.continuation_id:
        raise ContinuationIdMismatchError(state.continuation_id, event.continuation_id)
    current_version = 0 if state is None else state.version
    if event.version != current_version + 1:
        raise VersionConflictError(event.continuation_id, current_version + 1, event.version)

    if state is None:
        if not isinstance(event, ContinuationCreated):
            raise InvalidTransitionError(event.continuation_id, _event_type(event), "missing")
        created = Continuation(
            schema_version=event.schema_version,
            continuation_id=event.continuation_id,
            correlation_id=event.correlation_id,
            version=event.version,
            status="pending",
            created_at=event.occurred_at,
            expires_at=event.expires_at,
            payload=event.payload,
            metadata=event.metadata,
            approvers=tuple(approver.text for approver in event.approvers),
            allow_requester=event.allow_requester,
        )
        return created if event.owner is None else replace(created, owner=event.owner)
    if state.status != "pending" or isinstance(event, ContinuationCreated):
        raise InvalidTransitionError(state.continuation_id, _event_type(event), state.status)

    match event:
        case ContinuationResumed():
            resumed = replace(
                state,
                version=event.version,
                status="resumed",
                resumed_at=event.occurred_at,
                idempotency_key=event.idempotency_key,
                resume_payload=event.resume_payload,
            )
            if event.resolved_by is None:
                return resumed
            return replace(resumed, resolved_by=event.resolved_by)
        case ContinuationCancelled():
            cancelled = replace(
                state, version=event.version, status="cancelled", cancelled_at=event.occurred_at
            )
            return cancelled if event.reason is None else replace(cancelled, reason=event.reason)
        case ContinuationExpired():
            return replace(
                state, version=event.version, status="expired", expired_at=event.occurred_at
            )
        case ContinuationReminded():
            return replace(state, version=event.version, reminded_at=event.occurred_at)
        case ContinuationEscalated():
            added = tuple(a.text for a in event.approvers if a.text not in state.approvers)
            return replace(
                state,
                version=event.version,
                escalated_at=event.occurred_at,
                approvers=state.approvers + added,
            )


def replay(events: Iterable[ContinuationEvent]) -> Continuation | None:
    """Fold a whole stream; ``None`` for an empty one. Deterministic for equal input."""
    state: Continuation | None = None
    for event in events:
        state = apply_event(state, event)
    return state
