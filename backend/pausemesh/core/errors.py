"""The one error tree of PauseMesh.

Every error carries a stable machine-readable ``code``; the web layer maps codes to
HTTP statuses and protocol routers map them to their own error shapes::

    PauseMeshError
    ├── InvalidInputError (ValueError)            INVALID_* codes: bad input, nothing written
    ├── ContinuationNotFoundError (LookupError)   CONTINUATION_NOT_FOUND
    ├── NotAnApproverError                        NOT_AN_APPROVER: the pause names other approvers
    ├── TokenMismatchError                        TOKEN_MISMATCH
    ├── ContinuationExpiredError                  CONTINUATION_EXPIRED
    ├── ContinuationCancelledError                CONTINUATION_CANCELLED
    ├── TokenAlreadyUsedError                     TOKEN_ALREADY_USED
    ├── IdempotencyConflictError                  IDEMPOTENCY_CONFLICT
    ├── InvalidTransitionError                    INVALID_TRANSITION
    ├── VersionConflictError                      VERSION_CONFLICT
    ├── ContinuationIdMismatchError               CONTINUATION_ID_MISMATCH
    ├── UnsupportedSchemaVersionError             UNSUPPORTED_SCHEMA_VERSION
    ├── ProtocolAdapterError                      INVALID_PROTOCOL_* / UNSUPPORTED_PROTOCOL_CAPABILITY
    ├── ThreadNotFoundError (LookupError)         THREAD_NOT_FOUND
    ├── ThreadBusyError                           THREAD_BUSY
    ├── LeaseLostError                            LEASE_LOST: another writer took the lease
    ├── OperationConflictError                    OPERATION_CONFLICT: same business key, other terms
    ├── OutcomeUnknownError                       OUTCOME_UNKNOWN: attempted, no recorded outcome
    ├── UnauthenticatedError                      UNAUTHENTICATED: the host's resolver named nobody
    ├── PayloadTooLargeError                      PAYLOAD_TOO_LARGE: a request body over the limit
    ├── OriginNotAllowedError                     ORIGIN_NOT_ALLOWED: a cross-site state change
    ├── UnsupportedMediaTypeError                 UNSUPPORTED_MEDIA_TYPE: a body that is not JSON
    ├── MisdirectedRequestError                   MISDIRECTED_REQUEST: a Host this server does not
    │                                             answer to (DNS rebinding)
    ├── RateLimitedError                          RATE_LIMITED: too many runs for one principal
    ├── TooManyStreamsError                       TOO_MANY_STREAMS: too many open SSE streams
    ├── ShuttingDownError                         SERVER_SHUTTING_DOWN: the server is draining
    ├── SettingsError (ValueError)                INVALID_SETTING: a setting is missing or malformed
    ├── NotStartedError (RuntimeError)            NOT_STARTED: a request before the lifespan ran
    ├── AgentLoadError                            AGENT_NOT_LOADABLE: --agent names no usable agent
    ├── RuntimeNotCurrentError                    RUNTIME_NOT_CURRENT: a retired gateway worker
    ├── ReplyTooLateError                         REPLY_TOO_LATE: a gateway reply after its deadline
    │                                             or after the operation was declared unknown
    ├── GatewayError                              GATEWAY_* / TOOL_CHANGED / CATALOG_*: the
    │                                             continuity gateway's config, lock and upstreams
    ├── AguiRunError (agui/run_error.py)          PAUSEMESH_AGUI_*, THREAD_TOO_LARGE: an AG-UI
    │                                             run's refusal, sent as its RUN_ERROR event
    └── StoreError (RuntimeError)                 STORE_UNAVAILABLE, CORRUPT_STREAM, STREAM_TOO_LARGE,
                                                  MIGRATION_REQUIRED, MIGRATION_CHECKSUM_MISMATCH,
                                                  MIGRATION_VERSION_AHEAD, SCHEMA_INCOMPLETE,
                                                  STORE_READ_ONLY
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = (
    "AgentLoadError",
    "ContinuationCancelledError",
    "ContinuationExpiredError",
    "ContinuationIdMismatchError",
    "ContinuationNotFoundError",
    "GatewayError",
    "IdempotencyConflictError",
    "InvalidInputError",
    "InvalidTransitionError",
    "LeaseLostError",
    "MisdirectedRequestError",
    "NotAnApproverError",
    "NotStartedError",
    "OperationConflictError",
    "OriginNotAllowedError",
    "OutcomeUnknownError",
    "PauseMeshError",
    "PayloadTooLargeError",
    "ProtocolAdapterError",
    "RateLimitedError",
    "ReplyTooLateError",
    "RuntimeNotCurrentError",
    "SettingsError",
    "ShuttingDownError",
    "StoreError",
    "ThreadBusyError",
    "ThreadNotFoundError",
    "TokenAlreadyUsedError",
    "TokenMismatchError",
    "TooManyStreamsError",
    "UnauthenticatedError",
    "UnsupportedMediaTypeError",
    "UnsupportedSchemaVersionError",
    "VersionConflictError",
)


class PauseMeshError(Exception):
    """Root of every error PauseMesh raises on purpose."""

    default_code: ClassVar[str] = "PAUSEMESH_ERROR"

    def __init__(self, message: str, *, code: str | None = None, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.details: dict[str, Any] = details

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


class InvalidInputError(PauseMeshError, ValueError):
    """A caller passed something malformed; nothing was read or written."""

    default_code = "INVALID_INPUT"


class ContinuationNotFoundError(PauseMeshError, LookupError):
    default_code = "CONTINUATION_NOT_FOUND"

    def __init__(self, continuation_id: str) -> None:
        super().__init__("Continuation was not found", continuation_id=continuation_id)


class NotAnApproverError(PauseMeshError):
    """The caller may see this pause but not decide it: it names approvers, not them."""

    default_code = "NOT_AN_APPROVER"

    def __init__(self, continuation_id: str) -> None:
        super().__init__(
            "Only the pause's approvers may decide it", continuation_id=continuation_id
        )


class TokenMismatchError(PauseMeshError):
    default_code = "TOKEN_MISMATCH"

    def __init__(self, continuation_id: str) -> None:
        # The message never repeats the token the caller sent.
        super().__init__("Resume token does not match", continuation_id=continuation_id)


class ContinuationExpiredError(PauseMeshError):
    default_code = "CONTINUATION_EXPIRED"

    def __init__(self, continuation_id: str) -> None:
        super().__init__("Continuation has expired", continuation_id=continuation_id)


class ContinuationCancelledError(PauseMeshError):
    default_code = "CONTINUATION_CANCELLED"

    def __init__(self, continuation_id: str) -> None:
        super().__init__("Continuation was cancelled", continuation_id=continuation_id)


class TokenAlreadyUsedError(PauseMeshError):
    default_code = "TOKEN_ALREADY_USED"

    def __init__(self, continuation_id: str) -> None:
        super().__init__("Resume token was already used", continuation_id=continuation_id)


class IdempotencyConflictError(PauseMeshError):
    default_code = "IDEMPOTENCY_CONFLICT"

    def __init__(self, continuation_id: str) -> None:
        super().__init__(
            "Idempotency key was already used with a different payload",
            continuation_id=continuation_id,
        )


class InvalidTransitionError(PauseMeshError):
    default_code = "INVALID_TRANSITION"

    def __init__(self, continuation_id: str, event_type: str, from_status: str) -> None:
        super().__init__(
            f"Cannot apply {event_type} to a {from_status} continuation",
            continuation_id=continuation_id,
            event_type=event_type,
            from_status=from_status,
        )


class VersionConflictError(PauseMeshError):
    default_code = "VERSION_CONFLICT"

    def __init__(self, continuation_id: str, expected_version: int, actual_version: int) -> None:
        # Expecting version 0 is a create: the conflict is an id already taken.
        message = (
            f"a continuation with id {continuation_id!r} already exists (version {actual_version})"
            if expected_version == 0
            else f"Expected version {expected_version}, found {actual_version}"
        )
        super().__init__(
            message,
            continuation_id=continuation_id,
            expected_version=expected_version,
            actual_version=actual_version,
        )
        self.expected_version = expected_version
        self.actual_version = actual_version


class ContinuationIdMismatchError(PauseMeshError):
    default_code = "CONTINUATION_ID_MISMATCH"

    def __init__(self, expected_id: str, actual_id: str) -> None:
        super().__init__(
            "Event belongs to another continuation",
            expected_id=expected_id,
            actual_id=actual_id,
        )


class UnsupportedSchemaVersionError(PauseMeshError):
    default_code = "UNSUPPORTED_SCHEMA_VERSION"

    def __init__(self, schema_version: int) -> None:
        super().__init__(
            f"Unsupported event schema version {schema_version}", schema_version=schema_version
        )


class ProtocolAdapterError(PauseMeshError):
    """A protocol projection or parse failed (AG-UI, MCP, A2A adapters)."""

    default_code = "INVALID_PROTOCOL_MESSAGE"


class ThreadNotFoundError(PauseMeshError, LookupError):
    """An AG-UI thread does not exist (or belongs to another principal)."""

    default_code = "THREAD_NOT_FOUND"

    def __init__(self, thread_id: str) -> None:
        super().__init__("Thread was not found", thread_id=thread_id)


class ThreadBusyError(PauseMeshError):
    """Another run holds the thread's run lease."""

    default_code = "THREAD_BUSY"

    def __init__(self, thread_id: str) -> None:
        super().__init__("Another run is active on this thread", thread_id=thread_id)


