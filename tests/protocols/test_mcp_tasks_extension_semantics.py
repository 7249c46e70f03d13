"""The tasks extension of the current revision (SEP-2663) in process: what its statuses and
acks mean, beside the 2025-11-25 form.

A tool that ran and reported an error is a ``completed`` task whose ``result`` says
``isError`` (``failed`` is for protocol errors); ``tasks/cancel`` is an ack only, the same for a
task that already ended; ``tasks/update`` ignores keys that name no outstanding question. Work
(``allow_tasks(tool, work=...)``) is answered at once with a ``working`` task that this process
runs to its end, stops when cancelled, and that ends ``failed`` when its time passes with no
result. ``Mcp-Name`` on ``tasks/*`` must name the task.
The cross-process story (restart, another replica, booking once) is
``tests/protocols/test_mcp_tasks.py``; the official suite's checks are
``tests/protocols/test_mcp_conformance.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
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


# The work tools wait for their gate; a stopped run is noted.
GATES: dict[str, asyncio.Event] = {}
STOPPED: dict[str, asyncio.Event] = {}


def _register_work(server: MCPServer, pauses: McpPauses, _: PauseMeshPlugin) -> None:
    pauses.allow_tasks("crunch", work=timedelta(minutes=1))
    pauses.allow_tasks("stall", work=timedelta(milliseconds=1))

    @server.tool(name="crunch")
    async def crunch(label: str, fail: bool = False) -> CallToolResult:
        gate = GATES.setdefault(label, asyncio.Event())
        try:
            await gate.wait()
        except asyncio.CancelledError:
            STOPPED.setdefault(label, asyncio.Event()).set()
            raise
        return CallToolResult(content=[TextContent(type="text", text=label)], is_error=fail)

    @server.tool(name="stall")
    async def stall() -> CallToolResult:
        await asyncio.Event().wait()  # never ends: the task's time passes
        return CallToolResult(content=[])


def _register_all(server: MCPServer, pauses: McpPauses, plugin: PauseMeshPlugin) -> None:
    _register_deploy(server, pauses, plugin)
    _register_work(server, pauses, plugin)


@pytest.fixture(name="http")
async def http_fixture(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(
        Settings(database_path=str(tmp_path / "app.db")), plugins=[McpPlugin(_register_all)]
    )
    async with (
        LifespanManager(asgi(app)),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=asgi(app)), base_url="http://127.0.0.1:8000"
        ) as http,
    ):
        yield http


async def _rpc(
    http: httpx.AsyncClient,
    method: str,
    params: dict[str, Any],
    *,
    named: str | None = None,
    status: int = 200,
) -> dict[str, Any]:
    """A 2026-07-28 request from a client that declares forms and the tasks extension
    (``named``: its ``Mcp-Name``, by default the tool of a ``tools/call``)."""
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
    if named is not None or method == "tools/call":
        headers["mcp-name"] = named if named is not None else params["name"]
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {**params, "_meta": meta}}
    response = await http.post("/mcp", json=body, headers=headers)
    assert response.status_code == status, response.text
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


async def _settled(http: httpx.AsyncClient, task_id: str, status: str) -> dict[str, Any]:
    """``tasks/get`` until the task is ``status`` (a deadline, not a sleep)."""
    async with asyncio.timeout(20):
        while True:
            task: dict[str, Any] = (await _rpc(http, "tasks/get", {"taskId": task_id}))["result"]
            if task["status"] == status:
                return task
            await asyncio.sleep(0.01)


async def _until_stopped(label: str) -> None:
    async with asyncio.timeout(20):
        await STOPPED.setdefault(label, asyncio.Event()).wait()


async def test_work_is_answered_at_once_with_a_working_task_that_completes_with_its_result(
    http: httpx.AsyncClient,
) -> None:
    created = await _rpc(http, "tools/call", {"name": "crunch", "arguments": {"label": "w1"}})
    task = created["result"]
    polled = (await _rpc(http, "tasks/get", {"taskId": task["taskId"]}))["result"]
    GATES.setdefault("w1", asyncio.Event()).set()  # the work may not have started yet
    done = await _settled(http, task["taskId"], "completed")

    assert task["resultType"] == "task"
    assert task["status"] == "working"
    assert task["ttlMs"] == 60_000
    assert "result" not in task
    assert "requestState" not in task
    assert polled["status"] == "working"
    assert "inputRequests" not in polled
    assert "result" not in polled
    assert done["result"]["content"] == [{"type": "text", "text": "w1"}]


async def test_cancelled_work_stops_and_its_task_stays_cancelled(
    http: httpx.AsyncClient,
) -> None:
    created = await _rpc(http, "tools/call", {"name": "crunch", "arguments": {"label": "w2"}})
    task_id = created["result"]["taskId"]

    acked = await _rpc(http, "tasks/cancel", {"taskId": task_id})
    await _until_stopped("w2")
    task = (await _rpc(http, "tasks/get", {"taskId": task_id}))["result"]

    assert acked["result"] == {"resultType": "complete"}
    assert task["status"] == "cancelled"
    assert "result" not in task


async def test_work_that_reports_an_error_completes_with_is_error(
    http: httpx.AsyncClient,
) -> None:
    GATES.setdefault("w3", asyncio.Event()).set()
    created = await _rpc(
        http, "tools/call", {"name": "crunch", "arguments": {"label": "w3", "fail": True}}
    )
    done = await _settled(http, created["result"]["taskId"], "completed")

    assert done["result"]["isError"] is True
    assert "error" not in done


async def test_work_whose_time_passes_without_a_result_is_failed(
    http: httpx.AsyncClient,
) -> None:
    created = await _rpc(http, "tools/call", {"name": "stall", "arguments": {}})
    failed = await _settled(http, created["result"]["taskId"], "failed")

    assert failed["statusMessage"] == "the work did not finish in time"
    assert "result" not in failed


async def test_an_mcp_name_that_is_not_the_task_id_is_a_header_mismatch(
    http: httpx.AsyncClient,
) -> None:
    task_id, _ = await _asking_task(http, "canary")

    matching = await _rpc(http, "tasks/get", {"taskId": task_id}, named=f"  {task_id} ")
    other = await _rpc(http, "tasks/get", {"taskId": task_id}, named="another-task", status=400)
    wrong_tool = await _rpc(
        http,
        "tools/call",
        {"name": "deploy", "arguments": {"target": "x"}},
        named="greet",
        status=400,
    )

    assert matching["result"]["status"] == "input_required"
    assert other["error"]["code"] == -32020
    assert wrong_tool["error"]["code"] == -32020
