"""The continuation's persisted events and the envelope folded from them.

Events are a tagged union (``type``) of frozen msgspec Structs encoded in camelCase.
The envelope is what callers see: it never carries the token hash.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from pausemesh.core.approvers import Approver, decode_approver, encode_approver

__all__ = (
    "CONTINUATION_SCHEMA_VERSION",
    "Continuation",
    "ContinuationCancelled",
    "ContinuationCreated",
    "ContinuationEscalated",
    "ContinuationEvent",
    "ContinuationExpired",
    "ContinuationReminded",
    "ContinuationResumed",
    "ContinuationStatus",
    "CreatedContinuation",
    "PublicEvent",
    "decode_event",
    "encode_event",
    "public_event",
)

CONTINUATION_SCHEMA_VERSION = 1

ContinuationStatus = Literal["pending", "resumed", "cancelled", "expired"]


class _Event(msgspec.Struct, frozen=True, kw_only=True, rename="camel", tag_field="type"):
    schema_version: int
    continuation_id: str
    version: int
    occurred_at: datetime


class ContinuationCreated(_Event, frozen=True, tag="continuation.created"):
    correlation_id: str
    expires_at: datetime
    payload: Any
    metadata: dict[str, Any]
    resume_token_hash: str
    # Who created it; other principals get "not found". None for unauthenticated servers.
    owner: str | None = None
    # Keyed tokens (core/tokens.py): the server re-derives the token from these and its key.
    token_key_id: str | None = None
    token_nonce: str | None = None
    # Who may decide it (typed: stored as {"kind", "name"}; a row written before holds the
    # text form, read by ``decode_approver``); empty: the owner, as always.
    approvers: tuple[Approver, ...] = ()
    # The owner may decide it too when it is one of the approvers (four eyes waived).
    allow_requester: bool = False
    # The owner's roles when it asked (kept for in-process hosts: a run the server makes for
    # the owner later, when the pause is decided elsewhere, runs with them). Never shown.
    owner_roles: tuple[str, ...] = ()


class ContinuationResumed(_Event, frozen=True, tag="continuation.resumed"):
    idempotency_key: str
    resume_payload: Any
    resolved_by: str | None = None
    # Set when decided out of band (REST with a token, the approvals inbox): the AG-UI thread
    # that is owed a run with this decision. Stores index it in the same write as the event.
    continues_thread: str | None = None


class ContinuationCancelled(_Event, frozen=True, tag="continuation.cancelled"):
    reason: str | None = None


class ContinuationExpired(_Event, frozen=True, tag="continuation.expired"):
    pass


class ContinuationReminded(_Event, frozen=True, tag="continuation.reminded"):
    """A pending pause's reminder fired (``core/timers.py``); nothing else changes."""

    # When its next timer or its deadline is due: what the stores' due index holds.
    next_due_at: datetime | None = None


class ContinuationEscalated(_Event, frozen=True, tag="continuation.escalated"):
    """A pending pause's escalation fired: ``approvers`` may decide it from now on too."""

    approvers: tuple[Approver, ...] = ()
    next_due_at: datetime | None = None


ContinuationEvent = (
    ContinuationCreated
    | ContinuationResumed
    | ContinuationCancelled
    | ContinuationExpired
    | ContinuationReminded
    | ContinuationEscalated
)


