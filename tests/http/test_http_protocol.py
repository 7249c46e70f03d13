"""``CoalescingHttpToolsProtocol``: a response's head leaves with its body, in one segment.

Counted on the client's own socket (Linux ``TCP_INFO``: data segments received), against real
uvicorn servers: ``pausemesh serve`` and, for what an app can send, a small ASGI app served in
a thread with the protocol.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import uvicorn

from pausemesh.serving.http_protocol import CoalescingHttpToolsProtocol, HoldingTransport
from tests.support.server import ServerProcess, free_port, read_response

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="counts segments with Linux's TCP_INFO"
)

# struct tcp_info (linux/tcp.h): tcpi_data_segs_in, a __u32 after 8 one-byte fields, 24
# __u32, 4 __u64 and 4 __u32 (segs_out, segs_in, notsent_bytes, min_rtt); Linux 4.6 and later.
_DATA_SEGS_IN = struct.Struct("=152xI")

Scope = dict[str, Any]
Send = Callable[[dict[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[dict[str, Any]]]


def data_segments_in(sock: socket.socket) -> int:
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _DATA_SEGS_IN.size)
    (count,) = _DATA_SEGS_IN.unpack(info)
    return int(count)


def request(path: str, *, method: str = "GET", body: bytes = b"", **headers: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: localhost", f"Content-Length: {len(body)}"]
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def read_until(sock: socket.socket, end: bytes) -> bytes:
    raw = b""
    while end not in raw:
        chunk = sock.recv(65536)
        if not chunk:
            msg = f"connection closed before {end!r}: {raw!r}"
            raise ConnectionError(msg)
        raw += chunk
    return raw


# The streaming route sends its head, then waits for the test before its first chunk.
released = threading.Event()


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path == "/stream":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await asyncio.to_thread(released.wait, 30)
        await send({"type": "http.response.body", "body": b"first", "more_body": True})
        await send({"type": "http.response.body", "body": b"second"})
        return
    if path == "/echo":
        received = b""
        more = True
        while more:
            message = await receive()
            received += message.get("body", b"")
            more = message.get("more_body", False)
        body = json.dumps({"received": received.decode()}).encode()
    else:
        body = b"" if path == "/empty" else json.dumps({"path": path}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture(name="app_port", scope="module")
def app_port_fixture() -> Iterator[int]:
    """``app`` on uvicorn with the protocol and uvloop, as ``pausemesh serve`` runs."""
    port = free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        loop="uvloop",
        http=CoalescingHttpToolsProtocol,
        lifespan="off",
        log_config=None,
        access_log=False,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(600):
        if server.started:
            break
        thread.join(0.05)
    assert server.started
    yield port
    server.should_exit = True
    thread.join(10)


@contextmanager
def connected(port: int) -> Iterator[socket.socket]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        yield sock


def test_a_response_head_and_body_arrive_in_one_segment(app_port: int) -> None:
    with connected(app_port) as sock:
        for path in ("/one", "/two"):  # the second on the same kept-alive connection
            before = data_segments_in(sock)
            sock.sendall(request(path))
            status, _, body = read_response(sock)
            assert (status, json.loads(body)) == (200, {"path": path})
            assert data_segments_in(sock) - before == 1


def test_a_response_without_a_body_and_a_head_request_are_sent_whole(app_port: int) -> None:
    with connected(app_port) as sock:
        sock.sendall(request("/empty"))
        assert read_response(sock)[0] == 200
        sock.sendall(request("/one", method="HEAD"))
        head = read_until(sock, b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200")
        assert head.endswith(b"\r\n\r\n")  # a HEAD response is its head alone


def test_a_streamed_response_head_is_not_held_until_its_first_chunk(app_port: int) -> None:
    released.clear()
    with connected(app_port) as sock:
        sock.sendall(request("/stream"))
        head = read_until(sock, b"\r\n\r\n")  # arrives while the app still waits
        assert head.startswith(b"HTTP/1.1 200")
        assert b"first" not in head
        released.set()
        rest = read_until(sock, b"0\r\n\r\n")
        assert b"first" in rest
        assert b"second" in rest


def test_pipelined_requests_get_their_responses_in_order(app_port: int) -> None:
    with connected(app_port) as sock:
        sock.sendall(request("/a") + request("/b") + request("/c"))
        stream = sock.makefile("rb")
        paths = []
        for _ in range(3):
            assert stream.readline().startswith(b"HTTP/1.1 200")
            length = 0
            while (line := stream.readline()) != b"\r\n":
                name, _, value = line.decode("latin-1").partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            paths.append(json.loads(stream.read(length))["path"])
        assert paths == ["/a", "/b", "/c"]


def test_a_connection_close_request_gets_its_whole_response_then_the_close(
    app_port: int,
) -> None:
    with connected(app_port) as sock:
        sock.sendall(request("/last", connection="close"))
        status, headers, body = read_response(sock)
        assert (status, headers["connection"], json.loads(body)) == (
            200,
            "close",
            {"path": "/last"},
        )
        assert sock.recv(1) == b""


def test_a_client_waiting_for_100_continue_gets_it_then_its_response(app_port: int) -> None:
    with connected(app_port) as sock:
        head = request("/echo", method="POST", body=b"", expect="100-continue")
        sock.sendall(head.replace(b"Content-Length: 0", b"Content-Length: 5"))
        assert read_until(sock, b"\r\n\r\n") == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(b"hello")
        status, _, body = read_response(sock)
        assert (status, json.loads(body)) == (200, {"received": "hello"})


def test_pausemesh_serve_answers_a_create_in_one_segment(server: ServerProcess) -> None:
    body = json.dumps({"payload": {"kind": "input", "message": "Which flight?"}}).encode()
    with connected(server.port) as sock:
        before = data_segments_in(sock)
        sock.sendall(
            request(
                "/v1/continuations",
                method="POST",
                body=body,
                content_type="application/json",
                idempotency_key="one-segment",
            )
        )
        status, _, answer = read_response(sock)
        assert status == 201, answer
        assert data_segments_in(sock) - before == 1


class Recorded(asyncio.Transport):
    """What reached the socket's transport, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[bytes] = []
        self.closing = False
        self.aborted = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.sent.append(bytes(data))

    def writelines(self, list_of_data: Any) -> None:
        self.sent.append(b"".join(list_of_data))

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return 0

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.closing = self.aborted = True


