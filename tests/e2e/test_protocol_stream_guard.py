"""The protocol mounts' SSE streams under the send timeout, against a real server process.

``tests.support.a2a_stream_server`` serves an A2A agent through the CLI's ``serve_app``, with
``PAUSEMESH_MAX_STREAMS_PER_PRINCIPAL=1`` and ``PAUSEMESH_SEND_TIMEOUT_SECONDS=1``: an A2A
``SendStreamingMessage`` whose reader stops reading (a raw socket with a tiny receive buffer)
is dropped after the timeout and frees its stream slot, so a new stream is accepted. On
SIGTERM an open A2A stream ends after its last whole event (no cut chunk, no ERROR line), a
stream asked for during the drain gets 503 ``SERVER_SHUTTING_DOWN`` with ``Retry-After``, and
the process exits within ``PAUSEMESH_SHUTDOWN_GRACE_SECONDS`` plus 2 s; an MCP session's open
stream on ``pausemesh demo`` ends the same way.
"""

from __future__ import annotations

import json
import signal
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.a2a_stream_server import A2AStreamServer
from tests.support.rest import assert_problem
from tests.support.server import (
    ServerProcess,
    assert_clean_exit,
    assert_dropped_reader_closed_quietly,
    held_request,
    read_response,
    stalled_post,
)

pytestmark = pytest.mark.slow

A2A_JSONRPC = {"content-type": "application/json", "a2a-version": "1.0"}


def streaming_message(text: str) -> bytes:
    message = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {"message": message},
    }
    return json.dumps(request).encode()


def sse_results(raw: str) -> list[dict[str, Any]]:
    """The JSON-RPC results of an A2A SSE body (one per ``data:`` line)."""
    return [
        json.loads(line[len("data: ") :])["result"]
        for line in raw.split("\n")
        if line.startswith("data: ")
    ]


@pytest.fixture(name="server", scope="module")
def server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[A2AStreamServer]:
    data: Path = tmp_path_factory.mktemp("protocol-stream-guard")
    env = {
        "PAUSEMESH_MAX_STREAMS_PER_PRINCIPAL": "1",
        "PAUSEMESH_SEND_TIMEOUT_SECONDS": "1",
        "PAUSEMESH_DATA_DIR": str(data),
        "PAUSEMESH_DATABASE_PATH": str(data / "pausemesh.db"),
    }
    with A2AStreamServer(env=env) as server:
        yield server


def _stalled_stream(server: A2AStreamServer) -> socket.socket:
    """A flooding ``SendStreamingMessage`` whose reader stops after the response head."""
    headers = {
        "Content-Type": "application/json",
        "A2A-Version": "1.0",
        "Accept": "text/event-stream",
    }
    return stalled_post(server, "/a2a/jsonrpc", streaming_message("flood"), headers)


