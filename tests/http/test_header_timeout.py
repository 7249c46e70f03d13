"""``PAUSEMESH_HEADER_TIMEOUT_SECONDS`` against a real ``pausemesh serve`` (1 s here).

A client trickling its request head a byte at a time, or connecting and sending nothing, is cut
at the timeout; a keep-alive client that idles between requests longer than the timeout keeps
its connection; an SSE stream open for several timeouts is not cut. The waits are conditions
with generous upper bounds, never a measured time.
"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from pausemesh.core.errors import SettingsError
from pausemesh.settings import load_settings
from tests.support.agui import post_run, run_body
from tests.support.server import ServerProcess, read_response

pytestmark = pytest.mark.slow

TIMEOUT = 1.0
# Far past the timeout: a connection still open then was not cut.
PATIENCE = 30.0


@pytest.fixture(name="server", scope="module")
def server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data: Path = tmp_path_factory.mktemp("header-timeout")
    env = {
        "PAUSEMESH_HEADER_TIMEOUT_SECONDS": str(TIMEOUT),
        "PAUSEMESH_KEEPALIVE_SECONDS": "0.2",
        "PAUSEMESH_IDLE_CONNECTION_SECONDS": "30",
        "PAUSEMESH_DATA_DIR": str(data),
    }
    args = ["serve", "--database-path", str(data / "pm.db")]
    agent = ["--agent", "tests.support.identity:whoami"]
    with ServerProcess([*args, *agent], env=env) as server:
        yield server


def connect(server: ServerProcess) -> socket.socket:
    sock = socket.create_connection((server.host, server.port), timeout=PATIENCE)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def closed_by_server(sock: socket.socket) -> bool:
    """True once the server has closed the connection (end of stream or a reset)."""
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionError:
        return True
    finally:
        sock.setblocking(True)


def get(server: ServerProcess, path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: {server.host}:{server.port}\r\n\r\n".encode()


def test_a_client_trickling_its_request_head_is_cut_at_the_timeout(
    server: ServerProcess,
) -> None:
    head = get(server, "/healthz")[:-2] + b"X-Slow: " + b"a" * 10_000
    with connect(server) as sock:
        deadline = time.monotonic() + PATIENCE
        sent = 0
        cut = False
        while not cut and time.monotonic() < deadline:
            try:
                sock.sendall(head[sent : sent + 1])
            except ConnectionError:
                cut = True
                break
            sent += 1
            time.sleep(0.05)
            cut = closed_by_server(sock)
        assert cut, f"still open after {sent} bytes"
        assert sent < len(head)  # cut before the head was complete


def test_a_client_that_connects_and_sends_nothing_is_cut_at_the_timeout(
    server: ServerProcess,
) -> None:
    with connect(server) as sock:
        assert sock.recv(1) == b""  # blocks until the server closes (PATIENCE at most)


def test_a_keep_alive_client_idle_between_requests_keeps_its_connection(
    server: ServerProcess,
) -> None:
    with connect(server) as sock:
        for _ in range(3):
            sock.sendall(get(server, "/healthz"))
            status, _, _ = read_response(sock)
            assert status == 200
            # Idle for more than the header timeout: between requests it does not run.
            time.sleep(TIMEOUT * 1.5)
            assert not closed_by_server(sock)


def test_an_sse_stream_open_for_several_timeouts_is_not_cut(server: ServerProcess) -> None:
    thread_id = f"t-{uuid.uuid4()}"
    with httpx.Client(base_url=server.base_url, timeout=PATIENCE) as http:
        post_run(http, run_body(thread_id, "r-1"))
        path = f"/agui/threads/{thread_id}/events"
        with http.stream("GET", path, headers={"accept": "text/event-stream"}) as tail:
            assert tail.status_code == 200
            opened = time.monotonic()
            for line in tail.iter_lines():
                # Keep-alive comments still arrive well after the timeout: the stream is open.
                if line.startswith(":") and time.monotonic() - opened > TIMEOUT * 4:
                    break
            else:
                pytest.fail("the stream ended")


@pytest.mark.parametrize("value", ["0", "0.1", "601", "soon"])
def test_a_header_timeout_out_of_bounds_stops_the_start_with_its_name(value: str) -> None:
    with pytest.raises(SettingsError, match="PAUSEMESH_HEADER_TIMEOUT_SECONDS must be a number"):
        load_settings(environ={"PAUSEMESH_HEADER_TIMEOUT_SECONDS": value}, env_file=None)
