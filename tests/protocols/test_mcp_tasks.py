"""MCP Tasks (2025-11-25): a tool call that pauses is a durable task, driven by the official client.

The official ``mcp`` 1.30 client (``session.experimental``: ``call_tool_as_task``,
``get_task``, ``get_task_result``, ``list_tasks``, ``cancel_task``; see
``tests/support/mcp_tasks_client.py``) against a real ``pausemesh demo`` process on SQLite,
with the header principal resolver. The question arrives on the ``tasks/result`` stream, the
client answers it, the tool books once. Raw JSON-RPC covers the refusals.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.protocols.test_mcp_router import TOOL, bookings
from tests.support.mcp_tasks_client import TasksClient, tasks_client_python
from tests.support.server import ServerProcess, read_response

pytestmark = pytest.mark.slow

RELATED = "io.modelcontextprotocol/related-task"
TTL_CAP = "params.task.ttl must be 0 to 7776000000 milliseconds (PAUSEMESH_MAX_PAUSE_TTL_SECONDS)"


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
        # A ttl past PAUSEMESH_MAX_PAUSE_TTL_SECONDS (90 days: 7,776,000,000 ms), or negative.
        ("tools/call", {"name": TOOL, "arguments": {}, "task": {"ttl": 7_776_000_001}}, TTL_CAP),
        ("tools/call", {"name": TOOL, "arguments": {}, "task": {"ttl": 2**63}}, TTL_CAP),
        ("tools/call", {"name": TOOL, "arguments": {}, "task": {"ttl": -1}}, TTL_CAP),
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


@pytest.mark.parametrize("tool", ["nope", "connect_airline_account"])
async def test_a_task_call_to_a_tool_without_task_support_is_method_not_found(
    server: ServerProcess, tool: str
) -> None:
    response = await _rpc(server, "tools/call", {"name": tool, "arguments": {}, "task": {}})

    assert response.status_code == 200
    error = response.json()["error"]
    assert error["code"] == -32601
    assert error["message"] == "This tool does not support task-augmented invocation"


async def test_tools_list_advertises_task_support_only_on_the_tool_that_asks_a_question(
    client: TasksClient,
) -> None:
    listed = await client.step("tools")

    execution = {tool["name"]: tool.get("execution") for tool in listed["tools"]}
    assert execution[TOOL] == {"taskSupport": "optional"}
    assert execution["connect_airline_account"] is None


# -- status notifications to the owner's connected sessions ----------------------------------


async def test_a_session_that_created_a_task_is_told_when_another_session_answers_it(
    client: TasksClient, data_dir: Path
) -> None:
    watcher = await client.watch(tool=TOOL, arguments={"destination": "Tromso"}, declare=True)
    try:
        task_id = watcher.ready["task"]["taskId"]
        done = await client.step("result", taskId=task_id, answer=accept("PM202"))
        notices = await watcher.notifications()
    finally:
        watcher.kill()

    assert done["result"]["structuredContent"]["booked"] is True
    [notice] = notices
    assert notice["params"]["taskId"] == task_id
    assert notice["params"]["status"] == "completed"
    assert notice["params"]["createdAt"] == watcher.ready["task"]["createdAt"]
    assert booked(data_dir, task_id) == 1


async def test_a_task_session_without_the_declared_capability_is_told_too(
    client: TasksClient,
) -> None:
    watcher = await client.watch(tool=TOOL, arguments={"destination": "Alta"})
    try:
        task_id = watcher.ready["task"]["taskId"]
        cancelled = await client.step("cancel", taskId=task_id)
        notices = await watcher.notifications()
    finally:
        watcher.kill()

    assert cancelled["task"]["status"] == "cancelled"
    assert [(n["params"]["taskId"], n["params"]["status"]) for n in notices] == [
        (task_id, "cancelled")
    ]


async def test_a_rest_cancel_of_the_pause_finishes_the_task_and_tells_the_session(
    client: TasksClient, server: ServerProcess, data_dir: Path
) -> None:
    watcher = await client.watch(tool=TOOL, arguments={"destination": "Bodo"}, declare=True)
    try:
        task_id = watcher.ready["task"]["taskId"]
        async with httpx.AsyncClient(headers={"x-principal": "alice"}, timeout=30) as http:
            response = await http.post(
                server.url(f"/v1/continuations/{task_id}/cancel"), json={"reason": "changed plans"}
            )
        notices = await watcher.notifications()
    finally:
        watcher.kill()
    result = await client.step("result", taskId=task_id)

    assert response.status_code == 200
    [notice] = notices
    # Cancelled outside MCP: the tool is told (the demo reports it) and the task completes.
    assert notice["params"]["status"] == "completed"
    assert result["result"]["structuredContent"] == {"booked": False, "action": "cancel"}
    assert booked(data_dir, task_id) == 0


async def test_only_the_owners_task_sessions_are_told(client: TasksClient) -> None:
    bob = await client.watch(principal="bob", declare=True)
    plain = await client.watch(principal="alice")  # neither declared nor used tasks
    alice = await client.watch(tool=TOOL, arguments={"destination": "Narvik"}, declare=True)
    try:
        task_id = alice.ready["task"]["taskId"]
        await client.step("result", taskId=task_id, answer=accept("PM101"))
        told = await alice.notifications()
        bobs = await bob.notifications(stop=True)
        plains = await plain.notifications(stop=True)
    finally:
        for watcher in (alice, bob, plain):
            watcher.kill()

    assert [n["params"]["status"] for n in told] == ["completed"]
    assert bobs == []
    assert plains == []


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


# -- 2026-07-28: the tasks extension (io.modelcontextprotocol/tasks), raw: mcp 2.3.0 ships none -

_TASKS_EXTENSION = "io.modelcontextprotocol/tasks"


async def _modern_rpc(
    server: ServerProcess, method: str, params: dict[str, Any], *, extension: bool = True
) -> httpx.Response:
    """A 2026-07-28 request from a client that declares forms (and the tasks extension)."""
    capabilities: dict[str, Any] = {"elicitation": {"form": {}}}
    if extension:
        capabilities["extensions"] = {_TASKS_EXTENSION: {}}
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }
    headers = {
        "x-principal": "alice",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": method,
    }
    named = params.get("name", params.get("uri"))
    if isinstance(named, str):
        headers["mcp-name"] = named
    body = {"jsonrpc": "2.0", "id": 3, "method": method, "params": {**params, "_meta": meta}}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        return await http.post(server.url("/mcp"), json=body)


def _replica(data_dir: Path) -> ServerProcess:
    """Another process on the module server's database (and so its server key)."""
    return ServerProcess(
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


async def test_a_2026_client_is_offered_the_tasks_extension_and_never_tasks_list(
    server: ServerProcess,
) -> None:
    # mcp 2.3.0's client does not discover at connect: server/discover is asked directly.
    discovered = await _modern_rpc(server, "server/discover", {})
    extensions = discovered.json()["result"]["capabilities"]["extensions"]
    listed = await _modern_rpc(server, "tasks/list", {})
    unknown = await _modern_rpc(server, "tasks/get", {"taskId": "no-such-task"})
    undeclared = await _modern_rpc(server, "tasks/get", {"taskId": "x"}, extension=False)

    assert extensions[_TASKS_EXTENSION] == {}
    assert listed.json()["error"]["code"] == -32601  # the extension has no tasks/list
    assert unknown.json()["error"]["code"] == -32602
    # Negotiated per request: a client that did not declare it is missing a capability.
    assert undeclared.json()["error"]["code"] == -32021
    assert undeclared.json()["error"]["data"]["requiredCapabilities"] == {
        "extensions": {_TASKS_EXTENSION: {}}
    }


async def test_a_2026_call_without_the_extension_stays_a_plain_round_trip(
    server: ServerProcess,
) -> None:
    called = await _modern_rpc(
        server,
        "tools/call",
        {"name": TOOL, "arguments": {"destination": "Kiruna"}},
        extension=False,
    )

    result = called.json()["result"]
    assert result["resultType"] == "input_required"
    assert result["requestState"]


async def test_a_2026_task_answered_by_tasks_update_on_another_replica_after_a_restart_books_once(
    server: ServerProcess, data_dir: Path
) -> None:
    created = await _modern_rpc(
        server, "tools/call", {"name": TOOL, "arguments": {"destination": "Lulea"}}
    )
    task = created.json()["result"]
    assert task["resultType"] == "task"
    assert task["status"] == "input_required"
    assert task["ttlMs"] > 0
    task_id = task["taskId"]

    server.restart()
    with _replica(data_dir) as replica:
        polled = (await _modern_rpc(replica, "tasks/get", {"taskId": task_id})).json()["result"]
        [key] = polled["inputRequests"]
        refused = await _modern_rpc(
            replica,
            "tasks/update",
            {"taskId": task_id, "inputResponses": {key: accept("PM999")}},
        )
        updated = await _modern_rpc(
            replica,
            "tasks/update",
            {"taskId": task_id, "inputResponses": {key: accept("PM101")}},
        )
        again = await _modern_rpc(
            replica,
            "tasks/update",
            {"taskId": task_id, "inputResponses": {key: accept("PM202")}},
        )
    done = (await _modern_rpc(server, "tasks/get", {"taskId": task_id})).json()["result"]

    assert polled["status"] == "input_required"
    assert polled["inputRequests"][key]["method"] == "elicitation/create"
    assert refused.json()["error"]["code"] == -32602  # checked against the question's schema
    assert updated.json()["result"]["resultType"] == "complete"
    # The key was answered already: ignored (SEP-2663), the first answer stands.
    assert again.json()["result"] == {"resultType": "complete"}
    assert done["status"] == "completed"
    assert done["resultType"] == "complete"
    assert done["result"]["structuredContent"]["flight"] == "PM101"
    assert booked(data_dir, task_id) == 1


# -- any client: trimmed headers, unknown names, primed streams --------------------------------


def _modern_body(method: str, params: dict[str, Any]) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    }
    return {"jsonrpc": "2.0", "id": 9, "method": method, "params": {**params, "_meta": meta}}


