"""The tasks extension of the current revision (SEP-2663) in process: what its statuses and
acks mean, beside the 2025-11-25 form.

A tool that ran and reported an error is a ``completed`` task whose ``result`` says
``isError`` (``failed`` is for protocol errors); ``tasks/cancel`` is an ack only, the same for a
task that already ended; ``tasks/update`` ignores keys that name no outstanding question.
The cross-process story (restart, another replica, booking once) is
``tests/protocols/test_mcp_tasks.py``; the official suite's checks are
``tests/protocols/test_mcp_conformance.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, InputRequiredResult, TextContent

from pausemesh.mcp.pauses import McpPauses
from pausemesh.settings import Settings
from pausemesh.web.app import create_app
from pausemesh.web.mcp_mount import McpPlugin
from pausemesh.web.plugin import PauseMeshPlugin
from tests.support.asgi import asgi

TASKS = "io.modelcontextprotocol/tasks"
APPROVAL = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}},
    "required": ["approved"],
}


def _register_deploy(server: MCPServer, pauses: McpPauses, _: PauseMeshPlugin) -> None:
    pauses.allow_tasks("deploy")

    @server.tool(name="deploy")
    async def deploy(target: str, ctx: Context[Any, Any]) -> CallToolResult | InputRequiredResult:
        answer = await pauses.ask(
            ctx,
            tool="deploy",
            arguments={"target": target},
            message=f"Deploy to {target}?",
            schema=APPROVAL,
        )
        if isinstance(answer, InputRequiredResult):
            return answer
        if (answer.content or {}).get("approved") is not True:
            # The tool ran and reports its own error: not a protocol error.
            return CallToolResult(
                content=[TextContent(type="text", text="not approved")], is_error=True
            )
        return CallToolResult(content=[TextContent(type="text", text=f"deployed {target}")])


@pytest.fixture(name="http")
async def http_fixture(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(
        Settings(database_path=str(tmp_path / "app.db")), plugins=[McpPlugin(_register_deploy)]
    )
    async with (
        LifespanManager(asgi(app)),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=asgi(app)), base_url="http://127.0.0.1:8000"
        ) as http,
    ):
        yield http


async def _rpc(http: httpx.AsyncClient, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """A 2026-07-28 request from a client that declares forms and the tasks extension."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {
            "elicitation": {"form": {}},
            "extensions": {TASKS: {}},
        },
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": method,
    }
    if method == "tools/call":
        headers["mcp-name"] = params["name"]
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {**params, "_meta": meta}}
    response = await http.post("/mcp", json=body, headers=headers)
    assert response.status_code == 200, response.text
    reply: dict[str, Any] = response.json()
    return reply


async def _asking_task(http: httpx.AsyncClient, target: str) -> tuple[str, str]:
    """A deploy task waiting for its answer: its id and its question's key."""
    created = await _rpc(http, "tools/call", {"name": "deploy", "arguments": {"target": target}})
    task_id = created["result"]["taskId"]
    polled = await _rpc(http, "tasks/get", {"taskId": task_id})
    [key] = polled["result"]["inputRequests"]
    return task_id, key


async def _answer(http: httpx.AsyncClient, task_id: str, key: str, approved: bool) -> None:
    answer = {"action": "accept", "content": {"approved": approved}}
    acked = await _rpc(http, "tasks/update", {"taskId": task_id, "inputResponses": {key: answer}})
    assert acked == {"jsonrpc": "2.0", "id": 7, "result": {"resultType": "complete"}}


async def test_a_tool_that_reports_an_error_after_its_answer_is_a_completed_task_with_is_error(
    http: httpx.AsyncClient,
) -> None:
    task_id, key = await _asking_task(http, "production")

    await _answer(http, task_id, key, approved=False)
    task = (await _rpc(http, "tasks/get", {"taskId": task_id}))["result"]

    assert task["status"] == "completed"
    assert task["result"]["isError"] is True
    assert task["result"]["content"] == [{"type": "text", "text": "not approved"}]
    assert "error" not in task


async def test_cancelling_a_task_that_ended_is_the_same_empty_ack_and_changes_nothing(
    http: httpx.AsyncClient,
) -> None:
    task_id, key = await _asking_task(http, "staging")
    await _answer(http, task_id, key, approved=True)

    first = await _rpc(http, "tasks/cancel", {"taskId": task_id})
    again = await _rpc(http, "tasks/cancel", {"taskId": task_id})
    task = (await _rpc(http, "tasks/get", {"taskId": task_id}))["result"]
    unknown = await _rpc(http, "tasks/cancel", {"taskId": "no-such-task"})

    assert first["result"] == {"resultType": "complete"}
    assert again["result"] == {"resultType": "complete"}
    assert task["status"] == "completed"
    assert task["result"]["content"] == [{"type": "text", "text": "deployed staging"}]
    assert unknown["error"]["code"] == -32602  # only an unknown task is refused


async def test_cancelling_an_asking_task_acks_and_the_task_is_cancelled(
    http: httpx.AsyncClient,
) -> None:
    task_id, _ = await _asking_task(http, "test")

    acked = await _rpc(http, "tasks/cancel", {"taskId": task_id})
    task = (await _rpc(http, "tasks/get", {"taskId": task_id}))["result"]

    assert acked["result"] == {"resultType": "complete"}
    assert task["status"] == "cancelled"


async def test_update_keys_that_name_no_outstanding_question_are_ignored(
    http: httpx.AsyncClient,
) -> None:
    task_id, key = await _asking_task(http, "edge")

    unknown = await _rpc(
        http,
        "tasks/update",
        {"taskId": task_id, "inputResponses": {"unknown-key": {"ignored": True}}},
    )
    still = (await _rpc(http, "tasks/get", {"taskId": task_id}))["result"]
    await _answer(http, task_id, key, approved=True)
    answered_again = await _rpc(
        http,
        "tasks/update",
        {
            "taskId": task_id,
            "inputResponses": {key: {"action": "accept", "content": {"approved": False}}},
        },
    )
    done = (await _rpc(http, "tasks/get", {"taskId": task_id}))["result"]
    not_an_object = await _rpc(http, "tasks/update", {"taskId": task_id, "inputResponses": [1]})

    assert unknown["result"] == {"resultType": "complete"}
    assert still["status"] == "input_required"
    assert list(still["inputRequests"]) == [key]
    assert answered_again["result"] == {"resultType": "complete"}
    # The first answer stands: the tool acted once, approved.
    assert done["status"] == "completed"
    assert done["result"]["content"] == [{"type": "text", "text": "deployed edge"}]
    assert not_an_object["error"]["code"] == -32602
