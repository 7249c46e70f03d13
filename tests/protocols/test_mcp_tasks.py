"""MCP Tasks (2025-11-25): a tool call that pauses is a durable task, driven by the official client.

The official ``mcp`` 1.30 client (``session.experimental``: ``call_tool_as_task``,
``get_task``, ``get_task_result``, ``list_tasks``, ``cancel_task``; see
``tests/support/mcp_tasks_client.py``) against a real ``pausemesh demo`` process on SQLite,
with the header principal resolver. The question arrives on the ``tasks/result`` stream, the
client answers it, the tool books once. Raw JSON-RPC covers the refusals.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.protocols.test_mcp_router import TOOL, bookings
from tests.support.mcp_tasks_client import TasksClient, tasks_client_python
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

RELATED = "io.modelcontextprotocol/related-task"


@pytest.fixture(name="data_dir", scope="module")
def data_dir_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-tasks")


@pytest.fixture(name="server", scope="module")
def server_fixture(data_dir: Path) -> Iterator[ServerProcess]:
    server = ServerProcess(
        [
            "demo",
            "--no-browser",
            "--database-path",
            str(data_dir / "pausemesh.db"),
            "--principal-resolver",
            "tests.support.agui:header_principal",
        ],
        env={"PAUSEMESH_DATA_DIR": str(data_dir)},
    )
    with server:
        yield server


@pytest.fixture(name="client", scope="module")
def client_fixture(server: ServerProcess) -> TasksClient:
    return TasksClient(tasks_client_python(), server.url("/mcp"))


def accept(flight: str) -> dict[str, Any]:
    return {"action": "accept", "content": {"flight": flight}}


def continuation_status(server: ServerProcess, cid: str, principal: str = "alice") -> str:
    response = httpx.get(
        server.url(f"/v1/continuations/{cid}"), headers={"x-principal": principal}, timeout=10
    )
    response.raise_for_status()
    status: str = response.json()["continuation"]["status"]
    return status


def booked(data_dir: Path, cid: str) -> int:
    return [key for key, _ in bookings(data_dir)].count(cid)


async def ask(client: TasksClient, destination: str, principal: str = "alice") -> str:
    created = await client.step(
        "call", tool=TOOL, arguments={"destination": destination}, principal=principal
    )
    task = created["task"]
    assert task["status"] == "input_required"
    task_id: str = task["taskId"]
    return task_id


async def test_a_paused_call_is_an_input_required_task_whose_result_is_one_booking(
    client: TasksClient, server: ServerProcess, data_dir: Path
) -> None:
    created = await client.step("call", tool=TOOL, arguments={"destination": "Oslo"})
    task_id = created["task"]["taskId"]
    polled = await client.step("get", taskId=task_id)

    done = await client.step("result", taskId=task_id, answer=accept("PM202"))
    after = await client.step("get", taskId=task_id)
    again = await client.step("result", taskId=task_id)

    assert created["capabilities"]["tasks"]["requests"] == {"tools": {"call": {}}}
    assert created["task"]["status"] == "input_required"
    assert created["task"]["statusMessage"] == "Which flight to Oslo should I book?"
    assert polled["task"]["status"] == "input_required"
    [question] = done["asked"]
    assert question["_meta"][RELATED] == {"taskId": task_id}
    assert question["requestedSchema"]["properties"]["flight"]["enum"]
    assert done["result"]["structuredContent"]["booked"] is True
    assert done["result"]["structuredContent"]["flight"] == "PM202"
    assert done["result"]["_meta"][RELATED] == {"taskId": task_id}
    assert [n["params"]["status"] for n in done["notifications"]] == ["completed"]
    assert after["task"]["status"] == "completed"
    assert again["result"]["structuredContent"] == done["result"]["structuredContent"]
    assert again["asked"] == []
    assert continuation_status(server, task_id) == "resumed"
    assert booked(data_dir, task_id) == 1


async def test_tasks_list_and_get_show_only_the_callers_own_tasks(client: TasksClient) -> None:
    alices = await ask(client, "Riga", "alice")
    bobs = await ask(client, "Riga", "bob")

    listed = await client.step("list", principal="alice")
    foreign = await client.step("get", taskId=bobs, principal="alice")
    foreign_cancel = await client.step("cancel", taskId=bobs, principal="alice")

    ids = [task["taskId"] for task in listed["tasks"]]
    assert alices in ids
    assert bobs not in ids
    assert foreign["error"]["code"] == -32602
    assert foreign_cancel["error"]["code"] == -32602
    assert (await client.step("get", taskId=bobs, principal="bob"))["task"]["status"] == (
        "input_required"
    )


async def test_a_cancelled_task_stays_cancelled_and_books_nothing(
    client: TasksClient, server: ServerProcess, data_dir: Path
) -> None:
    task_id = await ask(client, "Bergen")

    cancelled = await client.step("cancel", taskId=task_id)
    twice = await client.step("cancel", taskId=task_id)
    result = await client.step("result", taskId=task_id)
    polled = await client.step("get", taskId=task_id)

    assert cancelled["task"]["status"] == "cancelled"
    assert twice["error"]["code"] == -32602
    assert "terminal" in twice["error"]["message"]
    assert result["error"]["message"] == "Task was cancelled"
    assert polled["task"]["status"] == "cancelled"
    assert continuation_status(server, task_id) == "cancelled"
    assert booked(data_dir, task_id) == 0


async def test_a_declined_question_completes_the_task_without_a_booking(
    client: TasksClient, data_dir: Path
) -> None:
    task_id = await ask(client, "Turku")

    done = await client.step("result", taskId=task_id, answer={"action": "decline"})

    assert done["result"]["structuredContent"] == {"booked": False, "action": "decline"}
    assert (await client.step("get", taskId=task_id))["task"]["status"] == "completed"
    assert booked(data_dir, task_id) == 0


async def test_a_task_survives_a_server_kill_and_books_once_after_the_restart(
    client: TasksClient, server: ServerProcess, data_dir: Path
) -> None:
    task_id = await ask(client, "Gdansk")

    server.kill()
    server.start()
    polled = await client.step("get", taskId=task_id)
    listed = await client.step("list")
    done = await client.step("result", taskId=task_id, answer=accept("PM101"))

    assert polled["task"]["status"] == "input_required"
    assert task_id in [task["taskId"] for task in listed["tasks"]]
    assert done["result"]["structuredContent"]["flight"] == "PM101"
    assert booked(data_dir, task_id) == 1


async def test_twenty_concurrent_answers_to_one_task_book_once_and_all_see_one_result(
    client: TasksClient, server: ServerProcess, data_dir: Path
) -> None:
    task_id = await ask(client, "Malmo")
    flights = ["PM101", "PM202", "PM303"]
    async with httpx.AsyncClient(headers=_raw_headers(), timeout=60) as http:
        answers = [
            http.post(server.url("/mcp"), json=_answer(task_id, accept(flights[i % 3])))
            for i in range(20)
        ]
        posted = await asyncio.gather(*answers)
    results = await asyncio.gather(*(client.step("result", taskId=task_id) for _ in range(3)))

    assert {response.status_code for response in posted} == {202}
    contents = [result["result"]["structuredContent"] for result in results]
    assert contents[0]["booked"] is True
    assert contents == [contents[0]] * 3
    assert booked(data_dir, task_id) == 1


# -- raw JSON-RPC: bad input is the protocol's error, never a 500 -----------------------------


def _raw_headers(principal: str = "alice") -> dict[str, str]:
    return {
        "x-principal": principal,
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2025-11-25",
    }


def _answer(task_id: str, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": f"pausemesh-task:{task_id}", "result": result}


async def _rpc(server: ServerProcess, method: str, params: Any) -> httpx.Response:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 7, "method": method}
    if params is not None:
        body["params"] = params
    async with httpx.AsyncClient(headers=_raw_headers(), timeout=30) as http:
        return await http.post(server.url("/mcp"), json=body)


@pytest.mark.parametrize(
    ("method", "params", "message"),
    [
        ("tasks/get", {"taskId": "no-such-task"}, "Task not found"),
        ("tasks/get", {}, "Task not found"),
        ("tasks/get", {"taskId": 12}, "Task not found"),
        ("tasks/result", {"taskId": "no-such-task"}, "Task not found"),
        ("tasks/cancel", {"taskId": "no-such-task"}, "Task not found"),
        ("tasks/list", {"cursor": "not-a-cursor"}, "Invalid cursor"),
        ("tools/call", {"name": TOOL, "arguments": {}, "task": "soon"}, "params.task"),
        ("tools/call", {"name": TOOL, "arguments": [], "task": {}}, "params.arguments"),
        ("tools/call", {"arguments": {}, "task": {"ttl": 1000}}, "params.name"),
    ],
)
async def test_bad_task_requests_get_invalid_params(
    server: ServerProcess, method: str, params: Any, message: str
) -> None:
    response = await _rpc(server, method, params)

    assert response.status_code == 200
    error = response.json()["error"]
    assert error["code"] == -32602
    assert message in error["message"]


async def test_a_task_call_to_an_unknown_tool_is_a_failed_task_carrying_the_tools_error(
    server: ServerProcess,
) -> None:
    response = await _rpc(server, "tools/call", {"name": "nope", "arguments": {}, "task": {}})
    task = response.json()["result"]["task"]
    result = await _rpc(server, "tasks/result", {"taskId": task["taskId"]})

    assert task["status"] == "failed"
    assert result.json()["result"]["isError"] is True
    assert "nope" in result.json()["result"]["content"][0]["text"]


async def test_a_task_request_without_an_id_is_an_invalid_request(server: ServerProcess) -> None:
    async with httpx.AsyncClient(headers=_raw_headers(), timeout=30) as http:
        response = await http.post(
            server.url("/mcp"), json={"jsonrpc": "2.0", "method": "tasks/list"}
        )

    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32600


async def test_an_answer_that_does_not_fit_leaves_the_task_asking(
    client: TasksClient, data_dir: Path
) -> None:
    task_id = await ask(client, "Aarhus")
    async with httpx.AsyncClient(headers=_raw_headers(), timeout=30) as http:
        posted = await http.post(client.url, json=_answer(task_id, accept("NOT-A-FLIGHT")))

    assert posted.status_code == 202
    polled = await client.step("get", taskId=task_id)
    assert polled["task"]["status"] == "input_required", polled
    assert booked(data_dir, task_id) == 0


async def test_a_refused_answer_is_asked_again_on_the_stream_and_the_next_one_books(
    client: TasksClient, data_dir: Path
) -> None:
    task_id = await ask(client, "Kiel")

    done = await client.step(
        "result", taskId=task_id, answers=[accept("NOT-A-FLIGHT"), accept("PM303")]
    )

    assert len(done["asked"]) == 2
    assert done["asked"][0] == done["asked"][1]
    assert done["result"]["structuredContent"]["flight"] == "PM303"
    assert booked(data_dir, task_id) == 1