def test_an_mcp_name_header_with_surrounding_whitespace_is_accepted(server: ServerProcess) -> None:
    # httpx refuses to send such a value, so the request is written by hand.
    body = json.dumps(
        _modern_body("tools/call", {"name": TOOL, "arguments": {"destination": "Bergen"}})
    ).encode()
    head = (
        "POST /mcp HTTP/1.1\r\n"
        f"Host: {server.host}:{server.port}\r\n"
        "X-Principal: alice\r\n"
        "Content-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\n"
        "MCP-Protocol-Version:  2026-07-28 \r\n"
        "Mcp-Method: tools/call \r\n"
        f"Mcp-Name:   {TOOL}  \r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    with socket.create_connection((server.host, server.port), timeout=30) as sock:
        sock.sendall(head + body)
        status, _, reply = read_response(sock)

    assert status == 200, reply
    assert json.loads(reply)["result"]["resultType"] == "input_required"


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("prompts/get", {"name": "no_such_prompt"}),
        ("tools/call", {"name": "no_such_tool", "arguments": {}}),
        ("resources/read", {"uri": "file:///no/such/resource"}),
    ],
    ids=["prompt", "tool", "resource"],
)
async def test_an_unknown_name_is_invalid_params_and_logs_no_error(
    server: ServerProcess, method: str, params: dict[str, Any]
) -> None:
    start = len(server.output())
    response = await _modern_rpc(server, method, params)
    request_id = response.headers["x-request-id"]
    logged = server.wait_for_output(f"requestId={request_id} method=POST")[start:]

    assert response.json()["error"]["code"] == -32602
    assert " ERROR " not in logged
    assert "Traceback" not in logged


