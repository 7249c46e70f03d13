"""A person approves a ``require_approval`` job before its first dispatch, through the MCP
pause machinery, in both MCP eras, with the official client and real processes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import Client
from mcp_types import CallToolResult, ElicitResult, InputRequiredResult

from tests.support.gateway import GatewayCase, gateway_client, invoice, structured
from tests.support.protocol_clients import tool_round

# Each test starts several Python processes (gateway, upstream); on a loaded machine that is slow.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


async def _approval_case(case: GatewayCase) -> GatewayCase:
    case.jobs[0]["require_approval"] = True
    await case.pin()
    return case


def _answer(approve: bool) -> dict[str, ElicitResult]:
    return {"approval": ElicitResult(action="accept", content={"approve": approve})}


async def test_a_modern_client_is_asked_the_exact_terms_and_an_approval_dispatches_once(
    case: GatewayCase,
) -> None:
    await _approval_case(case)
    target = case.stdio()
    question = await tool_round(target, "create_invoice", invoice())
    assert isinstance(question, InputRequiredResult)
    assert question.input_requests is not None
    asked = question.input_requests["approval"].params.message  # type: ignore[union-attr]
    lines_while_asking = case.lines()
    approved = await tool_round(
        target, "create_invoice", invoice(), state=question.request_state, responses=_answer(True)
    )
    replayed = await tool_round(
        target, "create_invoice", invoice(), state=question.request_state, responses=_answer(True)
    )
    assert '{"amount":100,"order_id":"A-1"}' in asked
    assert lines_while_asking == []
    assert isinstance(approved, CallToolResult)
    assert structured(approved)["status"] == "RESPONSE_RETAINED"
    assert isinstance(replayed, CallToolResult)
    assert structured(replayed)["status"] == "RECONCILIATION_ONLY"
    assert len(case.lines()) == 1


async def test_a_declined_job_sends_nothing_and_every_repeat_stays_declined(
    case: GatewayCase,
) -> None:
    await _approval_case(case)
    target = case.stdio()
    question = await tool_round(target, "create_invoice", invoice())
    assert isinstance(question, InputRequiredResult)
    declined = await tool_round(
        target, "create_invoice", invoice(), state=question.request_state, responses=_answer(False)
    )
    repeat = await tool_round(target, "create_invoice", invoice())
    assert isinstance(declined, CallToolResult)
    assert isinstance(repeat, CallToolResult)
    for result in (declined, repeat):
        assert structured(result)["status"] == "DENIED"
        assert structured(result)["reason"] == "APPROVAL_DECLINED"
    assert case.lines() == []


async def test_a_handshake_era_client_answers_a_live_elicitation(case: GatewayCase) -> None:
    await _approval_case(case)
    asked: list[str] = []

    async def person(_context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        approve = '"order_id":"A-1"' in params.message
        return ElicitResult(action="accept", content={"approve": approve})

    async with gateway_client(case.stdio(), mode="legacy", elicitation_callback=person) as client:
        approved = structured(await client.call_tool("create_invoice", invoice("A-1")))
        declined = structured(await client.call_tool("create_invoice", invoice("B-2")))
        repeat = structured(await client.call_tool("create_invoice", invoice("B-2")))
    assert approved["status"] == "RESPONSE_RETAINED"
    assert declined["status"] == "DENIED"
    assert repeat["status"] == "DENIED"
    assert len(asked) == 2
    assert [line["order_id"] for line in case.lines()] == ["A-1"]


async def test_an_answer_after_the_gateway_was_killed_mid_question_still_dispatches_once(
    case: GatewayCase,
) -> None:
    await _approval_case(case)
    with case.http() as server:
        url = server.url("/mcp")
        question = await tool_round(url, "create_invoice", invoice())
        assert isinstance(question, InputRequiredResult)
        server.kill()
        server.start()
        approved = await tool_round(
            url, "create_invoice", invoice(), state=question.request_state, responses=_answer(True)
        )
        async with Client(url) as client:
            status = structured(
                await client.call_tool(
                    "continuity_status", {"job": "create_invoice", "order_id": "A-1"}
                )
            )
    assert isinstance(approved, CallToolResult)
    assert json.loads(approved.content[0].text)["status"] == "RESPONSE_RETAINED"  # type: ignore[union-attr]
    assert status["status"] == "RESPONSE_RETAINED"
    assert len(case.lines()) == 1


async def test_a_handshake_era_question_cut_by_a_kill_is_asked_again_after_restart_and_dispatches_once(
    case: GatewayCase,
) -> None:
    await _approval_case(case)
    asked: list[str] = []
    with case.http() as server:
        url = server.url("/mcp")

        async def killed_mid_question(_context: Any, params: Any) -> ElicitResult:
            asked.append(params.message)
            server.kill()  # the process dies while the person reads the question
            return ElicitResult(action="accept", content={"approve": True})

        # The client's task group ends with the connection the kill cut.
        with pytest.raises(ExceptionGroup):
            async with gateway_client(
                url, mode="legacy", elicitation_callback=killed_mid_question
            ) as client:
                await client.call_tool("create_invoice", invoice())
        assert case.lines() == []
        server.start()

        async def person(_context: Any, params: Any) -> ElicitResult:
            asked.append(params.message)
            return ElicitResult(action="accept", content={"approve": True})

        async with gateway_client(url, mode="legacy", elicitation_callback=person) as client:
            approved = structured(await client.call_tool("create_invoice", invoice()))
            repeat = structured(await client.call_tool("create_invoice", invoice()))
    assert approved["status"] == "RESPONSE_RETAINED"
    assert repeat["status"] == "RECONCILIATION_ONLY"
    assert len(asked) == 2
    assert asked[0] == asked[1]  # the same exact terms, asked again
    assert len(case.lines()) == 1
