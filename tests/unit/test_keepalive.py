"""An idle stream's keep-alive written without its task: ``core.keepalive.send_at_once`` and
the writer ``SendTimeoutGuard`` gives the responses it serves."""

from __future__ import annotations

import asyncio
from typing import Any

from pausemesh.agui.sse import KEEPALIVE_FRAME
from pausemesh.core import keepalive
from pausemesh.core.keepalive import send_at_once
from pausemesh.web.limits import SendTimeoutGuard

KEEPALIVE_BODY = {"type": "http.response.body", "body": KEEPALIVE_FRAME, "more_body": True}


def test_a_send_that_needs_no_wait_is_done_at_once() -> None:
    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    assert send_at_once(send, KEEPALIVE_BODY) is True
    assert sent == [KEEPALIVE_BODY]


async def test_a_send_that_would_wait_is_stopped_there_and_writes_nothing() -> None:
    writable = asyncio.Event()  # a full socket buffer: the server waits before it writes
    sent: list[Any] = []
    stopped: list[bool] = []

    async def send(message: Any) -> None:
        try:
            await writable.wait()
        finally:
            stopped.append(not writable.is_set())
        sent.append(message)

    assert send_at_once(send, KEEPALIVE_BODY) is False
    assert (sent, stopped) == ([], [True])  # nothing written, and it was ended, not left


def test_a_send_that_fails_is_not_done() -> None:
    async def send(message: Any) -> None:
        raise OSError("connection reset")

    assert send_at_once(send, KEEPALIVE_BODY) is False


async def _served(headers: list[tuple[bytes, bytes]], *, end: bool) -> tuple[list[Any], bool]:
    """One response through the guard; what its keep-alive writer did in the middle."""
    sent: list[Any] = []
    written: list[bool] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        write = keepalive.CURRENT.get()
        assert write is not None
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": not end})
        written.append(write())

    async def receive() -> Any:
        await asyncio.Event().wait()

    async def send(message: Any) -> None:
        sent.append(message)

    guard = SendTimeoutGuard(app, timeout=30)
    await asyncio.wait_for(guard({"type": "http", "path": "/x"}, receive, send), 10)  # type: ignore[arg-type]
    assert keepalive.CURRENT.get() is None  # only while the response is served
    return sent, written[0]


async def test_the_guard_lets_an_sse_response_take_a_keep_alive_without_its_task() -> None:
    sent, written = await _served([(b"content-type", b"text/event-stream")], end=False)
    assert written is True
    assert sent[-1] == KEEPALIVE_BODY


async def test_the_guard_writes_no_keep_alive_into_a_plain_response_or_an_ended_stream() -> None:
    for headers, end in (
        ([(b"content-type", b"application/json")], False),
        ([(b"content-type", b"text/event-stream")], True),
    ):
        sent, written = await _served(headers, end=end)
        assert written is False
        assert KEEPALIVE_BODY not in sent