def _first_event(lines: list[str]) -> dict[str, str]:
    """The fields of the first SSE event in ``lines``."""
    fields: dict[str, str] = {}
    for line in lines:
        if not line:
            break
        name, _, value = line.partition(":")
        fields[name] = value.removeprefix(" ")
    return fields


async def test_every_mcp_stream_starts_with_a_priming_event_and_a_retry(
    server: ServerProcess,
) -> None:
    headers = _raw_headers()
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "generic", "version": "1"},
        },
    }
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        opened = await http.post(server.url("/mcp"), json=initialize)
        session = {"mcp-session-id": opened.headers["mcp-session-id"]}
        await http.post(
            server.url("/mcp"),
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers=session,
        )
        listed = await http.post(
            server.url("/mcp"),
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            headers=session,
        )
        async with http.stream(
            "GET", server.url("/mcp"), headers={**session, "accept": "text/event-stream"}
        ) as get_stream:
            get_lines: list[str] = []
            async for line in get_stream.aiter_lines():
                get_lines.append(line)
                if not line:
                    break
        resumed = await http.get(
            server.url("/mcp"),
            headers={
                **session,
                "accept": "text/event-stream",
                "last-event-id": _first_event(listed.text.splitlines())["id"],
            },
        )

    for response, lines in ((opened, None), (listed, None), (get_stream, get_lines)):
        assert response.headers["content-type"].startswith("text/event-stream")
        event = _first_event(lines if lines is not None else response.text.splitlines())
        assert event["id"]
        assert int(event["retry"]) > 0
        assert event["data"] == ""
    assert json.loads(listed.text.split("data: ")[-1])["result"]["tools"]
    # A request's stream is not replayed: its reconnection is refused at once.
    assert resumed.status_code == 409
    assert resumed.json()["code"] == "STREAM_NOT_RESUMABLE"
