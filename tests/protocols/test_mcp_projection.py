"""MCP elicitation projection and result parsing at TypeScript-reference parity (§3)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from mcp_types import jsonrpc_message_adapter
from mcp_types.methods import (
    parse_server_notification,
    parse_server_request,
    validate_client_result,
)

from pausemesh.core.canonical import canonical_sha256
from pausemesh.core.errors import ProtocolAdapterError
from pausemesh.core.model import Continuation, ContinuationStatus
from pausemesh.mcp.elicitation import (
    McpElicitationReceipt,
    McpFormResponse,
    McpProjectionContext,
    McpProjectionPolicy,
    McpUrlConsent,
    decode_mcp_projection_context,
    issue_mcp_elicitation,
    parse_mcp_elicit_result,
    to_mcp_elicitation_complete_notification,
)
from tests.support.continuations import make_continuation

FLIGHT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "flight": {"type": "string", "title": "Flight", "enum": ["PM101", "PM202", "PM303"]}
    },
    "required": ["flight"],
}
EVERY_KIND_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name", "minLength": 1, "maxLength": 20},
        "email": {"type": "string", "format": "email", "default": "a@example.com"},
        "site": {"type": "string", "format": "uri"},
        "day": {"type": "string", "format": "date"},
        "at": {"type": "string", "format": "date-time"},
        "seats": {"type": "integer", "minimum": 1, "maximum": 9, "default": 1},
        "budget": {"type": "number", "minimum": 0.5},
        "window": {"type": "boolean", "default": False, "description": "Window seat"},
        "cabin": {"type": "string", "enum": ["economy", "business"]},
        "legacy": {"type": "string", "enum": ["a", "b"], "enumNames": ["A", "B"]},
        "titled": {
            "type": "string",
            "oneOf": [{"const": "x", "title": "X"}, {"const": "y", "title": "Y"}],
            "default": "x",
        },
        "meals": {
            "type": "array",
            "items": {"type": "string", "enum": ["veg", "kosher", "halal"]},
            "minItems": 1,
            "maxItems": 2,
        },
        "extras": {
            "type": "array",
            "items": {
                "anyOf": [{"const": "bag", "title": "Bag"}, {"const": "pet", "title": "Pet"}]
            },
            "default": ["bag"],
        },
    },
    "required": ["name", "seats"],
}
VALID_ANSWER: dict[str, Any] = {
    "name": "Ada",
    "email": "ada@example.com",
    "site": "https://example.com/x",
    "day": "2026-12-01",
    "at": "2026-12-01T10:00:00Z",
    "seats": 2,
    "budget": 10.5,
    "window": True,
    "cabin": "business",
    "legacy": "b",
    "titled": "y",
    "meals": ["veg", "halal"],
    "extras": ["pet"],
}
FORM_CAPS: dict[str, Any] = {"elicitation": {"form": {}}}
URL_CAPS: dict[str, Any] = {"elicitation": {"url": {}}}
SAFE_URL = "https://auth.example.com/connect?state=abc&client_id=pm"


def input_continuation(schema: Any = FLIGHT_SCHEMA, **extra: Any) -> Continuation:
    payload = {"kind": "input", "message": "Which flight?", "responseSchema": schema, **extra}
    return make_continuation(payload)


def auth_continuation(status: ContinuationStatus = "pending") -> Continuation:
    return make_continuation(
        {"kind": "authorization", "message": "Sign in to the airline", "secret": "s3"},
        status=status,
    )


def context(caps: dict[str, Any] = FORM_CAPS, **extra: Any) -> McpProjectionContext:
    return decode_mcp_projection_context({"clientCapabilities": caps, "requestId": 7, **extra})


def url_context(url: str = SAFE_URL, **extra: Any) -> McpProjectionContext:
    binding = {"urlBinding": {"elicitationId": "elic-1", "url": url}}
    return context(URL_CAPS, **binding, **extra)


def trusting(**options: Any) -> McpProjectionPolicy:
    return McpProjectionPolicy(validate_authorization_url=lambda _url: True, **options)


def code_of(call: Any, *args: Any) -> str:
    with pytest.raises(ProtocolAdapterError) as caught:
        call(*args)
    return caught.value.code


# -- projection: form mode ---------------------------------------------------------------


def test_form_projection_is_an_sdk_valid_elicitation_request_with_pausemesh_meta() -> None:
    request, receipt = issue_mcp_elicitation(input_continuation(), context())

    assert request == {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": "Which flight?",
            "requestedSchema": FLIGHT_SCHEMA,
            "_meta": {
                "io.pausemesh/continuation": {
                    "continuationId": "cont-1",
                    "correlationId": "thread-1",
                    "expiresAt": "2026-11-29T12:15:00.000Z",
                    "requestId": 7,
                    "schemaVersion": 1,
                }
            },
        },
    }
    parsed = parse_server_request("elicitation/create", "2025-11-25", request["params"])
    assert parsed.params.requested_schema == FLIGHT_SCHEMA
    jsonrpc_message_adapter.validate_python(request)
    assert receipt.mode == "form"
    assert receipt.request_hash == canonical_sha256(["mcp-elicitation-v1", request])


def test_extra_payload_fields_are_never_projected() -> None:
    request, _ = issue_mcp_elicitation(input_continuation(secret="hunter2"), context())
    assert "hunter2" not in msgspec.json.encode(request).decode()


def test_a_payload_without_schema_asks_for_an_empty_form() -> None:
    continuation = make_continuation({"message": "Continue?"})
    request, _ = issue_mcp_elicitation(continuation, context())
    assert request["params"]["requestedSchema"] == {"type": "object", "properties": {}}


def test_every_primitive_kind_of_the_form_subset_projects_and_the_sdk_accepts_it() -> None:
    request, _ = issue_mcp_elicitation(input_continuation(EVERY_KIND_SCHEMA), context())
    parse_server_request("elicitation/create", "2025-11-25", request["params"])


def test_related_task_meta_is_added_when_given() -> None:
    request, _ = issue_mcp_elicitation(
        input_continuation(), context(relatedTask={"taskId": "task-9"})
    )
    assert request["params"]["_meta"]["io.modelcontextprotocol/related-task"] == {
        "taskId": "task-9"
    }
    assert "task" not in request["params"]


@pytest.mark.parametrize("caps", [{"elicitation": {}}, {"elicitation": {"form": {}, "url": {}}}])
def test_form_mode_accepts_form_or_the_legacy_empty_capability(caps: dict[str, Any]) -> None:
    request, _ = issue_mcp_elicitation(input_continuation(), context(caps))
    assert request["params"]["mode"] == "form"


@pytest.mark.parametrize(
    "caps", [{}, {"elicitation": {"url": {}}}, {"sampling": {}}], ids=["none", "url-only", "other"]
)
def test_form_mode_without_a_form_capability_is_unsupported(caps: dict[str, Any]) -> None:
    code = code_of(issue_mcp_elicitation, input_continuation(), context(caps))
    assert code == "UNSUPPORTED_PROTOCOL_CAPABILITY"


def test_form_mode_refuses_a_url_binding() -> None:
    ctx = context(
        {"elicitation": {"form": {}, "url": {}}},
        urlBinding={"elicitationId": "e", "url": SAFE_URL},
    )
    assert code_of(issue_mcp_elicitation, input_continuation(), ctx) == "INVALID_PROTOCOL_BINDING"


@pytest.mark.parametrize("status", ["resumed", "cancelled", "expired"])
def test_a_terminal_continuation_cannot_be_projected(status: ContinuationStatus) -> None:
    continuation = make_continuation({"message": "x"}, status=status)
    assert code_of(issue_mcp_elicitation, continuation, context()) == "INVALID_PROTOCOL_TRANSITION"


@pytest.mark.parametrize(
    "payload",
    [
        "just text",
        {"kind": "choice", "message": "x"},
        {"message": ""},
        {"message": 3},
        {"kind": "authorization", "message": "x", "responseSchema": FLIGHT_SCHEMA},
    ],
    ids=["not-object", "bad-kind", "empty-message", "number-message", "auth-with-schema"],
)
def test_a_malformed_payload_is_an_invalid_message(payload: Any) -> None:
    continuation = make_continuation(payload)
    assert code_of(issue_mcp_elicitation, continuation, url_context()) == "INVALID_PROTOCOL_MESSAGE"


def test_identifiers_with_edge_whitespace_fail_output_revalidation() -> None:
    continuation = make_continuation({"message": "x"}, correlation_id=" thread")
    assert code_of(issue_mcp_elicitation, continuation, context()) == "INVALID_PROTOCOL_MESSAGE"


# -- the form-schema subset --------------------------------------------------------------


def _with_field(definition: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"f": definition}}


@pytest.mark.parametrize(
    "schema",
    [
        _with_field({"type": "object", "properties": {}}),
        _with_field({"type": "string", "pattern": "^[A-Z]+$"}),
        _with_field({"type": "array", "items": {"type": "object"}}),
        _with_field({"type": "array"}),
        _with_field({"type": "string", "format": "hostname"}),
        _with_field({"type": "string", "enum": ["a", "a"]}),
        _with_field({"type": "string", "enum": []}),
        _with_field({"type": "string", "enum": ["a", 1]}),
        _with_field({"type": "string", "enum": ["a", "b"], "enumNames": ["A"]}),
        _with_field({"type": "string", "oneOf": [{"const": "a"}]}),
        _with_field({"type": "string", "oneOf": [{"const": "a", "title": "A", "x": 1}]}),
        _with_field({"type": "string", "minLength": 3, "maxLength": 2}),
        _with_field({"type": "string", "minLength": -1}),
        _with_field({"type": "string", "maxLength": 1.5}),
        _with_field({"type": "number", "minimum": 5, "maximum": 1}),
        _with_field({"type": "number", "minimum": "1"}),
        _with_field({"type": "integer", "default": 1.5}),
        _with_field({"type": "number", "maximum": 3, "default": 4}),
        _with_field({"type": "string", "maxLength": 2, "default": "abc"}),
        _with_field({"type": "string", "format": "email", "default": "nope"}),
        _with_field({"type": "string", "format": "date", "default": "2026-02-30"}),
        _with_field({"type": "string", "enum": ["a"], "default": "b"}),
        _with_field({"type": "boolean", "default": "yes"}),
        _with_field({"type": "boolean", "title": 3}),
        _with_field(
            {"type": "array", "items": {"type": "string", "enum": ["a"]}, "default": ["a", "a"]}
        ),
        _with_field(
            {
                "type": "array",
                "items": {"type": "string", "enum": ["a"]},
                "minItems": 2,
                "maxItems": 1,
            }
        ),
        _with_field({"type": "null"}),
        _with_field({"anyOf": [{"type": "string"}]}),
        {"type": "object", "properties": {}, "additionalProperties": False},
        {"type": "array", "properties": {}},
        {"type": "object"},
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["toString"]},
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "a"]},
    ],
)
def test_schemas_outside_the_flat_subset_are_refused(schema: dict[str, Any]) -> None:
    assert code_of(issue_mcp_elicitation, input_continuation(schema), context()) == (
        "INVALID_PROTOCOL_MESSAGE"
    )


# -- projection: URL mode ---------------------------------------------------------------


def test_authorization_projects_to_url_mode_with_the_bound_link() -> None:
    request, receipt = issue_mcp_elicitation(auth_continuation(), url_context(), trusting())

    params = request["params"]
    assert params["mode"] == "url"
    assert params["url"] == SAFE_URL
    assert params["elicitationId"] == "elic-1"
    assert params["message"] == "Sign in to the airline"
    assert "s3" not in msgspec.json.encode(request).decode()
    parsed = parse_server_request("elicitation/create", "2025-11-25", params)
    assert parsed.params.url == SAFE_URL
    assert receipt.mode == "url"


def test_url_mode_without_the_url_capability_is_unsupported() -> None:
    ctx = context(FORM_CAPS, urlBinding={"elicitationId": "e", "url": SAFE_URL})
    assert code_of(issue_mcp_elicitation, auth_continuation(), ctx, trusting()) == (
        "UNSUPPORTED_PROTOCOL_CAPABILITY"
    )


def test_url_mode_requires_a_url_binding() -> None:
    assert code_of(issue_mcp_elicitation, auth_continuation(), context(URL_CAPS), trusting()) == (
        "INVALID_PROTOCOL_BINDING"
    )


@pytest.mark.parametrize(
    "url",
    [
        "/relative/path",
        "auth.example.com/connect",
        "https://user:pass@auth.example.com/",
        "https://user@auth.example.com/",
        "https://auth.example.com/connect#frag",
        "https://auth.example.com/connect#",
        "https://auth.example.com/?token=x",
        "https://auth.example.com/?Access_Token=x",
        "https://auth.example.com/?id-token=x",
        "https://auth.example.com/?X-Api-Key=x",
        "https://auth.example.com/?client_secret=x",
        "https://auth.example.com/?sessionId=x",
        "https://auth.example.com/?SIG=x",
        "https://auth.example.com/?code=x",
        "https://auth.example.com/?jwt=x",
        "https://auth.example.com/?ticket=x",
        "https://auth.example.com/?refresh%5Ftoken=x",
        "https://auth.example.com/?my_password=x",
        "https://auth.example.com/?a=1&bearer=x",
        "https://auth.example.com/?assertion=x",
        "http://auth.example.com/connect",
        "http://192.168.1.10/connect",
        "http://10.0.0.1/connect",
        "ftp://auth.example.com/connect",
        "javascript:alert(1)",
        "https://auth.example.com/ connect",
        "https://auth.example.com:99999/",
        "https://[::1/",
    ],
)
def test_url_static_checks_refuse_unsafe_links(url: str) -> None:
    policy = trusting(allow_insecure_loopback_http=True)
    assert code_of(issue_mcp_elicitation, auth_continuation(), url_context(url), policy) == (
        "INVALID_PROTOCOL_BINDING"
    )


@pytest.mark.parametrize(
    "url",
    [
        "https://auth.example.com/connect?state=abc&client_id=pm&redirect_uri=x",
        "https://auth.example.com:8443/connect",
        "https://auth.example.com/?scope=openid&response_type=code_flow",
    ],
)
def test_https_links_without_credential_keys_pass(url: str) -> None:
    request, _ = issue_mcp_elicitation(auth_continuation(), url_context(url), trusting())
    assert request["params"]["url"] == url


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost:8787/connect",
        "http://app.localhost/connect",
        "http://127.0.0.1/connect",
        "http://127.8.9.10/connect",
        "http://[::1]:8787/connect",
    ],
)
def test_loopback_http_is_allowed_only_when_the_host_policy_says_so(url: str) -> None:
    with pytest.raises(ProtocolAdapterError):
        issue_mcp_elicitation(auth_continuation(), url_context(url), trusting())
    request, _ = issue_mcp_elicitation(
        auth_continuation(), url_context(url), trusting(allow_insecure_loopback_http=True)
    )
    assert request["params"]["url"] == url


@pytest.mark.parametrize(
    "policy",
    [
        None,
        McpProjectionPolicy(),
        McpProjectionPolicy(allow_insecure_loopback_http=True),
        McpProjectionPolicy(validate_authorization_url=lambda _url: False),
        McpProjectionPolicy(validate_authorization_url=lambda _url: "yes"),  # type: ignore[arg-type,return-value]
        McpProjectionPolicy(validate_authorization_url=lambda _url: 1 / 0 > 0),
    ],
    ids=["absent", "no-validator", "flag-only", "false", "truthy-not-true", "raises"],
)
def test_url_mode_fails_closed_without_an_affirmative_host_policy(
    policy: McpProjectionPolicy | None,
) -> None:
    assert code_of(issue_mcp_elicitation, auth_continuation(), url_context(), policy) == (
        "INVALID_PROTOCOL_BINDING"
    )


def test_the_host_policy_sees_the_exact_link() -> None:
    seen: list[str] = []

    def validate(url: str) -> bool:
        seen.append(url)
        return True

    issue_mcp_elicitation(
        auth_continuation(), url_context(), McpProjectionPolicy(validate_authorization_url=validate)
    )
    assert seen == [SAFE_URL]


# -- context decoding -------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {"clientCapabilities": FORM_CAPS, "requestId": 1, "allowInsecureHttp": True},
        {"clientCapabilities": FORM_CAPS, "requestId": 1, "policy": {}},
        {"clientCapabilities": FORM_CAPS},
        {"requestId": 1},
        {"clientCapabilities": FORM_CAPS, "requestId": True},
        {"clientCapabilities": FORM_CAPS, "requestId": 1.5},
        {"clientCapabilities": FORM_CAPS, "requestId": 2**53},
        {"clientCapabilities": FORM_CAPS, "requestId": " r1"},
        {"clientCapabilities": FORM_CAPS, "requestId": ""},
        {"clientCapabilities": FORM_CAPS, "requestId": 1, "relatedTask": None},
        {"clientCapabilities": FORM_CAPS, "requestId": 1, "relatedTask": {"taskId": "t "}},
        {"clientCapabilities": FORM_CAPS, "requestId": 1, "relatedTask": {"taskId": "t", "x": 1}},
        {"clientCapabilities": URL_CAPS, "requestId": 1, "urlBinding": {"url": SAFE_URL}},
        {
            "clientCapabilities": URL_CAPS,
            "requestId": 1,
            "urlBinding": {"elicitationId": "e", "url": f" {SAFE_URL}"},
        },
        {"clientCapabilities": [], "requestId": 1},
        "not an object",
    ],
)
def test_a_malformed_context_is_an_invalid_binding(body: Any) -> None:
    assert code_of(decode_mcp_projection_context, body) == "INVALID_PROTOCOL_BINDING"


def test_string_request_ids_keep_their_type() -> None:
    ctx = decode_mcp_projection_context({"clientCapabilities": FORM_CAPS, "requestId": "r 1"})
    request, receipt = issue_mcp_elicitation(input_continuation(), ctx)
    assert request["id"] == "r 1"
    assert receipt.request_id == "r 1"


# -- receipts -------------------------------------------------------------------------


def test_the_receipt_is_a_camel_case_record_of_the_exact_request() -> None:
    request, receipt = issue_mcp_elicitation(input_continuation(), context())
    assert msgspec.to_builtins(receipt) == {
        "schemaVersion": 1,
        "continuationId": "cont-1",
        "correlationId": "thread-1",
        "mode": "form",
        "requestId": 7,
        "requestHash": canonical_sha256(["mcp-elicitation-v1", request]),
    }


def _substitute(request: dict[str, Any], path: list[str], value: Any) -> dict[str, Any]:
    copy = msgspec.json.decode(msgspec.json.encode(request))
    target = copy
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return copy  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (["id"], 8),
        (["id"], "7"),
        (["params", "message"], "Which hotel?"),
        (["params", "requestedSchema"], {"type": "object", "properties": {}}),
        (["params", "_meta", "io.pausemesh/continuation", "continuationId"], "cont-2"),
        (["params", "_meta", "io.pausemesh/continuation", "correlationId"], "thread-2"),
        (["params", "_meta", "io.pausemesh/continuation", "expiresAt"], "2030-01-01T00:00:00.000Z"),
        (["params", "_meta", "io.pausemesh/continuation", "requestId"], 9),
        (["params", "_meta", "io.pausemesh/continuation", "schemaVersion"], 2),
        (["params", "mode"], "url"),
        (["params", "extra"], 1),
        (["jsonrpc"], "1.0"),
    ],
)
def test_a_substituted_form_request_is_refused(path: list[str], value: Any) -> None:
    continuation = input_continuation()
    request, receipt = issue_mcp_elicitation(continuation, context())
    tampered = _substitute(request, path, value)
    code = code_of(parse_mcp_elicit_result, continuation, tampered, receipt, {"action": "cancel"})
    assert code == "INVALID_PROTOCOL_BINDING"


def test_a_request_that_still_matches_the_continuation_but_not_the_receipt_is_refused() -> None:
    continuation = input_continuation()
    request, receipt = issue_mcp_elicitation(continuation, context())
    # Consistent with the continuation, but with a related task the receipt never saw.
    other = _substitute(
        request, ["params", "_meta", "io.modelcontextprotocol/related-task"], {"taskId": "t"}
    )
    code = code_of(parse_mcp_elicit_result, continuation, other, receipt, {"action": "cancel"})
    assert code == "INVALID_PROTOCOL_BINDING"


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (["params", "url"], "https://evil.example.com/connect"),
        (["params", "elicitationId"], "elic-2"),
        (["params", "message"], "Sign in elsewhere"),
    ],
)
def test_a_substituted_url_request_is_refused(path: list[str], value: Any) -> None:
    continuation = auth_continuation()
    request, receipt = issue_mcp_elicitation(continuation, url_context(), trusting())
    tampered = _substitute(request, path, value)
    code = code_of(parse_mcp_elicit_result, continuation, tampered, receipt, {"action": "accept"})
    assert code == "INVALID_PROTOCOL_BINDING"


@pytest.mark.parametrize(
    "change",
    [
        {"requestHash": "0" * 64},
        {"requestId": 8},
        {"mode": "url"},
        {"continuationId": "cont-2"},
        {"correlationId": "thread-2"},
        {"schemaVersion": 2},
        {"extra": True},
    ],
)
def test_a_receipt_that_does_not_match_is_refused(change: dict[str, Any]) -> None:
    continuation = input_continuation()
    request, receipt = issue_mcp_elicitation(continuation, context())
    altered = {**msgspec.to_builtins(receipt), **change}
    code = code_of(parse_mcp_elicit_result, continuation, request, altered, {"action": "cancel"})
    assert code == "INVALID_PROTOCOL_BINDING"


def test_a_persisted_receipt_round_trips_through_json() -> None:
    continuation = input_continuation()
    request, receipt = issue_mcp_elicitation(continuation, context())
    stored = msgspec.json.decode(msgspec.json.encode(receipt))
    outcome = parse_mcp_elicit_result(continuation, request, stored, {"action": "decline"})
    assert outcome == McpFormResponse(action="decline")
    assert msgspec.json.decode(msgspec.json.encode(receipt), type=McpElicitationReceipt) == receipt


# -- results ------------------------------------------------------------------------


def _parse_every_kind(result: Any) -> McpFormResponse | McpUrlConsent:
    continuation = input_continuation(EVERY_KIND_SCHEMA)
    request, receipt = issue_mcp_elicitation(continuation, context())
    return parse_mcp_elicit_result(continuation, request, receipt, result)


def test_an_accepted_answer_with_every_field_kind_is_returned() -> None:
    result = {"action": "accept", "content": VALID_ANSWER, "_meta": {"x": 1}, "extra": "ignored"}
    validate_client_result("elicitation/create", "2025-11-25", result)
    assert _parse_every_kind(result) == McpFormResponse(action="accept", content=VALID_ANSWER)


def test_only_required_fields_are_needed() -> None:
    content = {"name": "Ada", "seats": 1.0}
    assert _parse_every_kind({"action": "accept", "content": content}) == McpFormResponse(
        action="accept", content=content
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("name", ""),
        ("name", "x" * 21),
        ("name", 3),
        ("email", "not-an-email"),
        ("site", "no scheme"),
        ("day", "2026-13-01"),
        ("day", "01/12/2026"),
        ("at", "2026-12-01 10:00"),
        ("at", "2026-12-01T25:00:00Z"),
        ("seats", 0),
        ("seats", 10),
        ("seats", 1.5),
        ("seats", True),
        ("seats", "2"),
        ("budget", 0.1),
        ("window", "true"),
        ("window", 1),
        ("cabin", "first"),
        ("legacy", "A"),
        ("titled", "Y"),
        ("meals", []),
        ("meals", ["veg", "veg"]),
        ("meals", ["veg", "kosher", "halal"]),
        ("meals", ["steak"]),
        ("meals", "veg"),
        ("extras", ["Bag"]),
        ("name", None),
        ("unknown", "x"),
    ],
)
def test_an_answer_outside_the_schema_is_an_invalid_message(field: str, value: Any) -> None:
    content = {"name": "Ada", "seats": 2, field: value}
    assert code_of(_parse_every_kind, {"action": "accept", "content": content}) == (
        "INVALID_PROTOCOL_MESSAGE"
    )


@pytest.mark.parametrize(
    "result",
    [
        {"action": "accept"},
        {"action": "accept", "content": {"seats": 2}},
        {"action": "accept", "content": None},
        {"action": "decline", "content": {"name": "Ada", "seats": 2}},
        {"action": "cancel", "content": {}},
        {"action": "approve"},
        {"content": VALID_ANSWER},
        {"action": "accept", "content": {"name": "Ada", "seats": float("nan")}},
        "accept",
    ],
)
def test_a_malformed_result_is_an_invalid_message(result: Any) -> None:
    assert code_of(_parse_every_kind, result) == "INVALID_PROTOCOL_MESSAGE"


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_decline_and_cancel_carry_no_content(action: str) -> None:
    assert _parse_every_kind({"action": action}) == McpFormResponse(action=action)  # type: ignore[arg-type]


@pytest.mark.parametrize("action", ["accept", "decline", "cancel"])
def test_a_url_result_is_consent_only(action: str) -> None:
    continuation = auth_continuation()
    request, receipt = issue_mcp_elicitation(continuation, url_context(), trusting())
    outcome = parse_mcp_elicit_result(continuation, request, receipt, {"action": action})
    assert outcome == McpUrlConsent(action=action, elicitation_id="elic-1")  # type: ignore[arg-type]


def test_a_url_result_with_content_is_an_invalid_message() -> None:
    continuation = auth_continuation()
    request, receipt = issue_mcp_elicitation(continuation, url_context(), trusting())
    result = {"action": "accept", "content": {"token": "x"}}
    code = code_of(parse_mcp_elicit_result, continuation, request, receipt, result)
    assert code == "INVALID_PROTOCOL_MESSAGE"


def test_a_result_for_a_settled_continuation_is_an_invalid_transition() -> None:
    continuation = input_continuation()
    request, receipt = issue_mcp_elicitation(continuation, context())
    settled = msgspec.structs.replace(continuation, status="cancelled", version=2)
    code = code_of(parse_mcp_elicit_result, settled, request, receipt, {"action": "cancel"})
    assert code == "INVALID_PROTOCOL_TRANSITION"


# -- elicitation complete ------------------------------------------------------------


def test_the_complete_notification_follows_a_resumed_url_continuation() -> None:
    pending = auth_continuation()
    request, receipt = issue_mcp_elicitation(
        pending, url_context(relatedTask={"taskId": "task-9"}), trusting()
    )
    resumed = msgspec.structs.replace(pending, status="resumed", version=2)

    notification = to_mcp_elicitation_complete_notification(resumed, request, receipt)

    assert notification == {
        "jsonrpc": "2.0",
        "method": "notifications/elicitation/complete",
        "params": {"elicitationId": "elic-1", "_meta": request["params"]["_meta"]},
    }
    assert notification["params"]["_meta"]["io.modelcontextprotocol/related-task"] == {
        "taskId": "task-9"
    }
    parse_server_notification(
        "notifications/elicitation/complete", "2025-11-25", notification["params"]
    )
    jsonrpc_message_adapter.validate_python(notification)


@pytest.mark.parametrize("status", ["pending", "cancelled", "expired"])
def test_completion_needs_a_resumed_continuation(status: ContinuationStatus) -> None:
    pending = auth_continuation()
    request, receipt = issue_mcp_elicitation(pending, url_context(), trusting())
    other = msgspec.structs.replace(pending, status=status)
    code = code_of(to_mcp_elicitation_complete_notification, other, request, receipt)
    assert code == "INVALID_PROTOCOL_TRANSITION"


def test_completion_checks_request_and_receipt_bindings() -> None:
    pending = auth_continuation()
    request, receipt = issue_mcp_elicitation(pending, url_context(), trusting())
    resumed = msgspec.structs.replace(pending, status="resumed", version=2)
    tampered = _substitute(request, ["params", "elicitationId"], "elic-2")
    assert code_of(to_mcp_elicitation_complete_notification, resumed, tampered, receipt) == (
        "INVALID_PROTOCOL_BINDING"
    )
    form = input_continuation()
    form_request, form_receipt = issue_mcp_elicitation(form, context())
    resumed_form = msgspec.structs.replace(form, status="resumed", version=2)
    code = code_of(
        to_mcp_elicitation_complete_notification, resumed_form, form_request, form_receipt
    )
    assert code == "INVALID_PROTOCOL_BINDING"