class LeaseLostError(PauseMeshError):
    """The lease this writer held was lost (it lapsed, or a restart freed it, and another
    writer took it): the writer must stop, and the store refuses what it still writes."""

    default_code = "LEASE_LOST"

    def __init__(self, thread_id: str) -> None:
        super().__init__("This run lost its lease on the thread", thread_id=thread_id)


class OperationConflictError(PauseMeshError):
    """A durable operation was asked again for its business key with different terms."""

    default_code = "OPERATION_CONFLICT"

    def __init__(self, operation_id: str) -> None:
        super().__init__(
            "Operation was already committed with different terms", operation_id=operation_id
        )


class OutcomeUnknownError(PauseMeshError):
    """A durable operation was attempted but no outcome was recorded; it is never retried."""

    default_code = "OUTCOME_UNKNOWN"

    def __init__(self, operation_id: str) -> None:
        super().__init__(
            "Operation was attempted and its outcome is unknown; it will not be retried",
            operation_id=operation_id,
        )


class UnauthenticatedError(PauseMeshError):
    """The principal resolver named nobody: no credential, or one that did not verify.

    ``challenge`` is the ``WWW-Authenticate`` value to answer with (RFC 9110 §11.6.1); the
    built-in bearer resolvers set ``Bearer ...``, a host resolver leaves the default.
    """

    default_code = "UNAUTHENTICATED"

    def __init__(
        self, message: str = "Authentication is required", *, challenge: str | None = None
    ) -> None:
        super().__init__(message, challenge=challenge)

    @property
    def challenge(self) -> str | None:
        value = self.details.get("challenge")
        return value if isinstance(value, str) else None


