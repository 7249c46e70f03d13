"""MCP and A2A pauses belong to the principal that started them (host resolver: ``X-Principal``).

A sealed MCP ``requestState`` replayed by another principal is the invalid-state error; an A2A
task is invisible to another principal; a request without a principal is a 401.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import httpx2
import pytest
from a2a.client import Client as A2AClient
from a2a.client import ClientConfig, create_client
from a2a.types import GetTaskRequest, TaskState
from a2a.utils.errors import A2AError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, ElicitResult, InputRequiredResult

from tests.support.protocol_clients import send_for_task, tool_round, user_message
from tests.support.rest import assert_problem
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow


@pytest.fixture(name="server", scope="module")
def server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data: Path = tmp_path_factory.mktemp("principals")
    server = ServerProcess(
        [
            "demo",
            "--no-browser",
            "--database-path",
            str(data / "pausemesh.db"),
            "--principal-resolver",
            "tests.support.agui:header_principal",
        ],
        env={"PAUSEMESH_DATA_DIR": str(data)},
    )
    with server:
        yield server


async def mcp_call(
    server: ServerProcess,
    principal: str,
    state: str | None = None,
    responses: dict[str, ElicitResult] | None = None,
) -> CallToolResult | InputRequiredResult:
    http = httpx2.AsyncClient(headers={"x-principal": principal}, timeout=30)
    transport = streamable_http_client(server.url("/mcp"), http_client=http)
    try:
        return await tool_round(
            transport, "book_flight", {"destination": "Paris"}, state=state, responses=responses
        )
    finally:
        await http.aclose()


async def test_an_mcp_request_state_only_works_for_its_principal(server: ServerProcess) -> None:
    first = await mcp_call(server, "alice")
    assert isinstance(first, InputRequiredResult)
    answer = {"flight": ElicitResult(action="accept", content={"flight": "PM101"})}

    with pytest.raises(MCPError) as refused:
        await mcp_call(server, "bob", first.request_state, answer)
    assert refused.value.error.message == "Invalid or expired requestState"

    done = await mcp_call(server, "alice", first.request_state, answer)
    assert isinstance(done, CallToolResult)
    assert done.structured_content is not None
    assert done.structured_content["booked"] is True


@asynccontextmanager
async def a2a_as(server: ServerProcess, principal: str) -> AsyncIterator[A2AClient]:
    async with httpx.AsyncClient(headers={"x-principal": principal}, timeout=30) as http:
        config = ClientConfig(httpx_client=http, streaming=False)
        client = await create_client(server.url("/a2a"), client_config=config)
        try:
            yield client
        finally:
            await client.close()


async def test_an_a2a_task_is_invisible_to_another_principal(server: ServerProcess) -> None:
    async with a2a_as(server, "alice") as alice:
        task = await send_for_task(alice, user_message(text="Paris"))
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED

    async with a2a_as(server, "bob") as bob:
        with pytest.raises(A2AError):
            await bob.get_task(GetTaskRequest(id=task.id))
        with pytest.raises(A2AError):
            await send_for_task(bob, user_message({"flight": "PM101"}, task_id=task.id))

    async with a2a_as(server, "alice") as alice:
        done = await send_for_task(alice, user_message({"flight": "PM101"}, task_id=task.id))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED


@pytest.mark.parametrize("path", ["/mcp", "/a2a/jsonrpc"])
async def test_a_request_without_a_principal_is_unauthenticated(
    server: ServerProcess, path: str
) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(server.url(path), json={"jsonrpc": "2.0", "id": 1})
    assert_problem(response, 401, "UNAUTHENTICATED")
