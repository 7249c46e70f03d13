"""``PAUSEMESH_RATE_LIMIT`` on every route that starts work, against a real ``pausemesh demo``.

Each test spends its own principal's budget (``x-user``), so the windows never mix. A fixed
window may roll over between two requests, so each test sends until the refusal comes (within
twice the limit plus one) rather than counting on the exact request that trips it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from tests.support.agui import run_body
from tests.support.rest import assert_problem
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

_LIMIT = 3
_MCP_HEADERS = {"accept": "application/json, text/event-stream"}


@pytest.fixture(name="server", scope="module")
def server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data: Path = tmp_path_factory.mktemp("rate-limits")
    env = {
        "PAUSEMESH_RATE_LIMIT": f"{_LIMIT}/hour",
        "PAUSEMESH_PRINCIPAL_RESOLVER": "tests.support.principals:header_principal",
        "PAUSEMESH_DATA_DIR": str(data),
    }
    server = ServerProcess(
        ["demo", "--no-browser", "--database-path", str(data / "pausemesh.db")], env=env
    )
    with server:
        yield server
        assert "Traceback" not in server.output()
        assert " ERROR " not in server.output()


def _until_refused(
    send: Callable[[int], httpx.Response], spent: int = 0, limit: int = _LIMIT
) -> httpx.Response:
    """Send until a 429 comes back; the first ``limit - spent`` are never refused."""
    for attempt in range(2 * limit + 1):
        response = send(attempt)
        if response.status_code == 429:
            assert attempt + spent >= limit, response.text
            return response
    pytest.fail(f"no 429 after {2 * limit + 1} requests")


def _retry_after(response: httpx.Response) -> int:
    value = int(response.headers["retry-after"])
    assert 1 <= value <= 3600
    return value


def _client(server: ServerProcess) -> httpx.Client:
    user = f"user-{uuid.uuid4().hex[:8]}"
    return httpx.Client(base_url=server.base_url, timeout=60, headers={"x-user": user})


def test_agui_runs_past_the_limit_are_refused_before_the_stream(server: ServerProcess) -> None:
    with _client(server) as http:
        refused = _until_refused(
            lambda i: http.post("/agui", json=run_body(f"t-{uuid.uuid4()}", f"r-{i}", messages=[]))
        )
        body = assert_problem(refused, 429, "RATE_LIMITED")
        assert "retry after" in body["detail"]
        _retry_after(refused)


def test_continuation_creates_past_the_limit_are_refused_and_store_nothing(
    server: ServerProcess,
) -> None:
    with _client(server) as http:
        ids: list[str] = []

        def create(_: int) -> httpx.Response:
            ids.append(f"c-{uuid.uuid4()}")
            return http.post("/v1/continuations", json={"payload": 1, "continuationId": ids[-1]})

        refused = _until_refused(create)
        assert_problem(refused, 429, "RATE_LIMITED")
        _retry_after(refused)
        assert http.get(f"/v1/continuations/{ids[-1]}").status_code == 404


def test_resumes_past_the_limit_are_refused(server: ServerProcess) -> None:
    with _client(server) as http:
        # Creates spend the same budget; make the continuation with a fresh principal's first.
        created = http.post("/v1/continuations", json={"payload": 1}).json()
        token = created["resumeToken"]
        path = f"/v1/continuations/{created['continuation']['continuationId']}/resume"
        headers = {"authorization": f"PauseMesh {token}", "idempotency-key": "k-1"}
        refused = _until_refused(
            lambda _: http.post(path, json={"payload": {"ok": True}}, headers=headers), spent=1
        )
        assert_problem(refused, 429, "RATE_LIMITED")


def _tools_call(request_id: int) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "book_flight", "arguments": {"destination": "Paris"}},
    }


def test_mcp_tool_calls_past_the_limit_get_a_jsonrpc_error_under_429(
    server: ServerProcess,
) -> None:
    with _client(server) as http:
        refused = _until_refused(
            lambda i: http.post("/mcp", json=_tools_call(i + 1), headers=_MCP_HEADERS)
        )
        body = refused.json()
        assert body["jsonrpc"] == "2.0"
        assert body["id"] >= _LIMIT + 1
        assert body["error"]["code"] == -32029
        assert body["error"]["data"]["code"] == "RATE_LIMITED"
        assert body["error"]["data"]["retryAfter"] == _retry_after(refused)
        # Listing tools starts no work: never counted, never refused.
        listed = http.post(
            "/mcp", json={"jsonrpc": "2.0", "id": 99, "method": "tools/list"}, headers=_MCP_HEADERS
        )
        assert listed.status_code != 429


def _message(text: str) -> dict[str, Any]:
    return {
        "message": {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [{"text": text}],
        }
    }


@pytest.mark.parametrize("method", ["SendMessage", "SendStreamingMessage"])
def test_a2a_jsonrpc_messages_past_the_limit_get_a_jsonrpc_error_under_429(
    server: ServerProcess, method: str
) -> None:
    with _client(server) as http:

        def send(i: int) -> httpx.Response:
            content = msgspec.json.encode(
                {"jsonrpc": "2.0", "id": f"req-{i}", "method": method, "params": _message("Hi")}
            )
            headers = {"content-type": "application/json"}
            return http.post("/a2a/jsonrpc", content=content, headers=headers)

        refused = _until_refused(send)
        body = refused.json()
        assert body["id"].startswith("req-")
        assert body["error"]["data"]["code"] == "RATE_LIMITED"
        _retry_after(refused)


def test_a2a_rest_messages_past_the_limit_are_refused(server: ServerProcess) -> None:
    with _client(server) as http:
        refused = _until_refused(lambda _: http.post("/a2a/rest/message:send", json=_message("Hi")))
        assert_problem(refused, 429, "RATE_LIMITED")
        _retry_after(refused)


def test_reads_are_not_rate_limited(server: ServerProcess) -> None:
    with _client(server) as http:
        for _ in range(2 * _LIMIT + 1):
            assert http.get("/v1/continuations/c-unknown").status_code == 404


def test_the_rate_limit_trips_and_recovers_once_its_window_ends(tmp_path: Path) -> None:
    env = {"PAUSEMESH_RATE_LIMIT": "2/second", "PAUSEMESH_DATA_DIR": str(tmp_path)}
    args = ["serve", "--database-path", str(tmp_path / "pausemesh.db")]
    with (
        ServerProcess(args, env=env) as server,
        httpx.Client(base_url=server.base_url, timeout=60) as http,
    ):

        def create(_: int) -> httpx.Response:
            return http.post("/v1/continuations", json={"payload": {"n": 1}})

        refused = _until_refused(create, limit=2)
        assert_problem(refused, 429, "RATE_LIMITED")
        wait = _retry_after(refused)
        assert wait == 1  # a one-second window never asks for more
        # Past the window the budget is whole again: the next request starts work.
        time.sleep(wait)
        again = create(0)
        assert again.status_code == 201, again.text
        # And it is the same limit as before: it trips again, then recovers again.
        refused_again = _until_refused(create, spent=1, limit=2)
        assert_problem(refused_again, 429, "RATE_LIMITED")
        time.sleep(_retry_after(refused_again))
        assert create(0).status_code == 201
        log = server.output()
    assert " ERROR " not in log, log