class PayloadTooLargeError(PauseMeshError):
    """A request body grew past the configured limit while it streamed in (never parsed)."""

    default_code = "PAYLOAD_TOO_LARGE"

    def __init__(self, limit: int) -> None:
        super().__init__(f"The request body exceeds {limit} bytes", limit=limit)


class OriginNotAllowedError(PauseMeshError):
    """A state-changing request from a browser page of a foreign, unlisted origin (CSRF)."""

    default_code = "ORIGIN_NOT_ALLOWED"

    def __init__(self) -> None:
        super().__init__("Requests from this origin are not allowed")


class UnsupportedMediaTypeError(PauseMeshError):
    """A body sent to a JSON endpoint under another content type (a form post, text/plain)."""

    default_code = "UNSUPPORTED_MEDIA_TYPE"

    def __init__(self) -> None:
        super().__init__("The request body must be application/json")


class MisdirectedRequestError(PauseMeshError):
    """A request whose ``Host`` is not a name this server answers to: a DNS-rebinding page, or
    a proxy that forwards a name ``PAUSEMESH_ALLOWED_HOSTS`` does not list."""

    default_code = "MISDIRECTED_REQUEST"

    def __init__(self) -> None:
        super().__init__(
            "This server does not answer to this Host; PAUSEMESH_ALLOWED_HOSTS lists the names"
            " it is reached by"
        )


