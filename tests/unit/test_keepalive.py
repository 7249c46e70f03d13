"""An idle stream's keep-alive written without its task: ``core.keepalive.send_at_once``, the
writer ``SendTimeoutGuard`` leaves in each request's scope, and each binding's tail route
passing it down to the tail wheel (real apps in-process, a real SQLite file)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager
from litestar import Litestar
from starlette.applications import Starlette

from pausemesh.agui.agent import AgentOutput, PauseRequest, RunContext
from pausemesh.agui.sse import KEEPALIVE_FRAME
from pausemesh.core.keepalive import send_at_once
from pausemesh.settings import Settings
from pausemesh.web import PauseMeshConfig, PauseMeshPlugin
from pausemesh.web.agui_starlette import StarletteAgui
from pausemesh.web.limits import SendTimeoutGuard, keep_alive_writer
from tests.support.agui import header_principal

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


async def _served(headers: list[tuple[bytes, bytes]], *, end: bool) -> tuple[list[Any], bool, bool]:
    """One response through the guard; what its keep-alive writer (taken from the request's
    scope, as a tail route takes it) did in the middle and after the response."""
    sent: list[Any] = []
    written: list[bool] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        write = keep_alive_writer(scope)
        assert write is not None
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": not end})
        written.append(write())

    async def receive() -> Any:
        await asyncio.Event().wait()

    async def send(message: Any) -> None:
        sent.append(message)

    guard = SendTimeoutGuard(app, timeout=30)
    scope: dict[str, Any] = {"type": "http", "path": "/x"}
    await asyncio.wait_for(guard(scope, receive, send), 10)  # type: ignore[arg-type]
    write = keep_alive_writer(scope)
    assert write is not None
    before = len(sent)
    late = write()  # the response was served: the writer writes nothing more
    assert len(sent) == before
    return sent, written[0], late


async def test_the_guard_lets_an_sse_response_take_a_keep_alive_without_its_task() -> None:
    sent, written, late = await _served([(b"content-type", b"text/event-stream")], end=False)
    assert written is True
    assert sent[-1] == KEEPALIVE_BODY
    assert late is False


async def test_the_guard_writes_no_keep_alive_into_a_plain_response_or_an_ended_stream() -> None:
    for headers, end in (
        ([(b"content-type", b"application/json")], False),
        ([(b"content-type", b"text/event-stream")], True),
    ):
        sent, written, late = await _served(headers, end=end)
        assert (written, late) == (False, False)
        assert KEEPALIVE_BODY not in sent


def test_a_request_the_guard_does_not_serve_has_no_keep_alive_writer() -> None:
    assert keep_alive_writer({"type": "http", "path": "/x"}) is None


# -- through each binding's tail route ------------------------------------------------------


async def _ask(_: RunContext) -> AsyncIterator[AgentOutput]:
    yield PauseRequest(message="Which one?")


def _starlette_app(database: Path) -> Any:
    pausemesh = StarletteAgui(_settings(database), agent=_ask, principal_resolver=header_principal)
    return Starlette(routes=pausemesh.routes(), lifespan=pausemesh.lifespan)


def _litestar_app(database: Path) -> Any:
    config = PauseMeshConfig(
        settings=_settings(database), agent=_ask, principal_resolver=header_principal
    )
    return Litestar(plugins=[PauseMeshPlugin(config)])


def _settings(database: Path) -> Settings:
    # The shortest interval: the wheel's granularity (0.5 s) paces the keep-alives.
    return Settings(database_path=str(database), keepalive_seconds=0.1)


def _get(path: str, query: bytes) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "root_path": "",
        "headers": [(b"host", b"localhost"), (b"x-principal", b"alice")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 80),
    }


@pytest.mark.parametrize("make_app", [_litestar_app, _starlette_app], ids=["litestar", "starlette"])
async def test_an_idle_tails_keep_alives_are_written_by_the_wheel_not_by_its_task(
    tmp_path: Path, make_app: Callable[[Path], Any]
) -> None:
    app = make_app(tmp_path / "pausemesh.db")
    body = {
        "threadId": "t-idle",
        "runId": "r-1",
        "messages": [{"id": "u-1", "role": "user", "content": "hello"}],
    }
    async with (
        LifespanManager(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost"
        ) as client,
    ):
        run = await client.post("/agui", json=body, headers={"x-principal": "alice"})
        assert run.status_code == 200, run.text
        head = max(int(line[4:]) for line in run.text.splitlines() if line.startswith("id: "))

        # The tail, caught up: it has nothing to send but its keep-alives. Every body message
        # notes the task that sent it.
        writers: list[str] = []
        three = asyncio.Event()
        left = asyncio.Event()

        async def send(message: Any) -> None:
            if message["type"] == "http.response.body" and message["body"] == KEEPALIVE_FRAME:
                writers.append(asyncio.current_task().get_name())  # type: ignore[union-attr]
                if len(writers) >= 3:
                    three.set()

        async def receive() -> Any:
            await left.wait()
            return {"type": "http.disconnect"}

        scope = _get("/agui/threads/t-idle/events", f"after={head}".encode())
        tail = asyncio.create_task(app(scope, receive, send))
        async with asyncio.timeout(30):  # liveness only
            await three.wait()
            left.set()
            await tail
    assert set(writers) == {"pausemesh-tail-wheel"}
