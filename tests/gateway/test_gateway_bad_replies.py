"""Replies the gateway cannot keep: unreadable, oversized, or not there by the timeout (an upstream
over streamable HTTP). Each gives the client ``OUTCOME_UNKNOWN`` as an ordinary tool result
(never an HTTP error), is declared unknown in the store before that answer, and is never sent
again. Real processes: a gateway over streamable HTTP or stdio, upstream MCP servers."""

from __future__ import annotations

import json
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook

from pausemesh.gateway.dispatcher import MAX_RETAINED_BYTES
from tests.support.gateway import GatewayCase, call, gateway_client, http_upstream, invoice
from tests.support.push_receiver import Receiver

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

KEY = {"job": "create_invoice", "order_id": "A-1"}
SECRET = "whsec_" + "b3BlcmF0b3ItbmVlZGVkLWhlcmUtbm93"


async def _three_calls_and_status(client: Any) -> tuple[dict[str, Any], list[Any], dict[str, Any]]:
    first = await call(client, "create_invoice", invoice())
    repeats = [await call(client, "create_invoice", invoice()) for _ in range(2)]
    status = await call(client, "continuity_status", KEY)
    return first, repeats, status


async def test_an_unreadable_upstream_reply_is_outcome_unknown_over_http_and_never_resent(
    case: GatewayCase,
) -> None:
    await case.pin()
    case.set_control(garbage=True)
    with case.http() as server:
        async with gateway_client(server.url("/mcp")) as client:
            first, repeats, status = await _three_calls_and_status(client)
            case.set_control()
            other = await call(client, "create_invoice", invoice("B-2"))
    assert (first["status"], first["reason"]) == ("OUTCOME_UNKNOWN", "UPSTREAM_FAILED")
    assert {r["status"] for r in repeats} == {"OUTCOME_UNKNOWN"}
    assert status["declaredUnknown"]["reason"] == "UPSTREAM_FAILED"
    assert "completedAt" not in status
    # The gateway dropped the confused upstream session; the next operation gets a fresh one.
    assert other["status"] == "RESPONSE_RETAINED"
    assert [line["order_id"] for line in case.lines()] == ["A-1", "B-2"]


async def test_an_oversized_upstream_reply_is_outcome_unknown_over_http_and_never_resent(
    case: GatewayCase,
) -> None:
    """Also: the declaration sends one signed ``operation.outcome_unknown`` webhook (an
    operator is needed), however often the operation is asked for again."""
    await case.pin()
    case.set_control(pad=MAX_RETAINED_BYTES + 1)
    with Receiver() as receiver:
        hook = {
            "id": "ops",
            "url": receiver.url,
            "events": ["operation.outcome_unknown", "pause.created"],
            "secrets": [SECRET],
        }
        hooks = case.root / "webhooks.json"
        hooks.write_text(json.dumps({"webhooks": [hook]}))
        env = {
            "PAUSEMESH_WEBHOOKS_FILE": str(hooks),
            "PAUSEMESH_A2A_PUSH_ALLOW": "loopback",
            # An hour: the declaration's own write wakes the delivery loop, no poll sends it.
            "PAUSEMESH_A2A_PUSH_POLL_SECONDS": "3600",
        }
        with case.http(env=env) as server:
            async with gateway_client(server.url("/mcp")) as client:
                first, repeats, status = await _three_calls_and_status(client)
            [delivery] = receiver.wait_for(1)
    assert (first["status"], first["reason"]) == ("OUTCOME_UNKNOWN", "REPORT_LIMIT")
    assert "upstreamResult" not in first
    assert {r["status"] for r in repeats} == {"OUTCOME_UNKNOWN"}
    assert status["declaredUnknown"]["reason"] == "REPORT_LIMIT"
    assert len(case.lines()) == 1
    body: dict[str, Any] = Webhook(SECRET).verify(delivery.body, delivery.headers)
    assert body["type"] == "operation.outcome_unknown"
    data = body["data"]
    assert data["operationId"] == first["operationId"]
    assert (data["reason"], data["tool"]) == ("REPORT_LIMIT", "create_invoice")
    assert data["operatorAction"]["command"].startswith(
        f"pausemesh ops resolve {first['operationId']} "
    )
    assert "A-1" not in delivery.body.decode()
    # The two repeats were declared before the delivery arrived: they queued nothing more.
    assert len(receiver.requests) == 1


async def test_an_http_upstream_that_does_not_answer_in_time_is_outcome_unknown(
    case: GatewayCase,
) -> None:
    release = case.root / "release"
    case.set_control(hold=str(release))
    case.jobs[0]["timeout_seconds"] = 1
    async with http_upstream(case), gateway_client(case.stdio()) as client:
        first, repeats, status = await _three_calls_and_status(client)
        release.touch()  # the upstream finishes now; the gateway no longer listens
    assert (first["status"], first["reason"]) == ("OUTCOME_UNKNOWN", "UPSTREAM_TIMEOUT")
    assert {r["status"] for r in repeats} == {"OUTCOME_UNKNOWN"}
    assert status["declaredUnknown"]["reason"] == "UPSTREAM_TIMEOUT"
    assert len(case.lines()) == 1
