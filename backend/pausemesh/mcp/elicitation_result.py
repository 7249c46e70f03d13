"""Reading a client's ``ElicitResult`` for a pause, and completing a URL elicitation.

* ``parse_mcp_elicit_result`` checks the request against the continuation and the receipt
  against the request, then parses the result and validates form answers field by field.
* ``to_mcp_elicitation_complete_notification`` builds ``notifications/elicitation/complete``
  once the trusted out-of-band callback resumed the continuation.

Every failure is a ``ProtocolAdapterError`` (``INVALID_PROTOCOL_BINDING`` / ``_MESSAGE`` /
``_TRANSITION``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from pausemesh.core.canonical import canonical_json
from pausemesh.core.clock import iso_millis
from pausemesh.core.model import Continuation
from pausemesh.mcp.elicitation_request import (
    BINDING,
    MESSAGE,
    RECEIPT_SCHEMA_VERSION,
    TRANSITION,
    FormParams,
    McpElicitationReceipt,
    McpPause,
    SentRequest,
    UrlParams,
    parse_sent_request,
    protocol_error,
    read_pause,
    receipt_hash,
    require_pending,
    same_id,
)
from pausemesh.mcp.form_schema import check_form_content

__all__ = (
    "McpFormResponse",
    "McpUrlConsent",
    "parse_mcp_elicit_result",
    "to_mcp_elicitation_complete_notification",
)

McpAction = Literal["accept", "decline", "cancel"]


class McpFormResponse(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    kind: Literal["form_response"] = "form_response"
    action: McpAction
    content: dict[str, Any] | UnsetType = UNSET


class McpUrlConsent(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """``accept`` here only means the user agreed to open the link, not that it finished."""

    kind: Literal["url_consent"] = "url_consent"
    action: McpAction
    elicitation_id: str


# -- the request and its receipt ----------------------------------------------------------


def _require_request_binding(
    continuation: Continuation, request: SentRequest, pause: McpPause
) -> None:
    meta = request.params.meta.continuation
    expected_mode = "url" if pause.kind == "authorization" else "form"
    mode = "url" if isinstance(request.params, UrlParams) else "form"
    checks = (
        meta.continuation_id == continuation.continuation_id,
        meta.correlation_id == continuation.correlation_id,
        meta.expires_at == iso_millis(continuation.expires_at),
        same_id(meta.request_id, request.id),
        meta.schema_version == RECEIPT_SCHEMA_VERSION,
        mode == expected_mode,
        request.params.message == pause.message,
    )
    if not all(checks):
        raise protocol_error(BINDING, "MCP elicitation request does not match the continuation")
    if isinstance(request.params, FormParams) and canonical_json(
        request.params.requested_schema
    ) != canonical_json(pause.schema):
        raise protocol_error(
            BINDING, "MCP elicitation request schema does not match the continuation"
        )


def _require_receipt(
    continuation: Continuation,
    request: Mapping[str, Any],
    parsed: SentRequest,
    receipt: McpElicitationReceipt | Mapping[str, Any],
) -> None:
    try:
        checked = (
            receipt
            if isinstance(receipt, McpElicitationReceipt)
            else msgspec.convert(receipt, McpElicitationReceipt, strict=True)
        )
    except msgspec.ValidationError:
        raise protocol_error(BINDING, "MCP elicitation receipt is malformed") from None
    mode = "url" if isinstance(parsed.params, UrlParams) else "form"
    checks = (
        checked.schema_version == RECEIPT_SCHEMA_VERSION,
        checked.continuation_id == continuation.continuation_id,
        checked.correlation_id == continuation.correlation_id,
        checked.mode == mode,
        same_id(checked.request_id, parsed.id),
        checked.request_hash == receipt_hash(request),
    )
    if not all(checks):
        raise protocol_error(BINDING, "MCP elicitation request does not match its issuance receipt")


def _check_bound_request(
    continuation: Continuation,
    request: Mapping[str, Any],
    receipt: McpElicitationReceipt | Mapping[str, Any],
) -> tuple[SentRequest, McpPause]:
    parsed = parse_sent_request(request, BINDING)
    pause = read_pause(continuation.payload)
    _require_request_binding(continuation, parsed, pause)
    _require_receipt(continuation, request, parsed, receipt)
    return parsed, pause


# -- the client's result ------------------------------------------------------------------


class _ElicitResult(msgspec.Struct, frozen=True, kw_only=True):
    # Passthrough: unknown members are ignored, as the reference does.
    action: McpAction
    content: dict[str, str | int | float | bool | list[str]] | UnsetType = UNSET
    meta: dict[str, Any] | UnsetType = msgspec.field(name="_meta", default=UNSET)


def _parse_result(result: object) -> _ElicitResult:
    try:
        parsed = msgspec.convert(result, _ElicitResult, strict=True)
    except msgspec.ValidationError as error:
        raise protocol_error(MESSAGE, f"MCP elicitation result is malformed: {error}") from None
    if isinstance(parsed.content, dict):
        for value in parsed.content.values():
            if isinstance(value, float) and not math.isfinite(value):
                raise protocol_error(MESSAGE, "MCP elicitation result numbers must be finite")
    return parsed


def parse_mcp_elicit_result(
    continuation: Continuation,
    request: Mapping[str, Any],
    receipt: McpElicitationReceipt | Mapping[str, Any],
    result: object,
) -> McpFormResponse | McpUrlConsent:
    """Check request and receipt bindings, then parse and validate the client's result."""
    require_pending(continuation, "an MCP elicitation result")
    parsed_request, pause = _check_bound_request(continuation, request, receipt)
    parsed = _parse_result(result)
    if isinstance(parsed_request.params, UrlParams):
        if not isinstance(parsed.content, UnsetType):
            raise protocol_error(MESSAGE, "A URL-mode elicitation result must not carry content")
        return McpUrlConsent(
            action=parsed.action, elicitation_id=parsed_request.params.elicitation_id
        )
    if parsed.action != "accept":
        if not isinstance(parsed.content, UnsetType):
            raise protocol_error(MESSAGE, f"A {parsed.action} result must not carry content")
        return McpFormResponse(action=parsed.action)
    if isinstance(parsed.content, UnsetType):
        raise protocol_error(MESSAGE, "An accepted form result must carry content")
    assert pause.schema is not None  # noqa: S101 - input pauses always have a schema
    content = check_form_content(pause.schema, parsed.content)
    return McpFormResponse(action="accept", content=content)


def to_mcp_elicitation_complete_notification(
    continuation: Continuation,
    url_request: Mapping[str, Any],
    receipt: McpElicitationReceipt | Mapping[str, Any],
) -> dict[str, Any]:
    """``notifications/elicitation/complete`` for a URL elicitation whose continuation resumed."""
    if continuation.status != "resumed":
        raise protocol_error(
            TRANSITION,
            f"Cannot complete an MCP URL elicitation for a {continuation.status} continuation",
        )
    parsed, _ = _check_bound_request(continuation, url_request, receipt)
    if not isinstance(parsed.params, UrlParams):
        raise protocol_error(BINDING, "Only a URL-mode elicitation can be completed")
    return {
        "jsonrpc": "2.0",
        "method": "notifications/elicitation/complete",
        "params": {
            "elicitationId": parsed.params.elicitation_id,
            "_meta": url_request["params"]["_meta"],
        },
    }