class RateLimitedError(PauseMeshError):
    """A principal started more work than ``PAUSEMESH_RATE_LIMIT`` allows in this window."""

    default_code = "RATE_LIMITED"

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"Too many requests; retry after {retry_after} s", retry_after=retry_after)
        self.retry_after = retry_after


class TooManyStreamsError(PauseMeshError):
    """A principal already holds ``PAUSEMESH_MAX_STREAMS_PER_PRINCIPAL`` open streams (or
    ``PAUSEMESH_MAX_TAILS_PER_PRINCIPAL`` idle tails: ``what``) here."""

    default_code = "TOO_MANY_STREAMS"

    def __init__(self, limit: int, what: str = "streams") -> None:
        super().__init__(
            f"Too many open {what} (at most {limit}); close one and retry",
            limit=limit,
            retry_after=1,
        )


class ShuttingDownError(PauseMeshError):
    """The server is shutting down: it starts no run and opens no stream (retry elsewhere)."""

    default_code = "SERVER_SHUTTING_DOWN"

    def __init__(self) -> None:
        super().__init__("The server is shutting down; retry shortly", retry_after=1)


class SettingsError(PauseMeshError, ValueError):
    """A setting is missing or malformed; the message names it (raised at start, never later)."""

    default_code = "INVALID_SETTING"


class NotStartedError(PauseMeshError, RuntimeError):
    """A request arrived before PauseMesh's lifespan ran (a mount without its lifespan)."""

    default_code = "NOT_STARTED"


class AgentLoadError(PauseMeshError):
    """``--agent``/``PAUSEMESH_AGENT`` (or an embedding host) named something that is not an agent
    PauseMesh can serve; the message says what was found instead."""

    default_code = "AGENT_NOT_LOADABLE"


class RuntimeNotCurrentError(PauseMeshError):
    """A gateway worker whose fencing epoch was advanced (retired) tried to act."""

    default_code = "RUNTIME_NOT_CURRENT"

    def __init__(self, worker: str) -> None:
        super().__init__("This gateway worker was retired; it can no longer act", worker=worker)


class ReplyTooLateError(PauseMeshError):
    """A gateway worker tried to record an upstream reply after its reply deadline, or after
    some process declared the operation's outcome unknown: refused, nothing written."""

    default_code = "REPLY_TOO_LATE"

    def __init__(self, operation_id: str, *, declared: bool) -> None:
        why = "was declared unknown" if declared else "passed its reply deadline"
        super().__init__(
            f"The operation {why}; its reply is not recorded",
            operation_id=operation_id,
            declared=declared,
        )


class GatewayError(PauseMeshError):
    """The gateway's configuration, lock or an upstream is not what it must be.

    Codes: ``GATEWAY_CONFIG_INVALID`` (every problem listed in ``details["errors"]``),
    ``GATEWAY_LOCK_MISSING``, ``GATEWAY_LOCK_MISMATCH``, ``TOOL_CHANGED``, ``TOOL_MISSING``,
    ``CATALOG_LIMIT``, ``CATALOG_CONFLICT``, ``UPSTREAM_UNAVAILABLE``.
    """

    default_code = "GATEWAY_UNAVAILABLE"


class StoreError(PauseMeshError, RuntimeError):
    """The store is unavailable, misconfigured or holds data it cannot trust."""

    default_code = "STORE_UNAVAILABLE"
