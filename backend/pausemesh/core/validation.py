"""Boundary checks shared by the service and every router: bad input never reaches a store."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pausemesh.core.canonical import check_json_value
from pausemesh.core.errors import InvalidInputError, ProtocolAdapterError

__all__ = (
    "MAX_ID_LENGTH",
    "MAX_REASON_LENGTH",
    "check_aware",
    "check_expected_version",
    "check_id",
    "check_idempotency_key",
    "check_metadata",
    "check_payload",
    "check_protocol_id",
    "check_reason",
    "check_routable_id",
)

MAX_ID_LENGTH = 200
MAX_IDEMPOTENCY_KEY_LENGTH = 200
MAX_REASON_LENGTH = 500


def check_id(value: object, field: str = "continuationId") -> str:
    """Opaque ids: 1-200 printable characters with no whitespace at either edge."""
    if not isinstance(value, str) or not value:
        msg = f"{field} must be a non-empty string"
        raise InvalidInputError(msg, code="INVALID_ID", field=field)
    if len(value) > MAX_ID_LENGTH:
        msg = f"{field} must be at most {MAX_ID_LENGTH} characters"
        raise InvalidInputError(msg, code="INVALID_ID", field=field)
    if value != value.strip() or not value.isprintable():
        msg = f"{field} must not have edge whitespace or control characters"
        raise InvalidInputError(msg, code="INVALID_ID", field=field)
    return value


def check_routable_id(value: object, field: str) -> str:
    """``check_id`` for ids that later appear as one path segment (threads, continuations).

    A ``/`` would make the record unreachable: ``/v1/continuations/pay/42`` matches no route.
    """
    checked = check_id(value, field)
    if "/" in checked:
        msg = f"{field} must not contain '/'"
        raise InvalidInputError(msg, code="INVALID_ID", field=field)
    return checked


def check_idempotency_key(value: object) -> str:
    if (
        not isinstance(value, str)
        or not 1 <= len(value) <= MAX_IDEMPOTENCY_KEY_LENGTH
        or not value.isprintable()
        or not value.strip()
    ):
        msg = f"Idempotency key must be 1-{MAX_IDEMPOTENCY_KEY_LENGTH} printable characters"
        raise InvalidInputError(msg, code="INVALID_IDEMPOTENCY_KEY")
    return value


def check_payload(value: object, field: str = "payload") -> None:
    """Refuse non-JSON values (``INVALID_PAYLOAD`` naming ``field``)."""
    try:
        check_json_value(value)
    except InvalidInputError as error:
        msg = f"{field} is not a JSON value: {error.message}"
        raise InvalidInputError(msg, code="INVALID_PAYLOAD", field=field) from None


def check_metadata(value: object) -> dict[str, Any]:
    if not isinstance(value, dict):
        msg = "metadata must be a JSON object"
        raise InvalidInputError(msg, code="INVALID_METADATA")
    check_payload(value, "metadata")
    return value


def check_aware(value: object, field: str) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        msg = f"{field} must be a timezone-aware datetime"
        raise InvalidInputError(msg, code="INVALID_EXPIRY", field=field)
    return value


def check_reason(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_REASON_LENGTH or not value.isprintable():
        msg = f"reason must be a printable string of at most {MAX_REASON_LENGTH} characters"
        raise InvalidInputError(msg, code="INVALID_REASON")
    return value


def check_expected_version(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or value > 2**53 - 1:
        msg = "expectedVersion must be a positive integer"
        raise InvalidInputError(msg, code="INVALID_VERSION")
    return value


def check_protocol_id(value: object, field: str, code: str) -> str:
    """``check_id`` for protocol adapters: the same rule, reported as a protocol error."""
    try:
        return check_id(value, field)
    except InvalidInputError as error:
        raise ProtocolAdapterError(error.message, code=code) from None