def test_an_a2a_stream_whose_reader_stops_reading_is_dropped_and_frees_its_slot(
    server: A2AStreamServer,
) -> None:
    stalled = _stalled_stream(server)
    try:
        with httpx.Client(base_url=server.base_url, timeout=60) as http:
            # While the stalled stream holds the only slot, a new stream is refused; once the
            # server gives up on its reader, the next one is accepted.
            deadline = time.monotonic() + 90
            while True:
                assert time.monotonic() < deadline, server.output()[-3000:]
                response = http.post(
                    "/a2a/jsonrpc",
                    content=streaming_message("hello"),
                    headers={**A2A_JSONRPC, "accept": "text/event-stream"},
                )
                if response.status_code != 429:
                    break
                assert_problem(response, 429, "TOO_MANY_STREAMS")
                time.sleep(0.2)
        assert response.status_code == 200, response.text
        results = sse_results(response.text)
        assert results[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
        dropped = "dropped an SSE reader that accepted nothing for 1.0s"
        assert dropped in server.wait_for_output(dropped)
    finally:
        stalled.close()
    assert_dropped_reader_closed_quietly(server)


def test_sigterm_ends_an_open_a2a_stream_cleanly_and_exits_within_the_grace(
    tmp_path: Path,
) -> None:
    grace = 2.0
    env = {
        "PAUSEMESH_SHUTDOWN_GRACE_SECONDS": str(grace),
        "PAUSEMESH_DATA_DIR": str(tmp_path),
        "PAUSEMESH_DATABASE_PATH": str(tmp_path / "pausemesh.db"),
    }
    late_body = streaming_message("hello")
    with A2AStreamServer(env=env) as server:
        assert server.process is not None
        # A stream asked for before the signal whose body arrives only during the drain.
        late = held_request(
            server,
            "/a2a/jsonrpc",
            {"Content-Type": "application/json", "A2A-Version": "1.0"},
            len(late_body),
        )
        with (
            httpx.Client(base_url=server.base_url, timeout=60) as http,
            http.stream(
                "POST",
                "/a2a/jsonrpc",
                content=streaming_message("wait"),
                headers={**A2A_JSONRPC, "accept": "text/event-stream"},
            ) as stream,
        ):
            assert stream.status_code == 200
            raw = ""
            # A connection cut mid-chunk raises here (httpx.RemoteProtocolError): it must not.
            for text in stream.iter_text():
                raw += text.replace("\r\n", "\n")  # the SDK ends its lines with CRLF
                if raw.count("\n\n") == 2 and server.process.poll() is None:
                    # The task and its "working" update arrived: the agent now waits.
                    server.process.send_signal(signal.SIGTERM)
                    signalled = time.monotonic()
        # The stream ended: the drain began. The late stream is turned away, not opened.
        late.sendall(late_body)
        status, headers, body = read_response(late)
        late.close()
        code = server.process.wait(30)
        exited = time.monotonic()
        log = server.output()

    assert_clean_exit(code, log, took=exited - signalled, grace=grace)
    # The stream ended after its last whole event, never inside one.
    assert raw.endswith("\n\n"), raw[-200:]
    states = [
        result["statusUpdate"]["status"]["state"]
        for result in sse_results(raw)
        if "statusUpdate" in result
    ]
    assert states == ["TASK_STATE_WORKING"]
    assert status == 503, body
    assert json.loads(body)["code"] == "SERVER_SHUTTING_DOWN"
    assert headers["retry-after"] == "1"
    # The drain's own line belongs to no request (not to one the signal interrupted).
    [drain_line] = [line for line in log.splitlines() if "shutting down: no new runs" in line]
    assert "requestId=" not in drain_line


def test_sigterm_ends_an_open_mcp_stream_cleanly_and_exits_within_the_grace(
    tmp_path: Path,
) -> None:
    grace = 2.0
    env = {"PAUSEMESH_SHUTDOWN_GRACE_SECONDS": str(grace), "PAUSEMESH_DATA_DIR": str(tmp_path)}
    args = ["demo", "--no-browser", "--database-path", str(tmp_path / "pausemesh.db")]
    json_rpc = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "drain-test", "version": "1"},
        },
    }
    with ServerProcess(args, env=env) as server:
        assert server.process is not None
        with httpx.Client(base_url=server.base_url, timeout=60) as http:
            started = http.post("/mcp", headers=json_rpc, json=initialize)
            assert started.status_code == 200, started.text
            session = {
                "mcp-session-id": started.headers["mcp-session-id"],
                "mcp-protocol-version": "2025-11-25",
            }
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert http.post("/mcp", headers={**json_rpc, **session}, json=initialized).is_success
            # The session's standalone stream: open until the server ends it.
            with http.stream(
                "GET", "/mcp", headers={"accept": "text/event-stream", **session}
            ) as s:
                assert s.status_code == 200
                server.process.send_signal(signal.SIGTERM)
                signalled = time.monotonic()
                # A connection cut mid-chunk raises here (httpx.RemoteProtocolError).
                rest = s.read()
        code = server.process.wait(30)
        exited = time.monotonic()
        log = server.output()

    assert_clean_exit(code, log, took=exited - signalled, grace=grace)
    assert not rest.strip() or rest.replace(b"\r\n", b"\n").endswith(b"\n\n"), rest[-200:]
