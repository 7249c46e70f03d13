"""The ``elicitation/create`` request as sent: its strict shape, its receipt, the pause it asks.

Shared by the projection (``mcp.elicitation``), which re-validates every request it builds, and
by result parsing (``mcp.elicitation_result``), which checks a request and its receipt before
reading the client's answer. The pause itself is read by ``core.pause.parse_pause_payload``,
the one reading every protocol shares.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

import msgspec
from msgspec import UNSET, UnsetType

from pausemesh.core.canonical import canonical_sha256
from pausemesh.core.errors import ProtocolAdapterError
from pausemesh.core.model import Continuation
from pausemesh.core.pause import parse_pause_payload
from pausemesh.core.validation import check_protocol_id
from pausemesh.mcp.form_schema import EMPTY_FORM_SCHEMA, check_requested_schema

__all__ = (
    "BINDING",
    "CAPABILITY",
    "MESSAGE",
    "PAUSEMESH_META_KEY",
    "RECEIPT_SCHEMA_VERSION",
    "RELATED_TASK_META_KEY",
    "TRANSITION",
    "FormParams",
    "McpElicitationReceipt",
    "McpPause",
    "McpRelatedTask",
    "SentRequest",
    "UrlParams",
    "check_request_id",
    "parse_sent_request",
    "protocol_error",
    "read_pause",
    "receipt_hash",
    "require_pending",
    "same_id",
)

PAUSEMESH_META_KEY: Final = "io.pausemesh/continuation"
RELATED_TASK_META_KEY: Final = "io.modelcontextprotocol/related-task"
RECEIPT_SCHEMA_VERSION: Final = 1
_HASH_DOMAIN = "mcp-elicitation-v1"
_MAX_SAFE_INTEGER = 2**53 - 1

BINDING: Final = "INVALID_PROTOCOL_BINDING"
MESSAGE: Final = "INVALID_PROTOCOL_MESSAGE"
TRANSITION: Final = "INVALID_PROTOCOL_TRANSITION"
CAPABILITY: Final = "UNSUPPORTED_PROTOCOL_CAPABILITY"

McpMode = Literal["form", "url"]


def protocol_error(code: str, message: str) -> ProtocolAdapterError:
    return ProtocolAdapterError(message, code=code)


class McpRelatedTask(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel"
):
    task_id: str


class McpElicitationReceipt(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel"
):
    """Host-only record binding a later result to exactly the request that was sent."""

    schema_version: int
    continuation_id: str
    correlation_id: str
    mode: McpMode
    request_id: str | int
    request_hash: str


def check_request_id(value: object, code: str) -> str | int:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise protocol_error(code, "requestId must be a string or a safe integer")
    if isinstance(value, int):
        if abs(value) > _MAX_SAFE_INTEGER:
            raise protocol_error(code, "requestId must be a safe integer")
        return value
    return check_protocol_id(value, "requestId", code)


def same_id(left: str | int, right: str | int) -> bool:
    return type(left) is type(right) and left == right


# -- the pause --------------------------------------------------------------------------


class McpPause(msgspec.Struct, frozen=True, kw_only=True):
    """A continuation payload as MCP asks it: input pauses carry a checked flat form schema."""

    kind: Literal["input", "authorization"]
    message: str
    schema: dict[str, Any] | None


def read_pause(payload: object) -> McpPause:
    """The pause a continuation asks (``INVALID_PROTOCOL_MESSAGE`` if it is not one)."""
    try:
        pause = parse_pause_payload(payload)
    except (TypeError, ValueError) as error:
        raise protocol_error(MESSAGE, f"Continuation payload is not a pause: {error}") from None
    if pause.kind == "authorization":
        return McpPause(kind="authorization", message=pause.message, schema=None)
    schema = pause.response_schema
    checked = EMPTY_FORM_SCHEMA if schema is None else check_requested_schema(schema)
    return McpPause(kind="input", message=pause.message, schema=checked)


def require_pending(continuation: Continuation, purpose: str) -> None:
    if continuation.status != "pending":
        raise protocol_error(
            TRANSITION, f"Cannot use a {continuation.status} continuation for {purpose}"
        )


# -- the request as sent (strict shape) -------------------------------------------------


class _PauseMeshMeta(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel"
):
    continuation_id: str
    correlation_id: str
    expires_at: str
    request_id: str | int
    schema_version: int


class _RequestMeta(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    continuation: _PauseMeshMeta = msgspec.field(name=PAUSEMESH_META_KEY)
    related_task: McpRelatedTask | UnsetType = msgspec.field(
        name=RELATED_TASK_META_KEY, default=UNSET
    )


class FormParams(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    tag_field="mode",
    tag="form",
):
    message: str
    requested_schema: dict[str, Any] = msgspec.field(name="requestedSchema")
    meta: _RequestMeta = msgspec.field(name="_meta")


class UrlParams(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    tag_field="mode",
    tag="url",
):
    message: str
    elicitation_id: str = msgspec.field(name="elicitationId")
    url: str
    meta: _RequestMeta = msgspec.field(name="_meta")


class SentRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    jsonrpc: Literal["2.0"]
    id: str | int
    method: Literal["elicitation/create"]
    params: FormParams | UrlParams


def parse_sent_request(request: object, code: str) -> SentRequest:
    """Parse a request strictly, identifiers and schema included; ``code`` on any failure."""
    try:
        parsed = msgspec.convert(request, SentRequest, strict=True)
        check_request_id(parsed.id, code)
        meta = parsed.params.meta
        check_protocol_id(meta.continuation.continuation_id, "continuationId", code)
        check_protocol_id(meta.continuation.correlation_id, "correlationId", code)
        check_request_id(meta.continuation.request_id, code)
        if isinstance(meta.related_task, McpRelatedTask):
            check_protocol_id(meta.related_task.task_id, "relatedTask.taskId", code)
        if isinstance(parsed.params, FormParams):
            check_requested_schema(parsed.params.requested_schema)
        else:
            check_protocol_id(parsed.params.elicitation_id, "elicitationId", code)
    except (msgspec.ValidationError, ProtocolAdapterError) as error:
        raise protocol_error(code, f"MCP elicitation request is malformed: {error}") from None
    return parsed


def receipt_hash(request: Mapping[str, Any]) -> str:
    return canonical_sha256([_HASH_DOMAIN, request])
