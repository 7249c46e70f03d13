"""The gateway's dispatch semantics, end to end: real ``pausemesh gateway --stdio`` processes
spawned by the official MCP client, a real upstream MCP server process that appends one line
per real call, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from tests.support.gateway import GatewayCase, call, gateway_client, invoice

# Each test starts several Python processes (gateway, upstream); on a loaded machine that is slow.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

STATUS = "continuity_status"
WHY = "continuity_why"


async def test_a_job_runs_once_and_a_repeat_reconciles_without_calling_the_upstream(
    case: GatewayCase,
) -> None:
    await case.pin()
    async with gateway_client(case.stdio()) as client:
        first = await call(client, "create_invoice", invoice())
        second = await call(client, "create_invoice", invoice())
    assert first["status"] == "RESPONSE_RETAINED"
    assert first["upstreamResult"]["structuredContent"] == {"invoice": "inv-A-1", "amount": 100}
    assert first["contentTrust"] == "UNTRUSTED_DATA"
    assert first["externalOutcome"] == "NOT_PROVEN"
    assert second["status"] == "RECONCILIATION_ONLY"
    assert second["operationId"] == first["operationId"]
    assert second["upstreamResult"] == first["upstreamResult"]
    assert case.lines() == [{"order_id": "A-1", "amount": 100}]


async def test_a_repeat_after_a_restart_through_a_renamed_alias_is_the_same_operation(
    case: GatewayCase,
) -> None:
    await case.pin()
    async with gateway_client(case.stdio()) as client:
        first = await call(client, "create_invoice", invoice())
    case.jobs[0]["name"] = "bill_order"
    await case.pin()
    async with gateway_client(case.stdio()) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        again = await call(client, "bill_order", invoice())
    assert tools == {"bill_order", STATUS, WHY}
    assert again["status"] == "RECONCILIATION_ONLY"
    assert again["operationId"] == first["operationId"]
    assert len(case.lines()) == 1


async def test_other_arguments_for_the_same_business_key_are_an_operation_conflict(
    case: GatewayCase,
) -> None:
    await case.pin()
    async with gateway_client(case.stdio()) as client:
        await call(client, "create_invoice", invoice(amount=100))
        conflict = await call(client, "create_invoice", invoice(amount=999))
    assert conflict["status"] == "OPERATION_CONFLICT"
    assert "upstreamResult" not in conflict
    assert case.lines() == [{"order_id": "A-1", "amount": 100}]


async def test_a_tool_definition_edited_after_pinning_is_tool_changed_and_nothing_is_sent(
    case: GatewayCase,
) -> None:
    await case.pin()
    case.set_control(changed=True)
    async with gateway_client(case.stdio()) as client:
        changed = await call(client, "create_invoice", invoice())
        status = await call(client, STATUS, {"job": "create_invoice", "order_id": "A-1"})
    assert changed["status"] == "TOOL_CHANGED"
    assert status["status"] == "NOT_STARTED"
    assert case.lines() == []


async def test_a_definition_changed_on_a_live_connection_and_announced_is_tool_changed(
    case: GatewayCase,
) -> None:
    # The gateway lists an upstream's tools once per connection; a list_changed notice on
    # that connection makes it list again before the next dispatch.
    case.jobs.append(
        {
            "name": "redefine",
            "upstream": "invoices",
            "tool": "redefine_invoice",
            "business_key": "redefine",
            "timeout_seconds": 5,
        }
    )
    await case.pin()
    async with gateway_client(case.stdio()) as client:
        before = await call(client, "create_invoice", invoice("A-1"))
        redefined = await call(client, "redefine", {})
        after = await call(client, "create_invoice", invoice("B-2"))
    assert before["status"] == "RESPONSE_RETAINED"
    assert redefined["status"] == "RESPONSE_RETAINED"
    assert after["status"] == "TOOL_CHANGED"
    assert [line["order_id"] for line in case.lines()] == ["A-1"]


@pytest.mark.parametrize("field", ["operationId", "businessKey", "actor", "session"])
async def test_fields_that_would_choose_identity_are_refused(case: GatewayCase, field: str) -> None:
    await case.pin()
    async with gateway_client(case.stdio()) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        refused = await call(client, "create_invoice", {**invoice(), field: "mine"})
    assert listed["create_invoice"].input_schema["additionalProperties"] is False
    assert refused["status"] == "REFUSED"
    assert refused["reason"] == "INVALID_ARGUMENTS"
    assert case.lines() == []


async def test_an_upstream_timeout_leaves_a_sticky_outcome_unknown(case: GatewayCase) -> None:
    case.jobs[0]["timeout_seconds"] = 0.5
    await case.pin()
    case.set_control(delay=3)
    async with gateway_client(case.stdio()) as client:
        first = await call(client, "create_invoice", invoice())
        case.set_control()
        repeats = [await call(client, "create_invoice", invoice()) for _ in range(3)]
    assert first["status"] == "OUTCOME_UNKNOWN"
    assert first["reason"] == "UPSTREAM_TIMEOUT"
    assert {r["status"] for r in repeats} == {"OUTCOME_UNKNOWN"}
    assert len(case.lines()) == 1


async def test_an_upstream_that_exits_mid_call_leaves_outcome_unknown_and_others_go_on(
    case: GatewayCase,
) -> None:
    await case.pin()
    case.set_control(exit=True)
    async with gateway_client(case.stdio()) as client:
        lost = await call(client, "create_invoice", invoice("A-1"))
        case.set_control()
        repeat = await call(client, "create_invoice", invoice("A-1"))
        other = await call(client, "create_invoice", invoice("B-2"))
    assert lost["status"] == "OUTCOME_UNKNOWN"
    assert repeat["status"] == "OUTCOME_UNKNOWN"
    # A fresh upstream session serves the next operation.
    assert other["status"] == "RESPONSE_RETAINED"
    assert [line["order_id"] for line in case.lines()] == ["A-1", "B-2"]


async def test_twenty_concurrent_identical_calls_dispatch_once(case: GatewayCase) -> None:
    await case.pin()
    case.set_control(delay=1)
    async with gateway_client(case.stdio()) as client:
        results = await asyncio.gather(
            *(call(client, "create_invoice", invoice()) for _ in range(20))
        )
    statuses = [r["status"] for r in results]
    assert statuses.count("RESPONSE_RETAINED") == 1
    assert set(statuses) <= {"RESPONSE_RETAINED", "BUSY", "RECONCILIATION_ONLY"}
    assert len(case.lines()) == 1


async def test_a_caller_with_only_inspect_reads_status_but_cannot_run(case: GatewayCase) -> None:
    await case.pin()
    async with gateway_client(case.stdio()) as client:
        await call(client, "create_invoice", invoice())
    case.access = '[access]\nlocal = ["auditor"]\n[access.roles]\nauditor = ["inspect"]\n'
    case.write()
    key = {"job": "create_invoice", "order_id": "A-1"}
    async with gateway_client(case.stdio()) as client:
        denied = await call(client, "create_invoice", invoice())
        other = await call(client, "create_invoice", invoice("C-3"))
        status = await call(client, STATUS, key)
        why = await call(client, WHY, key)
    assert denied["status"] == "DENIED"
    assert denied["reason"] == "EXECUTE_NOT_PERMITTED"
    assert other["status"] == "DENIED"
    assert status["status"] == "RESPONSE_RETAINED"
    assert status["permission"] == ["inspect"]
    assert why["permission"] == {"execute": False, "inspect": True}
    assert why["executionCapability"] is False
    assert len(case.lines()) == 1


async def test_status_and_why_never_carry_the_response_body(case: GatewayCase) -> None:
    await case.pin()
    key = {"job": "create_invoice", "order_id": "A-1"}
    async with gateway_client(case.stdio()) as client:
        before = await call(client, STATUS, key)
        await call(client, "create_invoice", invoice())
        status = await call(client, STATUS, key)
        why = await call(client, WHY, key)
        missing_key = await call(client, STATUS, {"job": "create_invoice"})
    assert before["status"] == "NOT_STARTED"
    assert status["status"] == "RESPONSE_RETAINED"
    assert status["dispatchPerformed"] is False
    assert status["dispatchedBy"]["worker"] == "gw-1"
    assert status["reportedError"] is False
    for body in (status, why):
        assert "inv-A-1" not in json.dumps(body)
        assert "upstreamResult" not in body
    assert missing_key["status"] == "REFUSED"
    assert missing_key["reason"] == "INVALID_ARGUMENTS"


async def test_a_fixed_key_job_is_inspected_by_its_name_alone(case: GatewayCase) -> None:
    case.jobs.append(
        {
            "name": "nightly_invoice",
            "upstream": "invoices",
            "tool": "create_invoice",
            "business_key": "nightly-2026-12-02",
        }
    )
    await case.pin()
    async with gateway_client(case.stdio()) as client:
        before = await call(client, STATUS, {"job": "nightly_invoice"})
        ran = await call(client, "nightly_invoice", invoice("N-1"))
        after = await call(client, STATUS, {"job": "nightly_invoice"})
        why = await call(client, "continuity_why", {"job": "nightly_invoice"})
        # Another order through the same fixed key is the same operation, other terms.
        conflict = await call(client, "nightly_invoice", invoice("N-2"))
    assert before["status"] == "NOT_STARTED"
    assert ran["status"] == "RESPONSE_RETAINED"
    assert after["status"] == "RESPONSE_RETAINED"
    assert after["operationId"] == ran["operationId"]
    assert "upstreamResult" in ran
    assert "upstreamResult" not in after  # inspection never returns the response body
    assert why["status"] == "RESPONSE_RETAINED"
    assert conflict["status"] == "OPERATION_CONFLICT"
    assert [line["order_id"] for line in case.lines()] == ["N-1"]


async def test_a_tool_the_gateway_does_not_list_is_invalid_params_not_a_refusal(
    case: GatewayCase,
) -> None:
    await case.pin()
    async with gateway_client(case.stdio()) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("delete_everything", invoice())
        still = await call(client, "create_invoice", invoice())
    assert refused.value.error.code == INVALID_PARAMS
    assert refused.value.error.message == "Unknown tool: delete_everything"
    assert still["status"] == "RESPONSE_RETAINED"
    assert [line["order_id"] for line in case.lines()] == ["A-1"]
