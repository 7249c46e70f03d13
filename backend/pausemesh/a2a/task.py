"""A2A 1.0 projections of a continuation (ProtoJSON shapes; docs/protocols-mcp-a2a.md).

* ``to_a2a_interrupted_task``: the ``SendMessageResponse`` whose task is
  ``TASK_STATE_INPUT_REQUIRED`` (or ``TASK_STATE_AUTH_REQUIRED`` for an authorization pause).
* ``to_a2a_input_message``: the follow-up ``SendMessageRequest`` answering an input pause.
* ``to_a2a_authorization_control_message``: the narrow ``reject``/``retry`` control for an
  authorization pause; credentials themselves only ever travel out of band.

The task id is always the server-issued one from an explicit ``A2ATaskBinding``, never derived
from the continuation; its ``contextId`` must be the continuation's correlation id. The
continuation id appears only in PauseMesh-owned places (the status message id, metadata).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import msgspec

from pausemesh.core.canonical import check_json_value
from pausemesh.core.clock import iso_millis
from pausemesh.core.errors import InvalidInputError, ProtocolAdapterError
from pausemesh.core.model import Continuation
from pausemesh.core.pause import PausePayload, parse_pause_payload
from pausemesh.core.validation import check_protocol_id

__all__ = (
    "A2ATaskBinding",
    "decode_a2a_task_binding",
    "to_a2a_authorization_control_message",
    "to_a2a_input_message",
    "to_a2a_interrupted_task",
)

SCHEMA_VERSION = 1
_BINDING = "INVALID_PROTOCOL_BINDING"
_MESSAGE = "INVALID_PROTOCOL_MESSAGE"
_TRANSITION = "INVALID_PROTOCOL_TRANSITION"

A2AControlAction = Literal["reject", "retry"]


class A2ATaskBinding(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel"
):
    """The server-issued A2A task this pause belongs to (strict; opaque ids)."""

    task_id: str
    context_id: str


def _error(code: str, message: str) -> ProtocolAdapterError:
    return ProtocolAdapterError(message, code=code)


def decode_a2a_task_binding(body: object) -> A2ATaskBinding:
    """Decode ``{taskId, contextId}`` from a parsed JSON body (``INVALID_PROTOCOL_BINDING``)."""
    try:
        binding = msgspec.convert(body, A2ATaskBinding, strict=True)
    except msgspec.ValidationError as error:
        raise _error(_BINDING, f"Invalid A2A task binding: {error}") from None
    return _check_binding_ids(binding)


def _check_binding_ids(binding: A2ATaskBinding) -> A2ATaskBinding:
    check_protocol_id(binding.task_id, "taskId", _BINDING)
    check_protocol_id(binding.context_id, "contextId", _BINDING)
    return binding


def _iso(moment: datetime) -> str:
    """ISO-8601 UTC with millisecond precision and ``Z`` (A2A §5.6.1)."""
    if moment.tzinfo is None:
        raise _error(_MESSAGE, "Continuation timestamps must be timezone-aware")
    return iso_millis(moment)


def _require_pending(continuation: Continuation) -> PausePayload:
    if continuation.status != "pending":
        raise _error(
            _TRANSITION, f"Cannot use a {continuation.status} continuation for an A2A task"
        )
    check_protocol_id(continuation.continuation_id, "continuationId", _MESSAGE)
    _iso(continuation.created_at)
    _iso(continuation.expires_at)
    try:
        return parse_pause_payload(continuation.payload)
    except (TypeError, ValueError) as error:
        raise _error(_MESSAGE, f"Continuation payload is not a pause: {error}") from None


def _require_binding(continuation: Continuation, binding: A2ATaskBinding) -> A2ATaskBinding:
    if not isinstance(binding, A2ATaskBinding):
        raise _error(_BINDING, "An explicit A2A task binding is required")
    _check_binding_ids(binding)
    if binding.context_id != continuation.correlation_id:
        raise _error(_BINDING, "A2A contextId must equal the continuation's correlation id")
    return binding


def to_a2a_interrupted_task(continuation: Continuation, binding: A2ATaskBinding) -> dict[str, Any]:
    """``{task}``: the interrupted task for a pending continuation."""
    payload = _require_pending(continuation)
    binding = _require_binding(continuation, binding)
    state = (
        "TASK_STATE_AUTH_REQUIRED"
        if payload.kind == "authorization"
        else "TASK_STATE_INPUT_REQUIRED"
    )
    return {
        "task": {
            "id": binding.task_id,
            "contextId": binding.context_id,
            "status": {
                "state": state,
                # Only the explanation: never credentials or other payload fields.
                "message": {
                    "role": "ROLE_AGENT",
                    "messageId": continuation.continuation_id,
                    "contextId": binding.context_id,
                    "taskId": binding.task_id,
                    "parts": [{"text": payload.message}],
                },
                "timestamp": _iso(continuation.created_at),
            },
            "metadata": {
                "pausemesh": {
                    "continuationId": continuation.continuation_id,
                    "expiresAt": _iso(continuation.expires_at),
                    "schemaVersion": SCHEMA_VERSION,
                }
            },
        }
    }


def _message_request(
    continuation: Continuation, binding: A2ATaskBinding, message_id: str, data: Any
) -> dict[str, Any]:
    return {
        "message": {
            "taskId": binding.task_id,
            "contextId": binding.context_id,
            "role": "ROLE_USER",
            "messageId": message_id,
            "parts": [{"data": data}],
            "metadata": {
                "pausemesh": {
                    "continuationId": continuation.continuation_id,
                    "schemaVersion": SCHEMA_VERSION,
                }
            },
        }
    }


def to_a2a_input_message(
    continuation: Continuation, binding: A2ATaskBinding, response: Any, message_id: str
) -> dict[str, Any]:
    """``{message}``: the follow-up answering an input pause (any JSON value as a data part)."""
    payload = _require_pending(continuation)
    binding = _require_binding(continuation, binding)
    if payload.kind == "authorization":
        raise _error(_TRANSITION, "A2A authorization credentials must be delivered out of band")
    check_protocol_id(message_id, "messageId", _MESSAGE)
    try:
        check_json_value(response)
    except InvalidInputError:
        raise _error(_MESSAGE, "A2A input response must be a JSON value") from None
    return _message_request(continuation, binding, message_id, response)


def to_a2a_authorization_control_message(
    continuation: Continuation, binding: A2ATaskBinding, action: str, message_id: str
) -> dict[str, Any]:
    """``{message}`` with ``{action: "reject" | "retry"}``; never a credential."""
    payload = _require_pending(continuation)
    binding = _require_binding(continuation, binding)
    if payload.kind != "authorization":
        raise _error(_TRANSITION, "A2A authorization control needs an authorization continuation")
    if action not in {"reject", "retry"}:
        raise _error(_MESSAGE, "A2A authorization control action must be 'reject' or 'retry'")
    check_protocol_id(message_id, "messageId", _MESSAGE)
    return _message_request(continuation, binding, message_id, {"action": action})
