"""The limits on work and streams, applied at the routes (settings in ``pausemesh.settings``).

* ``PAUSEMESH_RATE_LIMIT``: work started per principal (per client address on a server
  without a principal resolver): ``POST /agui``, continuation create and resume, MCP
  ``tools/call``, A2A ``SendMessage``/``SendStreamingMessage``. 429 ``RATE_LIMITED`` with
  ``Retry-After``. The counters are the store's when it shares them (PostgreSQL), else this
  process's.
* ``PAUSEMESH_MAX_STREAMS_PER_PRINCIPAL``: open SSE streams that end by themselves (runs,
  connects, A2A streamed messages) per principal in this process, and apart from them
  ``PAUSEMESH_MAX_TAILS_PER_PRINCIPAL``: idle tails (thread tails, MCP GET streams and
  ``tasks/result``, A2A subscriptions), so a principal holding its tails can still run. AG-UI
  here; MCP and A2A in ``ProtocolMount.stream_slot``, on the same slots. 429
  ``TOO_MANY_STREAMS`` before a stream starts; a stream that ends frees its slot.
* ``PAUSEMESH_SEND_TIMEOUT_SECONDS``: ``SendTimeoutGuard`` drops an SSE reader that accepts no
  write for that long, so a stalled client holds neither memory nor a run (the AG-UI routes and
  the ``/mcp``, ``/a2a`` and gateway mounts, through ``send_timeout_middleware``).
* While the process drains (SIGTERM), runs, tails and mount streams are refused: 503
  ``SERVER_SHUTTING_DOWN``; the mounts' open streams end after their last whole event.
* ``SendTimeoutGuard`` also leaves in each request's scope the writer of one keep-alive to its
  response (``core.keepalive``); a tail route takes it with ``keep_alive_writer`` and passes
  it to ``RunHost.tail``, so an idle tail's keep-alives go out without waking its task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, MutableMapping
from contextvars import ContextVar
from typing import Any, Final, cast

from litestar.enums import ScopeType
from litestar.middleware import DefineMiddleware
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from pausemesh.agui.sse import KEEPALIVE_FRAME
from pausemesh.bootstrap import Runtime
from pausemesh.core.drain import Drain
from pausemesh.core.errors import RateLimitedError, ShuttingDownError, TooManyStreamsError
from pausemesh.core.keepalive import KeepAlive, send_at_once
from pausemesh.core.limits import StreamSlot, StreamSlots
from pausemesh.observability.telemetry import RATE_LIMITED, count
from pausemesh.settings import Settings

__all__ = (
    "Limits",
    "SendTimeoutGuard",
    "keep_alive_writer",
    "limit_key",
    "send_timeout_middleware",
)

_log = logging.getLogger("pausemesh.web")

# Set per request in the server's own task (the stream itself runs in a child task, which sees
# the same event), so the server's log call after the app returns can tell a dropped reader.
_DROPPED: ContextVar[asyncio.Event] = ContextVar("pausemesh_dropped_reader")
_INCOMPLETE: Final = "ASGI callable returned without completing response."
# The scope key under which ``SendTimeoutGuard`` leaves its response's keep-alive writer. In
# the scope itself, which is the request's own: ``scope["state"]`` may be shared between
# requests (asgi-lifespan hands every request the same dict).
_KEEP_ALIVE: Final = "pausemesh.keep_alive"


class _DroppedReaderClose(logging.Filter):
    """uvicorn logs an ERROR for every response its app leaves unfinished and closes the
    connection: for a reader the guard dropped on purpose (already logged as a warning) that
    close is the intended end, so the line becomes an INFO saying so."""

    def filter(self, record: logging.LogRecord) -> bool:
        dropped = _DROPPED.get(None)
        if record.msg == _INCOMPLETE and dropped is not None and dropped.is_set():
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.msg, record.args = "closed the connection of the dropped SSE reader", ()
        return True


_DROPPED_READER_CLOSE: Final = _DroppedReaderClose()


def keep_alive_writer(scope: Mapping[str, object]) -> KeepAlive | None:
    """The writer of one keep-alive to this request's response (``core.keepalive``), which a
    tail route passes to ``RunHost.tail``; None where no ``SendTimeoutGuard`` serves it."""
    return cast("KeepAlive | None", scope.get(_KEEP_ALIVE))


def limit_key(principal: str | None, scope: Mapping[str, object]) -> str:
    """Whose budget a request spends: its principal's, or (no resolver) its client address's."""
    if principal is not None:
        return "principal:" + principal
    client = scope.get("client")
    host = client[0] if isinstance(client, (tuple, list)) and client else "unknown"
    return f"client:{host}"


def _held(slot: StreamSlot, frames: AsyncGenerator[bytes, None]) -> AsyncGenerator[bytes, None]:
    async def held() -> AsyncGenerator[bytes, None]:
        try:
            async with contextlib.aclosing(frames) as inner:
                async for chunk in inner:
                    yield chunk
        finally:
            slot.release()

    stream = held()
    # A response that never started iterating (its client left first) never runs the
    # ``finally`` above; the slot is freed when the generator is dropped instead.
    weakref.finalize(stream, slot.release)
    return stream


class Limits:
    """The limits of one running runtime, for the routes."""

    __slots__ = ("_runtime",)

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    def refuse_if_draining(self) -> None:
        if self._runtime.drain.draining:
            raise ShuttingDownError

    async def admit_work(self, principal: str | None, scope: Mapping[str, object]) -> None:
        """Count one start of work; ``RateLimitedError`` past ``PAUSEMESH_RATE_LIMIT``."""
        limiter = self._runtime.rate_limiter
        rule = self._runtime.settings.rate_limit_rule
        if limiter is None or rule is None:
            return
        key = limit_key(principal, scope)
        retry_after = await limiter.hit(key, rule, time.time())
        if retry_after is not None:
            _log.info("rate limit reached for %s; retry after %ds", key, retry_after)
            count(RATE_LIMITED, "RATE_LIMITED")
            raise RateLimitedError(retry_after)

    def stream(
        self,
        principal: str | None,
        scope: Mapping[str, object],
        frames: AsyncGenerator[bytes, None],
    ) -> AsyncGenerator[bytes, None]:
        """``frames`` holding one of the principal's stream slots until it ends.

        Raises ``TooManyStreamsError`` (before anything is sent) when none is left, and
        ``ShuttingDownError`` while the process drains.
        """
        return self._held(self._runtime.streams, principal, scope, frames)

    def tail(
        self,
        principal: str | None,
        scope: Mapping[str, object],
        frames: AsyncGenerator[bytes, None],
    ) -> AsyncGenerator[bytes, None]:
        """``stream`` for an idle tail: one of the principal's tail slots, counted apart from
        its runs (``PAUSEMESH_MAX_TAILS_PER_PRINCIPAL``)."""
        return self._held(self._runtime.tails, principal, scope, frames)

    def _held(
        self,
        slots: StreamSlots,
        principal: str | None,
        scope: Mapping[str, object],
        frames: AsyncGenerator[bytes, None],
    ) -> AsyncGenerator[bytes, None]:
        self.refuse_if_draining()
        key = limit_key(principal, scope)
        try:
            slot = slots.acquire(key)
        except TooManyStreamsError:
            count(RATE_LIMITED, "TOO_MANY_STREAMS")
            _log.info("%s cap reached for %s", slots.what, key)
            raise
        return _held(slot, frames)


def _is_sse(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    return any(
        name.lower() == b"content-type" and value.lower().startswith(b"text/event-stream")
        for name, value in headers
    )


class SendTimeoutGuard:
    """Drop an SSE response whose reader accepts no write for ``timeout`` seconds.

    The stalled write is abandoned and the response is told its client disconnected, so the
    stream's generator is closed (its run ends, its lease and stream slot are freed) while
    the client still holds the socket. Other responses pass through untouched.

    With ``drain`` (the protocol mounts, whose SDKs know nothing of PauseMesh's drain), an SSE
    response is also told its client left once the process drains, and a stream its app
    stops without finishing the body (the SDK's own shutdown watcher cancels it) is finished
    here: the client reads a clean end of stream after its last whole event, and uvicorn has
    no half-sent response to log as an error. The AG-UI routes end their runs and tails
    themselves (runs get the grace period), so they pass no ``drain``.

    A write to a reader that keeps up returns without waiting (uvicorn waits only while the
    socket's buffer is full), so no timer is armed per write: a write in progress is noted
    with its deadline, and one watchdog task (running only while a write waits) cancels the
    writes past theirs, like ``asyncio.timeout`` would. An idle tail's keep-alive is the hot
    path this keeps cheap.
    """

    __slots__ = ("_drain", "_expired", "_watchdog", "_writing", "app", "timeout")

    def __init__(
        self, app: ASGIApp, timeout: float, drain: Callable[[], Drain | None] | None = None
    ) -> None:
        self.app = app
        self.timeout = timeout
        self._drain = drain
        self._writing: dict[asyncio.Task[Any], float] = {}
        self._expired: set[asyncio.Task[Any]] = set()
        self._watchdog: asyncio.Task[None] | None = None
        logging.getLogger("uvicorn.error").addFilter(_DROPPED_READER_CLOSE)  # once: same object

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        # A write that lasts past one tick is waiting on its reader; the tick bounds how late
        # past ``timeout`` a stalled one is dropped.
        tick = min(self.timeout / 4, 1.0)
        while True:
            # Sleep first: the write that armed the watchdog has usually finished by now, and
            # the task ends (the next write arms it again: at most one task per tick).
            await asyncio.sleep(tick)
            if not self._writing:
                return
            now = loop.time()
            for task, deadline in list(self._writing.items()):
                if deadline <= now:
                    del self._writing[task]
                    self._expired.add(task)
                    task.cancel()

    async def _send_within(self, send: Send, message: Message) -> bool:
        """Send ``message``; False when the reader accepted nothing for ``timeout``."""
        self._arm()
        task = asyncio.current_task()
        assert task is not None  # noqa: S101 - ASGI runs in a task
        cancelling = task.cancelling()
        self._writing[task] = asyncio.get_running_loop().time() + self.timeout
        try:
            await send(message)
        except asyncio.CancelledError:
            # Ours (the watchdog's) unless the task was also cancelled from elsewhere.
            if task in self._expired and task.uncancel() <= cancelling:
                return False
            raise
        else:
            return True
        finally:
            self._writing.pop(task, None)
            self._expired.discard(task)

    def _arm(self) -> None:
        """Make sure the watchdog runs for at least one tick after this write starts."""
        if self._watchdog is None or self._watchdog.done():
            self._watchdog = asyncio.get_running_loop().create_task(
                self._watch(), name="pausemesh-send-timeout"
            )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        streaming = False
        finished = False
        returned = False
        stalled = asyncio.Event()
        _DROPPED.set(stalled)
        drain = None if self._drain is None else self._drain()

        async def timed_send(message: Message) -> None:
            nonlocal streaming, finished
            if stalled.is_set():
                return  # dropped: nothing more goes to this reader
            if message["type"] == "http.response.start":
                streaming = _is_sse(message.get("headers", ()))
            if not streaming or message["type"] != "http.response.body":
                await send(message)
                return
            finished = not message.get("more_body", False)
            if not await self._send_within(send, message):
                stalled.set()
                _log.warning(
                    "dropped an SSE reader that accepted nothing for %.1fs (%s)",
                    self.timeout,
                    scope.get("path", ""),
                )

        async def watched_receive() -> Any:
            if not streaming:
                return await receive()
            if stalled.is_set() or (drain is not None and drain.draining):
                return {"type": "http.disconnect"}
            waits: list[asyncio.Future[Any]] = [
                asyncio.ensure_future(receive()),
                asyncio.ensure_future(stalled.wait()),
            ]
            if drain is not None:
                waits.append(asyncio.ensure_future(drain.wait()))
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiting in waits:
                    waiting.cancel()
            received = waits[0]
            if received.done() and not received.cancelled():
                return received.result()
            return {"type": "http.disconnect"}

        def keep_alive() -> bool:
            # Straight to the server's ``send``: it never waits, so no send timeout to arm.
            if not streaming or finished or returned or stalled.is_set():
                return False
            return send_at_once(
                send, {"type": "http.response.body", "body": KEEPALIVE_FRAME, "more_body": True}
            )

        cast("MutableMapping[str, object]", scope)[_KEEP_ALIVE] = keep_alive
        try:
            await self.app(scope, watched_receive, timed_send)
        finally:
            # Past here the guard may end the body itself: nothing more through the writer.
            returned = True
        if drain is not None and streaming and not finished and not stalled.is_set():
            # The SDK stopped its stream without ending the body (the drain, or its own
            # shutdown watcher): end it after the last whole event. A client that already
            # left makes this a no-op; a stalled one is let go after ``timeout``.
            end: Message = {"type": "http.response.body", "body": b"", "more_body": False}
            await self._send_within(send, end)


def send_timeout_middleware(
    settings: Settings, drain: Callable[[], Drain | None] | None = None
) -> DefineMiddleware:
    """``SendTimeoutGuard`` as route middleware (the AG-UI routes and the protocol mounts)."""
    return DefineMiddleware(SendTimeoutGuard, timeout=settings.send_timeout_seconds, drain=drain)
