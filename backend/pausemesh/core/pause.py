"""The pause payload every protocol reads: ``{kind, message, responseSchema?, toolCallId?, reason?}``.

A continuation's payload is free JSON; this is the one reading of it as a pause, shared by the
AG-UI cohort, the MCP elicitation projection and the A2A task projection, so the three cannot
drift. ``response_schema``/``tool_call_id`` are accepted beside the camelCase keys (never both
with different values). ``pause_payload`` builds one the way it is stored and hashed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

import msgspec

__all__ = (
    "AUTHORIZATION_REASON",
    "INPUT_REASON",
    "PausePayload",
    "parse_pause_payload",
    "pause_payload",
)

INPUT_REASON: Final = "input_required"
AUTHORIZATION_REASON: Final = "pausemesh:authorization_required"


class PausePayload(msgspec.Struct, frozen=True, kw_only=True):
    """The AG-UI-relevant view of a continuation payload."""

    kind: Literal["input", "authorization"]
    message: str
    reason: str
    response_schema: dict[str, Any] | None = None
    tool_call_id: str | None = None


def pause_payload(
    message: str,
    *,
    kind: Literal["input", "authorization"] = "input",
    response_schema: Mapping[str, Any] | None = None,
    tool_call_id: str | None = None,
    reason: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A continuation payload for an AG-UI pause (camelCase keys, as stored and hashed)."""
    payload: dict[str, Any] = {**extra, "kind": kind, "message": message}
    if response_schema is not None:
        payload["responseSchema"] = dict(response_schema)
    if tool_call_id is not None:
        payload["toolCallId"] = tool_call_id
    if reason is not None:
        payload["reason"] = reason
    return payload


def _one_of(payload: Mapping[str, Any], camel: str, snake: str) -> Any:
    if camel in payload and snake in payload and payload[camel] != payload[snake]:
        msg = f"payload carries both {camel} and {snake} with different values"
        raise ValueError(msg)
    return payload.get(camel, payload.get(snake))


def parse_pause_payload(payload: object) -> PausePayload:
    """Read a continuation payload as an AG-UI pause; ``ValueError`` if it is not one."""
    if not isinstance(payload, Mapping):
        msg = "payload must be an object"
        raise TypeError(msg)
    kind = payload.get("kind", "input")
    if kind not in ("input", "authorization"):
        msg = "payload kind must be 'input' or 'authorization'"
        raise ValueError(msg)
    message = payload.get("message")
    if not isinstance(message, str) or not message:
        msg = "payload message must be a non-empty string"
        raise ValueError(msg)
    schema = _one_of(payload, "responseSchema", "response_schema")
    if schema is not None and not isinstance(schema, dict):
        msg = "responseSchema must be an object"
        raise ValueError(msg)
    if kind == "authorization" and schema is not None:
        msg = "an authorization pause takes no responseSchema"
        raise ValueError(msg)
    tool_call_id = _one_of(payload, "toolCallId", "tool_call_id")
    if tool_call_id is not None and (not isinstance(tool_call_id, str) or not tool_call_id):
        msg = "toolCallId must be a non-empty string"
        raise ValueError(msg)
    reason = payload.get("reason")
    if kind == "authorization":
        reason = AUTHORIZATION_REASON
    elif reason is None:
        reason = INPUT_REASON
    elif not isinstance(reason, str) or not reason or reason.startswith("core:"):
        # ``core:`` is reserved by AG-UI; authorization is ours and needs kind=authorization.
        msg = "reason must be a non-empty string outside the reserved namespaces"
        raise ValueError(msg)
    elif reason == AUTHORIZATION_REASON:
        msg = "the authorization reason needs kind 'authorization'"
        raise ValueError(msg)
    return PausePayload(
        kind=kind,
        message=message,
        reason=reason,
        response_schema=schema,
        tool_call_id=tool_call_id,
    )
