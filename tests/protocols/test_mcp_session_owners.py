"""An MCP session belongs to the principal that opened it, on a real ``pausemesh demo`` process
with JWT bearer identity (a JWKS file the test owns).

Alice opens a 2025-11-25 session and its standalone GET stream; Mallory, holding Alice's
``Mcp-Session-Id``, gets exactly the answer an unknown session id gets (404 "Session not
found", same body) for ``GET /mcp``, ``DELETE /mcp``, a POST the SDK answers and a task message
the mount answers itself. Alice's session and its stream live on: a task she cancels afterwards
is announced on that stream, and her own ``DELETE`` still ends the session.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.identity import SigningKey, jwt_env, write_jwks
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

IDP_KEY = SigningKey.rsa("idp-sessions")
VERSION = "2025-11-25"
TOOL = "book_flight"


@pytest.fixture(name="server", scope="module")
def server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data: Path = tmp_path_factory.mktemp("mcp-session-owners")
    write_jwks(data / "jwks.json", IDP_KEY)
    env = jwt_env((data / "jwks.json").as_uri(), PAUSEMESH_DATA_DIR=str(data))
    args = ["demo", "--no-browser", "--database-path", str(data / "pausemesh.db")]
    with ServerProcess(args, env=env) as server:
        yield server


def headers_of(principal: str, session_id: str | None = None) -> dict[str, str]:
    headers = {
        "authorization": f"Bearer {IDP_KEY.token(principal)}",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": VERSION,
    }
    if session_id is not None:
        headers["mcp-session-id"] = session_id
    return headers


def rpc(method: str, params: dict[str, Any] | None = None, request_id: int = 1) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def open_session(http: httpx.Client, principal: str) -> str:
    """A 2025-11-25 session that declares the tasks capability (so it is told task changes)."""
    params = {
        "protocolVersion": VERSION,
        "capabilities": {"tasks": {"list": {}, "cancel": {}}},
        "clientInfo": {"name": "session-owner-test", "version": "1"},
    }
    started = http.post("/mcp", headers=headers_of(principal), json=rpc("initialize", params))
    assert started.status_code == 200, started.text
    session_id = started.headers["mcp-session-id"]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    done = http.post("/mcp", headers=headers_of(principal, session_id), json=initialized)
    assert done.status_code == 202, done.text
    return session_id


def attempts(http: httpx.Client, principal: str, session_id: str) -> dict[str, httpx.Response]:
    """Every way to use a session, as ``principal`` naming ``session_id``."""
    headers = headers_of(principal, session_id)
    answers: dict[str, httpx.Response] = {}
    with http.stream("GET", "/mcp", headers={**headers, "accept": "text/event-stream"}) as got:
        got.read()  # a 404 is short; a stream taken would hang here until the test times out
        answers["GET"] = got
    answers["POST tools/list"] = http.post("/mcp", headers=headers, json=rpc("tools/list"))
    answers["POST tasks/list"] = http.post("/mcp", headers=headers, json=rpc("tasks/list"))
    answers["DELETE"] = http.delete("/mcp", headers=headers)
    return answers


def as_seen(response: httpx.Response) -> tuple[int, str | None, bytes]:
    return response.status_code, response.headers.get("content-type"), response.content


def status_notices(lines: Iterator[str], task_id: str) -> dict[str, Any]:
    """The first ``notifications/tasks/status`` of ``task_id`` on a session's GET stream."""
    for line in lines:
        if not line.startswith("data:") or not line[len("data:") :].strip():
            continue  # the stream's priming event has an empty data field (SEP-1699)
        message = json.loads(line[len("data:") :])
        if message.get("method") == "notifications/tasks/status":
            params: dict[str, Any] = message["params"]
            if params["taskId"] == task_id:
                return params
    raise AssertionError("the stream ended without the task's status")


def test_another_principals_session_id_is_answered_as_an_unknown_one_and_the_owner_keeps_it(
    server: ServerProcess,
) -> None:
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        session_id = open_session(http, "alice")
        unknown = attempts(http, "mallory", uuid.uuid4().hex)
        # Before Alice opens her stream: Mallory cannot take the session's one GET stream.
        intruded = attempts(http, "mallory", session_id)
        stream_headers = {**headers_of("alice", session_id), "accept": "text/event-stream"}
        with http.stream("GET", "/mcp", headers=stream_headers) as stream:
            assert stream.status_code == 200
            # With Alice's stream open: still nothing for Mallory, and no 409 that says it exists.
            again = attempts(http, "mallory", session_id)

            alice = headers_of("alice", session_id)
            assert http.post("/mcp", headers=alice, json=rpc("tools/list")).status_code == 200
            call = {"name": TOOL, "arguments": {"destination": "Oslo"}, "task": {"ttl": 60_000}}
            created = http.post("/mcp", headers=alice, json=rpc("tools/call", call)).json()
            task_id = created["result"]["task"]["taskId"]
            cancel = rpc("tasks/cancel", {"taskId": task_id}, request_id=2)
            cancelled = http.post("/mcp", headers=alice, json=cancel).json()
            told = status_notices(stream.iter_lines(), task_id)

        ended = http.delete("/mcp", headers=alice)
        after = http.post("/mcp", headers=alice, json=rpc("tools/list"))

    for name, response in unknown.items():
        assert response.status_code == 404, (name, response.text)
        assert response.json()["error"]["message"] == "Session not found"
        assert as_seen(intruded[name]) == as_seen(response), name
        assert as_seen(again[name]) == as_seen(response), name
    assert created["result"]["task"]["status"] == "input_required"
    assert cancelled["result"]["status"] == "cancelled"
    assert told["status"] == "cancelled"
    assert ended.status_code == 200
    assert after.status_code == 404
