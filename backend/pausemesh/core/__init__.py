"""The protocol-neutral continuation core: no web framework, driver or protocol SDK here."""

from pausemesh.core.canonical import canonical_json, canonical_sha256
from pausemesh.core.clock import ManualClock, SystemClock
from pausemesh.core.errors import (
    ContinuationCancelledError,
    ContinuationExpiredError,
    ContinuationIdMismatchError,
    ContinuationNotFoundError,
    IdempotencyConflictError,
    InvalidInputError,
    InvalidTransitionError,
    PauseMeshError,
    ProtocolAdapterError,
    StoreError,
    TokenAlreadyUsedError,
    TokenMismatchError,
    UnsupportedSchemaVersionError,
    VersionConflictError,
)
from pausemesh.core.model import (
    Continuation,
    ContinuationCancelled,
    ContinuationCreated,
    ContinuationEvent,
    ContinuationExpired,
    ContinuationResumed,
    CreatedContinuation,
    PublicEvent,
    ResumeOutcome,
)
from pausemesh.core.ports import Clock, EventStore, Observer, TokenIssuer
from pausemesh.core.reducer import apply_event, replay
from pausemesh.core.resume import (
    Decider,
    NamedApprover,
    OperationWatcher,
    Resume,
    TokenHolder,
    TrustedHost,
)
from pausemesh.core.service import ContinuationService
from pausemesh.core.tokens import KeyedTokenIssuer, RandomTokenIssuer
from pausemesh.observability.observer import CollectingObserver, LoggingObserver, NoopObserver

__all__ = (
    "Clock",
    "CollectingObserver",
    "Continuation",
    "ContinuationCancelled",
    "ContinuationCancelledError",
    "ContinuationCreated",
    "ContinuationEvent",
    "ContinuationExpired",
    "ContinuationExpiredError",
    "ContinuationIdMismatchError",
    "ContinuationNotFoundError",
    "ContinuationResumed",
    "ContinuationService",
    "CreatedContinuation",
    "Decider",
    "EventStore",
    "IdempotencyConflictError",
    "InvalidInputError",
    "InvalidTransitionError",
    "KeyedTokenIssuer",
    "LoggingObserver",
    "ManualClock",
    "NamedApprover",
    "NoopObserver",
    "Observer",
    "OperationWatcher",
    "PauseMeshError",
    "ProtocolAdapterError",
    "PublicEvent",
    "RandomTokenIssuer",
    "Resume",
    "ResumeOutcome",
    "StoreError",
    "SystemClock",
    "TokenAlreadyUsedError",
    "TokenHolder",
    "TokenIssuer",
    "TokenMismatchError",
    "TrustedHost",
    "UnsupportedSchemaVersionError",
    "VersionConflictError",
    "apply_event",
    "canonical_json",
    "canonical_sha256",
    "replay",
)