async def test_a_held_head_leaves_with_the_next_write_or_once_the_loop_ran_its_callbacks() -> None:
    recorded = Recorded()
    transport = HoldingTransport(recorded, asyncio.get_running_loop())
    transport.hold_next_write()
    transport.write(b"head")
    assert recorded.sent == []
    await asyncio.sleep(0)
    assert recorded.sent == [b"head"]
    transport.hold_next_write()
    transport.write(b"head")
    transport.write(bytearray(b"body"))
    assert recorded.sent == [b"head", b"headbody"]


async def test_writes_after_a_head_go_out_at_once() -> None:
    recorded = Recorded()
    transport = HoldingTransport(recorded, asyncio.get_running_loop())
    transport.write(b"event: one")  # a streamed response's chunk: nothing asked to hold it
    transport.write(b"event: two")
    assert recorded.sent == [b"event: one", b"event: two"]


async def test_close_sends_a_held_write_first_and_abort_drops_it() -> None:
    closed, aborted = Recorded(), Recorded()
    loop = asyncio.get_running_loop()
    first, second = HoldingTransport(closed, loop), HoldingTransport(aborted, loop)
    first.hold_next_write()
    second.hold_next_write()
    first.write(b"last")
    first.close()
    second.write(b"lost")
    second.abort()
    await asyncio.sleep(0)
    assert (closed.sent, closed.closing) == ([b"last"], True)
    assert (aborted.sent, aborted.aborted) == ([], True)


async def test_a_write_held_when_the_connection_went_away_is_dropped() -> None:
    recorded = Recorded()
    transport = HoldingTransport(recorded, asyncio.get_running_loop())
    transport.hold_next_write()
    transport.write(bytearray(b"late"))
    recorded.closing = True  # the peer reset the connection meanwhile
    await asyncio.sleep(0)
    assert recorded.sent == []
    assert transport.get_write_buffer_size() == 0
