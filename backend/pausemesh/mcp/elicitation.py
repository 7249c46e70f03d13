"""MCP elicitation (MCP 2025-11-25 ``elicitation/create``): the projection, and the public surface.

At parity with the TypeScript reference (aantenore/pausemesh; docs/protocols-mcp-a2a.md):

* ``issue_mcp_elicitation`` projects a pending continuation to a JSON-RPC
  ``elicitation/create`` request and a host-only receipt. ``kind: "input"`` becomes form mode
  (flat schema subset, ``elicitation.form`` or the legacy empty capability), ``kind:
  "authorization"`` becomes URL mode (``elicitation.url``, an explicit URL binding, static URL
  checks and a trusted host policy that fails closed).
* ``parse_mcp_elicit_result`` and ``to_mcp_elicitation_complete_notification`` (result parsing,
  in ``mcp.elicitation_result``) are re-exported here; the request's strict shape and its
  receipt live in ``mcp.elicitation_request``.

The receipt is workflow state: persist it, never send it, never treat it as a credential.
Every failure is a ``ProtocolAdapterError`` with one of the ``INVALID_PROTOCOL_*`` /
``UNSUPPORTED_PROTOCOL_CAPABILITY`` codes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec
from msgspec import UNSET, UnsetType

from pausemesh.core.clock import iso_millis
from pausemesh.core.model import Continuation
from pausemesh.core.validation import check_protocol_id
from pausemesh.mcp.elicitation_request import (
    BINDING,
    CAPABILITY,
    MESSAGE,
    PAUSEMESH_META_KEY,
    RECEIPT_SCHEMA_VERSION,
    RELATED_TASK_META_KEY,
    McpElicitationReceipt,
    McpRelatedTask,
    check_request_id,
    parse_sent_request,
    protocol_error,
    read_pause,
    receipt_hash,
    require_pending,
)
from pausemesh.mcp.elicitation_result import (
    McpFormResponse,
    McpUrlConsent,
    parse_mcp_elicit_result,
    to_mcp_elicitation_complete_notification,
)
from pausemesh.mcp.url_policy import McpProjectionPolicy, check_authorization_url

__all__ = (
    "MCP_CORRELATION_PREFIX",
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

# Every pause an MCP tool opens carries a correlation id with this prefix.
MCP_CORRELATION_PREFIX: Final = "mcp:"


# -- context (from the REST body or a trusted host) ---------------------------------------


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


def _check_context(context: McpProjectionContext) -> None:
    check_request_id(context.request_id, BINDING)
    if not isinstance(context.client_capabilities, dict):
        raise protocol_error(BINDING, "clientCapabilities must be an object")
    if isinstance(context.related_task, McpRelatedTask):
        check_protocol_id(context.related_task.task_id, "relatedTask.taskId", BINDING)
    if isinstance(context.url_binding, McpUrlBinding):
        check_protocol_id(context.url_binding.elicitation_id, "urlBinding.elicitationId", BINDING)
        if (
            not context.url_binding.url
            or context.url_binding.url != context.url_binding.url.strip()
        ):
            raise protocol_error(BINDING, "urlBinding.url must not have edge whitespace")


def decode_mcp_projection_context(body: object) -> McpProjectionContext:
    """Decode the projection context from a parsed JSON body (strict; ``INVALID_PROTOCOLBINDING``)."""
    try:
        context = msgspec.convert(body, McpProjectionContext, strict=True)
    except msgspec.ValidationError as error:
        raise protocol_error(BINDING, f"Invalid MCP projection context: {error}") from None
    _check_context(context)
    return context


# -- capabilities -------------------------------------------------------------------------


def _elicitation_capability(capabilities: Mapping[str, Any]) -> dict[str, Any]:
    elicitation = capabilities.get("elicitation")
    if elicitation is None:
        raise protocol_error(CAPABILITY, "MCP client did not declare the elicitation capability")
    if not isinstance(elicitation, dict):
        raise protocol_error(BINDING, "clientCapabilities.elicitation must be an object")
    return elicitation


def require_form_capability(capabilities: Mapping[str, Any]) -> None:
    """Raise ``UNSUPPORTED_PROTOCOLCAPABILITY`` unless the client can render a form."""
    elicitation = _elicitation_capability(capabilities)
    # The legacy empty object means form mode only (MCP 2025-11-25 §Capabilities).
    if "form" not in elicitation and elicitation:
        raise protocol_error(CAPABILITY, "MCP client did not declare form-mode elicitation")


def require_url_capability(capabilities: Mapping[str, Any]) -> None:
    """Raise ``UNSUPPORTED_PROTOCOLCAPABILITY`` unless the client can open a URL elicitation."""
    if "url" not in _elicitation_capability(capabilities):
        raise protocol_error(CAPABILITY, "MCP client did not declare URL-mode elicitation")


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
    require_pending(continuation, "MCP elicitation")
    _check_context(context)
    payload = read_pause(continuation.payload)
    capabilities = context.client_capabilities
    params: dict[str, Any]
    if payload.kind == "authorization":
        require_url_capability(capabilities)
        if not isinstance(context.url_binding, McpUrlBinding):
            raise protocol_error(BINDING, "URL-mode elicitation requires a urlBinding")
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
            raise protocol_error(BINDING, "A form-mode elicitation must not carry a urlBinding")
        params = {"mode": "form", "message": payload.message, "requestedSchema": payload.schema}
    params["_meta"] = _meta(continuation, context)
    request = {
        "jsonrpc": "2.0",
        "id": context.request_id,
        "method": "elicitation/create",
        "params": params,
    }
    # Re-validate what we built: identifiers in the continuation are checked here too.
    parse_sent_request(request, MESSAGE)
    return request


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
        request_hash=receipt_hash(request),
    )
    return request, receipt