class Continuation(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    """The current state of one continuation (no token hash, ever)."""

    schema_version: int
    continuation_id: str
    correlation_id: str
    version: int
    status: ContinuationStatus
    created_at: datetime
    expires_at: datetime
    payload: Any
    metadata: dict[str, Any]
    owner: str | UnsetType = UNSET
    # The approvers' text form (``Approver.text``: role:NAME, operation:ID or a principal id).
    approvers: tuple[str, ...] = ()
    allow_requester: bool = False
    resumed_at: datetime | UnsetType = UNSET
    idempotency_key: str | UnsetType = UNSET
    resume_payload: Any | UnsetType = UNSET
    resolved_by: str | UnsetType = UNSET
    cancelled_at: datetime | UnsetType = UNSET
    reason: str | UnsetType = UNSET
    expired_at: datetime | UnsetType = UNSET
    # When its reminder and its escalation fired (``core/timers.py``), while it waited.
    reminded_at: datetime | UnsetType = UNSET
    escalated_at: datetime | UnsetType = UNSET

    @property
    def is_pending(self) -> bool:
        return self.status == "pending"


class CreatedContinuation(msgspec.Struct, frozen=True, kw_only=True):
    """What ``create`` returns: the envelope and the raw token, the only time it is seen."""

    continuation: Continuation
    resume_token: str


class ResumeOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """A resume as its host sees it: the continuation, and the thread the decision continues.

    ``continues_thread`` is the AG-UI thread owed a run with this decision (recorded with the
    decision, in the same write: ``ContinuationResumed.continues_thread``); None when nobody
    is owed one (a plain continuation, or a resume from inside the conversation).
    """

    continuation: Continuation
    continues_thread: str | None = None


class PublicEvent(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    """An event as shown to API callers: the token hash and derivation data removed."""

    type: str
    schema_version: int
    continuation_id: str
    version: int
    occurred_at: datetime
    correlation_id: str | UnsetType = UNSET
    expires_at: datetime | UnsetType = UNSET
    payload: Any | UnsetType = UNSET
    metadata: dict[str, Any] | UnsetType = UNSET
    owner: str | UnsetType = UNSET
    approvers: tuple[str, ...] = ()
    allow_requester: bool = False
    idempotency_key: str | UnsetType = UNSET
    resume_payload: Any | UnsetType = UNSET
    resolved_by: str | UnsetType = UNSET
    reason: str | UnsetType = UNSET


def public_event(event: ContinuationEvent) -> PublicEvent:
    common: dict[str, Any] = {
        "schema_version": event.schema_version,
        "continuation_id": event.continuation_id,
        "version": event.version,
        "occurred_at": event.occurred_at,
    }
    match event:
        case ContinuationCreated():
            return PublicEvent(
                type="continuation.created",
                correlation_id=event.correlation_id,
                expires_at=event.expires_at,
                payload=event.payload,
                metadata=event.metadata,
                owner=UNSET if event.owner is None else event.owner,
                approvers=tuple(approver.text for approver in event.approvers),
                allow_requester=event.allow_requester,
                **common,
            )
        case ContinuationResumed():
            return PublicEvent(
                type="continuation.resumed",
                idempotency_key=event.idempotency_key,
                resume_payload=event.resume_payload,
                resolved_by=UNSET if event.resolved_by is None else event.resolved_by,
                **common,
            )
        case ContinuationCancelled():
            return PublicEvent(
                type="continuation.cancelled",
                reason=UNSET if event.reason is None else event.reason,
                **common,
            )
        case ContinuationExpired():
            return PublicEvent(type="continuation.expired", **common)
        case ContinuationReminded():
            return PublicEvent(type="continuation.reminded", **common)
        case ContinuationEscalated():
            return PublicEvent(
                type="continuation.escalated",
                approvers=tuple(approver.text for approver in event.approvers),
                **common,
            )


def _enc_hook(value: Any) -> Any:
    if isinstance(value, Approver):
        return encode_approver(value)
    msg = f"cannot encode {type(value).__name__}"
    raise NotImplementedError(msg)


def _dec_hook(kind: type, value: Any) -> Any:
    if kind is Approver:
        return decode_approver(value)
    msg = f"cannot decode {kind.__name__}"
    raise NotImplementedError(msg)


_event_encoder = msgspec.json.Encoder(enc_hook=_enc_hook)
_event_decoder: msgspec.json.Decoder[ContinuationEvent] = msgspec.json.Decoder(
    ContinuationEvent, dec_hook=_dec_hook
)


def encode_event(event: ContinuationEvent) -> bytes:
    return _event_encoder.encode(event)


def decode_event(data: bytes | str) -> ContinuationEvent:
    return _event_decoder.decode(data)
