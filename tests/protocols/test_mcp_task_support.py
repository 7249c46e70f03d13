"""``execution.taskSupport`` (MCP 2025-11-25 tool-level negotiation) in process.

A host tool allowed only as a task (``McpPauses.allow_tasks(tool, "required")``): listed with
``taskSupport: "required"`` to a legacy client, refused as a plain call with ``-32601``, served
as a task. The demo's ``"optional"`` tool and a forbidden one are covered against a server
process by ``tests/protocols/test_mcp_tasks.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, InputRequiredResult

from pausemesh.mcp.pauses import McpPauses
from pausemesh.settings import Settings
from pausemesh.web.app import create_app
from pausemesh.web.mcp_mount import McpPlugin
from pausemesh.web.plugin import PauseMeshPlugin
from tests.support.asgi import asgi

APPROVAL = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}},
    "required": ["approved"],
}


def _register_sign(server: MCPServer, pauses: McpPauses, _: PauseMeshPlugin) -> None:
    pauses.allow_tasks("sign_contract", "required")

    @server.tool(name="sign_contract")
    async def sign_contract(
        contract: str, ctx: Context[Any, Any]
    ) -> CallToolResult | InputRequiredResult:
        answer = await pauses.ask(
            ctx,
            tool="sign_contract",
            arguments={"contract": contract},
            message=f"Sign {contract}?",
            schema=APPROVAL,
        )
        if isinstance(answer, InputRequiredResult):
            return answer
        return CallToolResult(content=[], structured_content={"signed": answer.action})


@pytest.fixture(name="plugin")
def plugin_fixture() -> McpPlugin:
    return McpPlugin(_register_sign)


@pytest.fixture(name="http")
async def http_fixture(tmp_path: Path, plugin: McpPlugin) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(Settings(database_path=str(tmp_path / "app.db")), plugins=[plugin])
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2025-11-25",
    }
    async with (
        LifespanManager(asgi(app)),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=asgi(app)),
            base_url="http://127.0.0.1:8000",
            headers=headers,
        ) as http,
    ):
        yield http


async def _rpc(http: httpx.AsyncClient, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    response = await http.post("/mcp", json=body)
    assert response.status_code == 200
    reply: dict[str, Any] = response.json()
    return reply


async def test_a_required_tool_is_listed_as_required_to_a_legacy_client(
    plugin: McpPlugin,
    http: httpx.AsyncClient,
) -> None:
    async with Client(plugin.server, mode="legacy") as legacy:
        [tool] = (await legacy.session.list_tools()).tools

    assert tool.execution is not None
    assert tool.execution.task_support == "required"


async def test_a_required_tool_called_without_a_task_is_method_not_found(
    http: httpx.AsyncClient,
) -> None:
    reply = await _rpc(http, {"name": "sign_contract", "arguments": {"contract": "C-1"}})

    assert reply["error"] == {
        "code": -32601,
        "message": "This tool requires task-augmented invocation",
    }


async def test_a_required_tool_called_as_a_task_is_an_input_required_task(
    http: httpx.AsyncClient,
) -> None:
    reply = await _rpc(
        http, {"name": "sign_contract", "arguments": {"contract": "C-2"}, "task": {}}
    )

    assert reply["result"]["task"]["status"] == "input_required"
    assert reply["result"]["task"]["statusMessage"] == "Sign C-2?"
