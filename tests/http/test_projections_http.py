"""POST /v1/continuations/{id}/projections/{ag-ui|mcp|a2a} over HTTP."""

from __future__ import annotations

import httpx
import pytest
from ag_ui.core import RunFinishedEvent

from tests.support.rest import PAYLOAD, assert_problem, create

pytestmark = pytest.mark.slow

AUTHORIZATION = {"kind": "authorization", "message": "Connect your airline account"}


async def _project(
    client: httpx.AsyncClient, continuation_id: str, protocol: str, body: object
) -> httpx.Response:
    return await client.post(
        f"/v1/continuations/{continuation_id}/projections/{protocol}", json=body
    )


async def test_ag_ui_projection_is_a_one_interrupt_cohort_with_its_receipt(
    client: httpx.AsyncClient,
) -> None:
    continuation_id, token = await create(client, correlationId="thread-agui")
    response = await _project(
        client, continuation_id, "ag-ui", {"runId": "run-1", "threadId": "thread-agui"}
    )
    assert response.status_code == 200
    body = response.json()
    event = RunFinishedEvent.model_validate(body["projection"])  # the official model parses it
    assert event.thread_id == "thread-agui"
    interrupts = body["projection"]["outcome"]["interrupts"]
    assert [i["id"] for i in interrupts] == [continuation_id]
    assert body["receipt"]["threadId"] == "thread-agui"
    assert body["receipt"]["runId"] == "run-1"
    assert token not in response.text

    other_thread = await _project(
        client, continuation_id, "ag-ui", {"runId": "run-1", "threadId": "elsewhere"}
    )
    assert_problem(other_thread, 400, "INVALID_PROTOCOL_BINDING")


async def test_mcp_projection_is_a_form_elicitation_with_a_receipt(
    client: httpx.AsyncClient,
) -> None:
    continuation_id, _ = await create(client)
    body = {"clientCapabilities": {"elicitation": {"form": {}}}, "requestId": 7}
    response = await _project(client, continuation_id, "mcp", body)
    assert response.status_code == 200
    request = response.json()["projection"]
    assert request["method"] == "elicitation/create"
    assert request["id"] == 7
    assert request["params"]["mode"] == "form"
    assert request["params"]["message"] == PAYLOAD["message"]
    assert response.json()["receipt"]["continuationId"] == continuation_id

    no_capability = await _project(
        client, continuation_id, "mcp", {"clientCapabilities": {}, "requestId": 8}
    )
    assert_problem(no_capability, 400, "UNSUPPORTED_PROTOCOL_CAPABILITY")


async def test_mcp_url_mode_fails_closed_without_a_host_policy(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/continuations", json={"payload": AUTHORIZATION})
    continuation_id = response.json()["continuation"]["continuationId"]
    body = {
        "clientCapabilities": {"elicitation": {"url": {}}},
        "requestId": "r-1",
        "urlBinding": {"elicitationId": "el-1", "url": "https://auth.example.com/authorize"},
    }
    assert_problem(
        await _project(client, continuation_id, "mcp", body), 400, "INVALID_PROTOCOL_BINDING"
    )


async def test_a2a_projection_is_an_input_required_task_bound_to_the_thread(
    client: httpx.AsyncClient,
) -> None:
    continuation_id, _ = await create(client, correlationId="ctx-a2a")
    response = await _project(
        client, continuation_id, "a2a", {"contextId": "ctx-a2a", "taskId": "task-1"}
    )
    assert response.status_code == 200
    task = response.json()["projection"]["task"]
    assert task["id"] == "task-1"
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert "receipt" not in response.json()
    wrong_context = await _project(
        client, continuation_id, "a2a", {"contextId": "other", "taskId": "task-1"}
    )
    assert_problem(wrong_context, 400, "INVALID_PROTOCOL_BINDING")


@pytest.mark.parametrize(
    ("protocol", "body"),
    [
        ("ag-ui", {"runId": "r", "threadId": "t"}),
        ("mcp", {"clientCapabilities": {"elicitation": {"form": {}}}, "requestId": 1}),
        ("a2a", {"contextId": "t", "taskId": "x"}),
    ],
)
async def test_a_settled_continuation_cannot_be_projected(
    client: httpx.AsyncClient, protocol: str, body: dict[str, object]
) -> None:
    continuation_id, _ = await create(client, correlationId="t")
    assert (await client.post(f"/v1/continuations/{continuation_id}/cancel", json={})).is_success
    response = await _project(client, continuation_id, protocol, body)
    assert_problem(response, 409, "INVALID_PROTOCOL_TRANSITION")
    # Looked up first: an unknown continuation is a 404 whatever the protocol.
    assert_problem(await _project(client, "missing", protocol, body), 404, "CONTINUATION_NOT_FOUND")


async def test_projection_bodies_are_strict(client: httpx.AsyncClient) -> None:
    continuation_id, _ = await create(client, correlationId="t")
    for protocol, body in [
        ("ag-ui", {"runId": "r", "threadId": "t", "extra": 1}),
        ("a2a", {"contextId": "t"}),
        ("mcp", {"clientCapabilities": {}, "requestId": 1, "policy": {"allow": True}}),
    ]:
        assert_problem(
            await _project(client, continuation_id, protocol, body), 400, "INVALID_REQUEST"
        )
