"""MCP elicitation projection and result parsing (MCP 2025-11-25 ``elicitation/create``).

At parity with the TypeScript reference (``reference/pausemesh-ts.md`` §3):

* ``issue_mcp_elicitation`` projects a pending continuation to a JSON-RPC
  ``elicitation/create`` request and a host-only receipt. ``kind: "input"`` becomes form mode
  (flat schema subset, ``elicitation.form`` or the legacy empty capability), ``kind:
  "authorization"`` becomes URL mode (``elicitation.url``, an explicit URL binding, static URL
  checks and a trusted host policy that fails closed).
* ``parse_mcp_elicit_result`` checks the request against the continuation, the receipt against
  the request, then parses the client's ``ElicitResult`` and validates form answers.
* ``to_mcp_elicitation_complete_notification`` builds ``notifications/elicitation/complete``
  once the trusted out-of-band callback resumed the continuation.

The receipt is workflow state: persist it, never send it, never treat it as a credential.
Every failure is a ``ProtocolAdapterError`` with one of the ``INVALID_PROTOCOL_*`` /
``UNSUPPORTED_PROTOCOL_CAPABILITY`` codes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from pausemesh.core.canonical import canonical_json, canonical_sha256
from pausemesh.core.clock import iso_millis
from pausemesh.core.errors import ProtocolAdapterError
from pausemesh.core.model import Continuation
from pausemesh.core.validation import check_protocol_id
from pausemesh.mcp.form_schema import EMPTY_FORM_SCHEMA, check_form_content, check_requested_schema
from pausemesh.mcp.url_policy import McpProjectionPolicy, check_authorization_url

__all__ = (
    "PAUSEMESH_META_KEY",
    "RELATED_TASK_META_KEY",
    "McpElicitationReceipt",
    "McpFormResponse",
    "McpProjectionContext",
    "McpProjectionPolicy",
    "McpRelatedTask",
    "McpUrlBinding",
    "McpUrlConsent",
    "decode_mcp_projection_context",
    "issue_mcp_elicitation",
    "parse_mcp_elicit_result",
    "require_form_capability",
    "require_url_capability",
    "to_mcp_elicit_request",
    "to_mcp_elicitation_complete_notification",
)

PAUSEMESH_META_KEY = "io.pausemesh/continuation"
RELATED_TASK_META_KEY = "io.modelcontextprotocol/related-task"
RECEIPT_SCHEMA_VERSION = 1
_HASH_DOMAIN = "mcp-elicitation-v1"
_MAX_SAFE_INTEGER = 2**53 - 1

_BINDING = "INVALID_PROTOCOL_BINDING"
_MESSAGE = "INVALID_PROTOCOL_MESSAGE"
_TRANSITION = "INVALID_PROTOCOL_TRANSITION"
_CAPABILITY = "UNSUPPORTED_PROTOCOL_CAPABILITY"

McpMode = Literal["form", "url"]
McpAction = Literal["accept", "decline", "cancel"]


# -- context (from the REST body or a trusted host) ---------------------------------------


class McpRelatedTask(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel"
):
    task_id: str


class McpUrlBinding(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel"
):
    elicitation_id: str
    url: str


class McpProjectionContext(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel"
):
    """What the MCP session knows: the client's declared capabilities and the request id.

    Strict: unknown keys are refused, so a request body cannot smuggle host policy in.
    """

    client_capabilities: dict[str, Any]
    request_id: str | int
    related_task: McpRelatedTask | UnsetType = UNSET
    url_binding: McpUrlBinding | UnsetType = UNSET


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


class McpFormResponse(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    kind: Literal["form_response"] = "form_response"
    action: McpAction
    content: dict[str, Any] | UnsetType = UNSET


class McpUrlConsent(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """``accept`` here only means the user agreed to open the link, not that it finished."""

    kind: Literal["url_consent"] = "url_consent"
    action: McpAction
    elicitation_id: str


def _error(code: str, message: str) -> ProtocolAdapterError:
    return ProtocolAdapterError(message, code=code)


def _check_request_id(value: object, code: str) -> str | int:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise _error(code, "requestId must be a string or a safe integer")
    if isinstance(value, int):
        if abs(value) > _MAX_SAFE_INTEGER:
            raise _error(code, "requestId must be a safe integer")
        return value
    return check_protocol_id(value, "requestId", code)


def _check_context(context: McpProjectionContext) -> None:
    _check_request_id(context.request_id, _BINDING)
    if not isinstance(context.client_capabilities, dict):
        raise _error(_BINDING, "clientCapabilities must be an object")
    if isinstance(context.related_task, McpRelatedTask):
        check_protocol_id(context.related_task.task_id, "relatedTask.taskId", _BINDING)
    if isinstance(context.url_binding, McpUrlBinding):
        check_protocol_id(context.url_binding.elicitation_id, "urlBinding.elicitationId", _BINDING)
        if (
            not context.url_binding.url
            or context.url_binding.url != context.url_binding.url.strip()
        ):
            raise _error(_BINDING, "urlBinding.url must not have edge whitespace")


def decode_mcp_projection_context(body: object) -> McpProjectionContext:
    """Decode the projection context from a parsed JSON body (strict; ``INVALID_PROTOCOL_BINDING``)."""
    try:
        context = msgspec.convert(body, McpProjectionContext, strict=True)
    except msgspec.ValidationError as error:
        raise _error(_BINDING, f"Invalid MCP projection context: {error}") from None
    _check_context(context)
    return context


# -- payload ------------------------------------------------------------------------------


class _Payload(msgspec.Struct, frozen=True, kw_only=True):
    kind: Literal["input", "authorization"]
    message: str
    schema: dict[str, Any] | None


def _parse_payload(payload: object) -> _Payload:
    if not isinstance(payload, dict):
        raise _error(_MESSAGE, "Continuation payload must be an object")
    kind = payload.get("kind", "input")
    if kind not in {"input", "authorization"}:
        raise _error(_MESSAGE, "Continuation payload kind must be 'input' or 'authorization'")
    message = payload.get("message")
    if not isinstance(message, str) or not message:
        raise _error(_MESSAGE, "Continuation payload message must be a non-empty string")
    if kind == "authorization":
        if "responseSchema" in payload:
            raise _error(_MESSAGE, "An authorization payload must not carry a responseSchema")
        return _Payload(kind="authorization", message=message, schema=None)
    schema = payload.get("responseSchema")
    checked = EMPTY_FORM_SCHEMA if schema is None else check_requested_schema(schema)
    return _Payload(kind="input", message=message, schema=checked)


def _require_pending(continuation: Continuation, purpose: str) -> None:
    if continuation.status != "pending":
        raise _error(_TRANSITION, f"Cannot use a {continuation.status} continuation for {purpose}")


# -- capabilities -------------------------------------------------------------------------


def _elicitation_capability(capabilities: Mapping[str, Any]) -> dict[str, Any]:
    elicitation = capabilities.get("elicitation")
    if elicitation is None:
        raise _error(_CAPABILITY, "MCP client did not declare the elicitation capability")
    if not isinstance(elicitation, dict):
        raise _error(_BINDING, "clientCapabilities.elicitation must be an object")
    return elicitation


def require_form_capability(capabilities: Mapping[str, Any]) -> None:
    """Raise ``UNSUPPORTED_PROTOCOL_CAPABILITY`` unless the client can render a form."""
    elicitation = _elicitation_capability(capabilities)
    # The legacy empty object means form mode only (MCP 2025-11-25 §Capabilities).
    if "form" not in elicitation and elicitation:
        raise _error(_CAPABILITY, "MCP client did not declare form-mode elicitation")


def require_url_capability(capabilities: Mapping[str, Any]) -> None:
    """Raise ``UNSUPPORTED_PROTOCOL_CAPABILITY`` unless the client can open a URL elicitation."""
    if "url" not in _elicitation_capability(capabilities):
        raise _error(_CAPABILITY, "MCP client did not declare URL-mode elicitation")


# -- projection ---------------------------------------------------------------------------


def _meta(continuation: Continuation, context: McpProjectionContext) -> dict[str, Any]:
    meta: dict[str, Any] = {
        PAUSEMESH_META_KEY: {
            "continuationId": continuation.continuation_id,
            "correlationId": continuation.correlation_id,
            "expiresAt": iso_millis(continuation.expires_at),
            "requestId": context.request_id,
            "schemaVersion": RECEIPT_SCHEMA_VERSION,
        }
    }
    if isinstance(context.related_task, McpRelatedTask):
        meta[RELATED_TASK_META_KEY] = {"taskId": context.related_task.task_id}
    return meta


def to_mcp_elicit_request(
    continuation: Continuation,
    context: McpProjectionContext,
    policy: McpProjectionPolicy | None = None,
) -> dict[str, Any]:
    """The JSON-RPC ``elicitation/create`` request for a pending continuation."""
    _require_pending(continuation, "MCP elicitation")
    _check_context(context)
    payload = _parse_payload(continuation.payload)
    capabilities = context.client_capabilities
    params: dict[str, Any]
    if payload.kind == "authorization":
        require_url_capability(capabilities)
        if not isinstance(context.url_binding, McpUrlBinding):
            raise _error(_BINDING, "URL-mode elicitation requires a urlBinding")
        check_authorization_url(context.url_binding.url, policy)
        params = {
            "mode": "url",
            "message": payload.message,
            "elicitationId": context.url_binding.elicitation_id,
            "url": context.url_binding.url,
        }
    else:
        require_form_capability(capabilities)
        if isinstance(context.url_binding, McpUrlBinding):
            raise _error(_BINDING, "A form-mode elicitation must not carry a urlBinding")
        params = {"mode": "form", "message": payload.message, "requestedSchema": payload.schema}
    params["_meta"] = _meta(continuation, context)
    request = {
        "jsonrpc": "2.0",
        "id": context.request_id,
        "method": "elicitation/create",
        "params": params,
    }
    # Re-validate what we built: identifiers in the continuation are checked here too.
    _parse_request(request, _MESSAGE)
    return request


def _receipt_hash(request: Mapping[str, Any]) -> str:
    return canonical_sha256([_HASH_DOMAIN, request])


def issue_mcp_elicitation(
    continuation: Continuation,
    context: McpProjectionContext,
    policy: McpProjectionPolicy | None = None,
) -> tuple[dict[str, Any], McpElicitationReceipt]:
    """Project the continuation and return ``(request, receipt)``; persist the receipt."""
    request = to_mcp_elicit_request(continuation, context, policy)
    receipt = McpElicitationReceipt(
        schema_version=RECEIPT_SCHEMA_VERSION,
        continuation_id=continuation.continuation_id,
        correlation_id=continuation.correlation_id,
        mode=request["params"]["mode"],
        request_id=context.request_id,
        request_hash=_receipt_hash(request),
    )
    return request, receipt


# -- the request as sent (strict shape) ---------------------------------------------------


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


class _FormParams(
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


class _UrlParams(
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


class _ElicitRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    jsonrpc: Literal["2.0"]
    id: str | int
    method: Literal["elicitation/create"]
    params: _FormParams | _UrlParams


def _parse_request(request: object, code: str) -> _ElicitRequest:
    try:
        parsed = msgspec.convert(request, _ElicitRequest, strict=True)
        _check_request_id(parsed.id, code)
        meta = parsed.params.meta
        check_protocol_id(meta.continuation.continuation_id, "continuationId", code)
        check_protocol_id(meta.continuation.correlation_id, "correlationId", code)
        _check_request_id(meta.continuation.request_id, code)
        if isinstance(meta.related_task, McpRelatedTask):
            check_protocol_id(meta.related_task.task_id, "relatedTask.taskId", code)
        if isinstance(parsed.params, _FormParams):
            check_requested_schema(parsed.params.requested_schema)
        else:
            check_protocol_id(parsed.params.elicitation_id, "elicitationId", code)
    except (msgspec.ValidationError, ProtocolAdapterError) as error:
        raise _error(code, f"MCP elicitation request is malformed: {error}") from None
    return parsed


def _same_id(left: str | int, right: str | int) -> bool:
    return type(left) is type(right) and left == right


def _require_request_binding(
    continuation: Continuation, request: _ElicitRequest, payload: _Payload
) -> None:
    meta = request.params.meta.continuation
    expected_mode = "url" if payload.kind == "authorization" else "form"
    mode = "url" if isinstance(request.params, _UrlParams) else "form"
    checks = (
        meta.continuation_id == continuation.continuation_id,
        meta.correlation_id == continuation.correlation_id,
        meta.expires_at == iso_millis(continuation.expires_at),
        _same_id(meta.request_id, request.id),
        meta.schema_version == RECEIPT_SCHEMA_VERSION,
        mode == expected_mode,
        request.params.message == payload.message,
    )
    if not all(checks):
        raise _error(_BINDING, "MCP elicitation request does not match the continuation")
    if isinstance(request.params, _FormParams) and canonical_json(
        request.params.requested_schema
    ) != canonical_json(payload.schema):
        raise _error(_BINDING, "MCP elicitation request schema does not match the continuation")


def _require_receipt(
    continuation: Continuation,
    request: Mapping[str, Any],
    parsed: _ElicitRequest,
    receipt: McpElicitationReceipt | Mapping[str, Any],
) -> None:
    try:
        checked = (
            receipt
            if isinstance(receipt, McpElicitationReceipt)
            else msgspec.convert(receipt, McpElicitationReceipt, strict=True)
        )
    except msgspec.ValidationError:
        raise _error(_BINDING, "MCP elicitation receipt is malformed") from None
    mode = "url" if isinstance(parsed.params, _UrlParams) else "form"
    checks = (
        checked.schema_version == RECEIPT_SCHEMA_VERSION,
        checked.continuation_id == continuation.continuation_id,
        checked.correlation_id == continuation.correlation_id,
        checked.mode == mode,
        _same_id(checked.request_id, parsed.id),
        checked.request_hash == _receipt_hash(request),
    )
    if not all(checks):
        raise _error(_BINDING, "MCP elicitation request does not match its issuance receipt")


def _check_bound_request(
    continuation: Continuation,
    request: Mapping[str, Any],
    receipt: McpElicitationReceipt | Mapping[str, Any],
) -> tuple[_ElicitRequest, _Payload]:
    parsed = _parse_request(request, _BINDING)
    payload = _parse_payload(continuation.payload)
    _require_request_binding(continuation, parsed, payload)
    _require_receipt(continuation, request, parsed, receipt)
    return parsed, payload


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
        raise _error(_MESSAGE, f"MCP elicitation result is malformed: {error}") from None
    if isinstance(parsed.content, dict):
        for value in parsed.content.values():
            if isinstance(value, float) and not math.isfinite(value):
                raise _error(_MESSAGE, "MCP elicitation result numbers must be finite")
    return parsed


def parse_mcp_elicit_result(
    continuation: Continuation,
    request: Mapping[str, Any],
    receipt: McpElicitationReceipt | Mapping[str, Any],
    result: object,
) -> McpFormResponse | McpUrlConsent:
    """Check request and receipt bindings, then parse and validate the client's result."""
    _require_pending(continuation, "an MCP elicitation result")
    parsed_request, payload = _check_bound_request(continuation, request, receipt)
    parsed = _parse_result(result)
    if isinstance(parsed_request.params, _UrlParams):
        if not isinstance(parsed.content, UnsetType):
            raise _error(_MESSAGE, "A URL-mode elicitation result must not carry content")
        return McpUrlConsent(
            action=parsed.action, elicitation_id=parsed_request.params.elicitation_id
        )
    if parsed.action != "accept":
        if not isinstance(parsed.content, UnsetType):
            raise _error(_MESSAGE, f"A {parsed.action} result must not carry content")
        return McpFormResponse(action=parsed.action)
    if isinstance(parsed.content, UnsetType):
        raise _error(_MESSAGE, "An accepted form result must carry content")
    assert payload.schema is not None  # noqa: S101 - input payloads always have a schema
    content = check_form_content(payload.schema, parsed.content)
    return McpFormResponse(action="accept", content=content)


def to_mcp_elicitation_complete_notification(
    continuation: Continuation,
    url_request: Mapping[str, Any],
    receipt: McpElicitationReceipt | Mapping[str, Any],
) -> dict[str, Any]:
    """``notifications/elicitation/complete`` for a URL elicitation whose continuation resumed."""
    if continuation.status != "resumed":
        raise _error(
            _TRANSITION,
            f"Cannot complete an MCP URL elicitation for a {continuation.status} continuation",
        )
    parsed, _ = _check_bound_request(continuation, url_request, receipt)
    if not isinstance(parsed.params, _UrlParams):
        raise _error(_BINDING, "Only a URL-mode elicitation can be completed")
    return {
        "jsonrpc": "2.0",
        "method": "notifications/elicitation/complete",
        "params": {
            "elicitationId": parsed.params.elicitation_id,
            "_meta": url_request["params"]["_meta"],
        },
    }
