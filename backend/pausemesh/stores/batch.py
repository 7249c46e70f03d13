"""Checks every store runs on an append batch before it writes anything."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

import msgspec

from pausemesh.core.approvers import Approver
from pausemesh.core.errors import (
    ContinuationIdMismatchError,
    InvalidInputError,
    StoreError,
    VersionConflictError,
)
from pausemesh.core.model import (
    ContinuationCreated,
    ContinuationEscalated,
    ContinuationEvent,
    ContinuationReminded,
    ContinuationResumed,
    decode_event,
    encode_event,
)
from pausemesh.core.timers import next_due

__all__ = (
    "MAX_EVENTS_PER_STREAM",
    "approver_index_keys",
    "batch_approvers",
    "batch_due",
    "batch_owed_thread",
    "check_batch",
    "decode_stream",
    "redacted",
)

# A lifecycle is two events; the cap leaves room for future event kinds, not for abuse.
MAX_EVENTS_PER_STREAM = 32
_MAX_SAFE = 2**53 - 1


def check_batch(
    continuation_id: str, expected_version: int, events: Sequence[ContinuationEvent]
) -> list[bytes]:
    """Validate ids and versions of ``events``; return their encoded snapshots."""
    if isinstance(expected_version, bool) or not isinstance(expected_version, int):
        msg = "expected_version must be an integer"
        raise InvalidInputError(msg, code="INVALID_VERSION")
    if not 0 <= expected_version <= _MAX_SAFE - len(events):
        msg = "expected_version is out of range"
        raise InvalidInputError(msg, code="INVALID_VERSION")
    if expected_version + len(events) > MAX_EVENTS_PER_STREAM:
        msg = f"a stream holds at most {MAX_EVENTS_PER_STREAM} events"
        raise StoreError(msg, code="STREAM_TOO_LARGE")
    encoded: list[bytes] = []
    for index, event in enumerate(events):
        if event.continuation_id != continuation_id:
            raise ContinuationIdMismatchError(continuation_id, event.continuation_id)
        if event.version != expected_version + index + 1:
            raise VersionConflictError(continuation_id, expected_version + index + 1, event.version)
        if (event.version == 1) != isinstance(event, ContinuationCreated):
            msg = "only the first event of a stream is continuation.created"
            raise InvalidInputError(msg, code="INVALID_EVENT")
        encoded.append(encode_event(event))
    return encoded


def decode_stream(continuation_id: str, rows: Sequence[bytes | str]) -> list[ContinuationEvent]:
    """Decode stored snapshots, refusing gaps, foreign ids and undecodable rows."""
    events: list[ContinuationEvent] = []
    for index, row in enumerate(rows):
        try:
            event = decode_event(row)
        except Exception as error:  # msgspec raises DecodeError/ValidationError
            msg = f"stored event {index + 1} of a stream does not decode"
            raise StoreError(msg, code="CORRUPT_STREAM") from error
        if event.continuation_id != continuation_id or event.version != index + 1:
            msg = "stored stream has a gap or a foreign event"
            raise StoreError(msg, code="CORRUPT_STREAM")
        events.append(event)
    return events


def approver_index_keys(approvers: Iterable[Approver]) -> list[str]:
    """The approvals index's keys of ``approvers``: their text form (``role:NAME``,
    ``operation:ID``, a principal id), one reading each since no principal id starts with a
    kind's prefix, and the form rows written before typed approvers hold, so those still
    match without a migration."""
    return [approver.text for approver in approvers]


def batch_approvers(events: Sequence[ContinuationEvent]) -> list[str]:
    """The index keys of the approvers a batch creates its stream with, or an escalation adds
    (the inbox's index)."""
    keys: list[str] = []
    for event in events:
        if isinstance(event, ContinuationCreated | ContinuationEscalated):
            keys += approver_index_keys(event.approvers)
    return keys


def batch_due(events: Sequence[ContinuationEvent]) -> datetime | None:
    """When the stream a batch leaves needs the sweeper next (its first unfired timer or its
    deadline, ``core/timers.py``); None once it is settled. The stores' due index."""
    last = events[-1] if events else None
    if isinstance(last, ContinuationCreated):
        return next_due(last.expires_at, last.metadata)
    if isinstance(last, ContinuationReminded | ContinuationEscalated):
        return last.next_due_at
    return None


def batch_owed_thread(events: Sequence[ContinuationEvent]) -> str | None:
    """The thread an out-of-band resume in this batch continues (its owed run), if any."""
    for event in events:
        if isinstance(event, ContinuationResumed) and event.continues_thread is not None:
            return event.continues_thread
    return None


def redacted(event: ContinuationEvent) -> ContinuationEvent:
    """``event`` without what was asked or answered (``EventStore.erase_correlated``)."""
    if isinstance(event, ContinuationCreated):
        return msgspec.structs.replace(event, payload=None, metadata={})
    if isinstance(event, ContinuationResumed):
        return msgspec.structs.replace(event, resume_payload=None)
    return event
