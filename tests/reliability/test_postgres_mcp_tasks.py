"""MCP Tasks across two replicas on PostgreSQL: a task opened on one is served by the other.

The official ``mcp`` 1.30 client (2025-11-25 Tasks) against two ``pausemesh demo`` replicas
sharing one schema: the task is created on one replica, polled, listed, answered and its result
read on the other (also with the first replica killed); twenty concurrent answers POSTed over
both replicas book once and every reader sees the same result.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.protocols.test_mcp_router import TOOL
from tests.reliability.test_postgres_protocols import Replicas, running_replicas
from tests.support.mcp_tasks_client import TasksClient, tasks_client_python
from tests.support.server import ServerProcess

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture(name="replicas", scope="module")
async def replicas_fixture() -> AsyncIterator[Replicas]:
    async with running_replicas("pm_mcp_tasks") as replicas:
        yield replicas


def clients(replicas: Replicas) -> tuple[TasksClient, TasksClient]:
    python = tasks_client_python()
    first, second = replicas.servers
    return TasksClient(python, first.url("/mcp")), TasksClient(python, second.url("/mcp"))


def accept(flight: str) -> dict[str, Any]:
    return {"action": "accept", "content": {"flight": flight}}


async def ask(client: TasksClient, destination: str) -> str:
    created = await client.step("call", tool=TOOL, arguments={"destination": destination})
    assert created["task"]["status"] == "input_required"
    task_id: str = created["task"]["taskId"]
    return task_id


async def test_a_task_opened_on_one_replica_is_answered_and_read_on_the_other(
    replicas: Replicas,
) -> None:
    one, two = clients(replicas)
    task_id = await ask(one, "Oslo")

    polled = await two.step("get", taskId=task_id)
    listed = await two.step("list")
    done = await two.step("result", taskId=task_id, answer=accept("PM303"))
    back = await one.step("get", taskId=task_id)

    assert polled["task"]["status"] == "input_required"
    assert task_id in [task["taskId"] for task in listed["tasks"]]
    assert done["result"]["structuredContent"]["flight"] == "PM303"
    assert back["task"]["status"] == "completed"
    assert await replicas.bookings(task_id) == 1


async def test_a_task_outlives_the_replica_that_opened_it(replicas: Replicas) -> None:
    one, two = clients(replicas)
    first = replicas.servers[0]
    task_id = await ask(one, "Bergen")

    first.kill()
    try:
        done = await two.step("result", taskId=task_id, answer=accept("PM101"))
    finally:
        await asyncio.to_thread(first.start)

    assert done["result"]["structuredContent"]["booked"] is True
    assert (await one.step("get", taskId=task_id))["task"]["status"] == "completed"
    assert await replicas.bookings(task_id) == 1


async def test_twenty_concurrent_answers_over_both_replicas_book_once(
    replicas: Replicas,
) -> None:
    one, two = clients(replicas)
    task_id = await ask(one, "Malmo")
    flights = ["PM101", "PM202", "PM303"]
    headers = {"accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        posted = await asyncio.gather(
            *(
                http.post(
                    replicas.servers[i % 2].url("/mcp"),
                    json={
                        "jsonrpc": "2.0",
                        "id": f"pausemesh-task:{task_id}",
                        "result": accept(flights[i % 3]),
                    },
                )
                for i in range(20)
            )
        )
    results = await asyncio.gather(
        one.step("result", taskId=task_id), two.step("result", taskId=task_id)
    )

    assert {response.status_code for response in posted} == {202}
    contents = [result["result"]["structuredContent"] for result in results]
    assert contents[0]["booked"] is True
    assert contents[1] == contents[0]
    assert await replicas.bookings(task_id) == 1


async def test_a_session_on_one_replica_is_told_when_the_other_replica_answers_its_task(
    replicas: Replicas,
) -> None:
    one, two = clients(replicas)
    watcher = await one.watch(tool=TOOL, arguments={"destination": "Visby"}, declare=True)
    try:
        task_id = watcher.ready["task"]["taskId"]
        done = await two.step("result", taskId=task_id, answer=accept("PM202"))
        notices = await watcher.notifications()
    finally:
        watcher.kill()

    assert done["result"]["structuredContent"]["booked"] is True
    assert [(n["params"]["taskId"], n["params"]["status"]) for n in notices] == [
        (task_id, "completed")
    ]
    assert await replicas.bookings(task_id) == 1


async def test_a_rest_cancel_on_the_other_replica_reaches_the_session_and_books_nothing(
    replicas: Replicas,
) -> None:
    one, _ = clients(replicas)
    watcher = await one.watch(tool=TOOL, arguments={"destination": "Kalmar"}, declare=True)
    try:
        task_id = watcher.ready["task"]["taskId"]
        async with httpx.AsyncClient(timeout=30) as http:
            response = await http.post(
                replicas.servers[1].url(f"/v1/continuations/{task_id}/cancel"),
                json={"reason": "changed plans"},
            )
        notices = await watcher.notifications()
    finally:
        watcher.kill()

    assert response.status_code == 200
    assert [n["params"]["status"] for n in notices] == ["completed"]
    assert await replicas.bookings(task_id) == 0


async def _extension_rpc(
    server: ServerProcess, method: str, params: dict[str, Any]
) -> dict[str, Any]:
    """A 2026-07-28 request of a client that declares the tasks extension (raw JSON-RPC)."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": {"io.modelcontextprotocol/tasks": {}},
            "elicitation": {"form": {}},
        },
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": method,
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        reply: dict[str, Any] = (await http.post(server.url("/mcp"), json=body)).json()
    return reply


async def test_a_2026_extension_task_is_answered_by_tasks_update_on_the_other_replica(
    replicas: Replicas,
) -> None:
    first, second = replicas.servers
    created = await _extension_rpc(
        first, "tools/call", {"name": TOOL, "arguments": {"destination": "Tromso"}}
    )
    task_id = created["result"]["taskId"]

    first.kill()
    try:
        polled = (await _extension_rpc(second, "tasks/get", {"taskId": task_id}))["result"]
        [key] = polled["inputRequests"]
        answers = {key: accept("PM303")}
        updated = await _extension_rpc(
            second, "tasks/update", {"taskId": task_id, "inputResponses": answers}
        )
    finally:
        await asyncio.to_thread(first.start)
    done = (await _extension_rpc(first, "tasks/get", {"taskId": task_id}))["result"]

    assert created["result"]["resultType"] == "task"
    assert polled["status"] == "input_required"
    assert updated["result"] == {"resultType": "complete"}
    assert done["status"] == "completed"
    assert done["result"]["structuredContent"]["flight"] == "PM303"
    assert await replicas.bookings(task_id) == 1
