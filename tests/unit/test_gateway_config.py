"""The gateway config and lock: every problem named at once, refused before anything starts."""

from __future__ import annotations

from typing import Any

import pytest
from mcp_types import Tool

from pausemesh.core.canonical import canonical_sha256
from pausemesh.core.errors import GatewayError
from pausemesh.gateway.config import GatewayConfig
from pausemesh.gateway.config_load import parse_gateway_config
from pausemesh.gateway.lock import LOCK_VERSION, GatewayLock, PinnedJob, agent_schema, check_lock
from pausemesh.gateway.upstream import MAX_CATALOG_TOOLS, catalog_tool


def _valid() -> dict[str, Any]:
    return {
        "domain": "billing",
        "upstreams": [{"id": "invoices", "command": "/usr/bin/python3", "args": ["s.py"]}],
        "jobs": [
            {
                "name": "create_invoice",
                "upstream": "invoices",
                "tool": "create_invoice",
                "business_key": "invoice:{order_id}",
            }
        ],
    }


def _errors(data: dict[str, Any]) -> list[str]:
    with pytest.raises(GatewayError) as caught:
        parse_gateway_config(data)
    assert caught.value.code == "GATEWAY_CONFIG_INVALID"
    errors: list[str] = caught.value.details["errors"]
    return errors


def test_a_valid_config_defaults_to_a_local_operator_with_both_permissions() -> None:
    config = parse_gateway_config(_valid())
    assert config.worker == "gateway"
    assert config.access.permissions(None) == {"execute", "inspect"}
    assert config.access.permissions("stranger") == frozenset()
    job = config.jobs["create_invoice"]
    assert job.key_fields == ("order_id",)
    assert job.business_key_for({"order_id": "A-1", "amount": 3}) == "invoice:A-1"


def test_every_problem_is_named_in_one_refusal() -> None:
    data = _valid()
    data["surprise"] = 1
    data["upstreams"].append({"id": "web", "command": "relative/cmd", "url": "ftp://x"})
    data["jobs"].append(
        {
            "name": "continuity_status",
            "upstream": "nowhere",
            "tool": "t",
            "business_key": "k:{a!r}",
            "timeout_seconds": 0,
            "require_approval": "yes",
        }
    )
    errors = _errors(data)
    for expected in (
        "config.surprise: is not a known setting",
        "upstreams[1]: needs exactly one of command (stdio) or url (streamable HTTP)",
        "upstreams[1].command: must be an absolute path",
        "upstreams[1].url: must be an http:// or https:// URL",
        "jobs[1].name: continuity_status is reserved for inspection",
        "jobs[1].upstream: names no upstream ('nowhere')",
        "jobs[1].business_key: placeholder {a} takes no format or conversion",
        "jobs[1].require_approval: must be true or false",
        "jobs[1].timeout_seconds: must be between 0.1 and 300.0",
    ):
        assert expected in errors


def test_names_and_business_keys_are_unique_and_roles_must_exist() -> None:
    data = _valid()
    data["jobs"].append(dict(data["jobs"][0]))
    data["access"] = {"roles": {"ops": ["execute", "fly"]}, "principals": {"ann": ["nope"]}}
    errors = _errors(data)
    assert "jobs[1].name: 'create_invoice' is used twice" in errors
    assert "jobs[1].business_key: 'invoice:{order_id}' is used twice" in errors
    assert "access.roles.ops: unknown permission 'fly' (execute, inspect)" in errors
    assert "access.principals.ann: names no role ('nope')" in errors


def test_a_missing_domain_and_empty_job_list_are_named() -> None:
    errors = _errors({"upstreams": [], "jobs": []})
    assert "config.domain: is required" in errors
    assert "config.upstreams: must list 1 to 8 [[upstreams]]" in errors
    assert "config.jobs: must list 1 to 32 [[jobs]]" in errors


def test_a_business_key_argument_must_be_a_string_or_an_integer() -> None:
    job = parse_gateway_config(_valid()).jobs["create_invoice"]
    with pytest.raises(GatewayError) as caught:
        job.business_key_for({"order_id": ["a", "list"]})
    assert caught.value.code == "INVALID_ARGUMENTS"


def _definition(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "create_invoice",
        "inputSchema": {"type": "object", "properties": properties, "required": sorted(properties)},
    }


def _lock(config: GatewayConfig, definition: dict[str, Any]) -> GatewayLock:
    pinned = PinnedJob(
        upstream="invoices",
        upstream_digest=config.upstreams["invoices"].digest,
        tool="create_invoice",
        definition=definition,
        digest=canonical_sha256(definition),
    )
    return GatewayLock(version=LOCK_VERSION, domain="billing", jobs={"create_invoice": pinned})


def test_a_lock_must_pin_exactly_the_configured_jobs_and_upstreams() -> None:
    config = parse_gateway_config(_valid())
    good = _lock(config, _definition({"order_id": {"type": "string"}}))
    check_lock(config, good)
    moved = _valid()
    moved["upstreams"][0]["args"] = ["other.py"]
    with pytest.raises(GatewayError) as caught:
        check_lock(parse_gateway_config(moved), good)
    assert caught.value.code == "GATEWAY_LOCK_MISMATCH"
    assert "upstream invoices was reconfigured" in caught.value.message


def test_a_pinned_definition_with_identity_fields_or_a_missing_key_argument_is_refused() -> None:
    config = parse_gateway_config(_valid())
    for properties in (
        {"order_id": {"type": "string"}, "operationId": {"type": "string"}},
        {"amount": {"type": "integer"}},
    ):
        with pytest.raises(GatewayError):
            check_lock(config, _lock(config, _definition(properties)))


def test_the_agent_sees_the_pinned_schema_closed() -> None:
    schema = agent_schema(_definition({"order_id": {"type": "string"}}))
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["order_id"]


def _tool(name: str) -> Tool:
    return Tool(name=name, input_schema={"type": "object"})


def test_a_catalogue_with_a_cursor_too_many_tools_or_a_name_twice_is_refused() -> None:
    tools = [_tool("a"), _tool("b")]
    assert catalog_tool(tools, None, "b").name == "b"
    for listed, cursor, code in (
        (tools, "page-2", "CATALOG_LIMIT"),
        ([_tool(f"t{i}") for i in range(MAX_CATALOG_TOOLS + 1)], None, "CATALOG_LIMIT"),
        ([_tool("a"), _tool("a")], None, "CATALOG_CONFLICT"),
        (tools, None, "TOOL_MISSING"),
    ):
        with pytest.raises(GatewayError) as caught:
            catalog_tool(listed, cursor, "c" if code == "TOOL_MISSING" else "a")
        assert caught.value.code == code
