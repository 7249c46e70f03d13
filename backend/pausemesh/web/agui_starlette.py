"""AG-UI as native Starlette routes, streamed with ``sse-starlette`` (docs/agui.md, "Routes").

For a Starlette or FastAPI host that wants PauseMesh's AG-UI endpoints among its own routes
instead of mounting the Litestar app::

    pausemesh = StarletteAgui(settings, agent=my_agent)
    app = Starlette(routes=[*pausemesh.routes(), ...], lifespan=pausemesh.lifespan)

The same run host serves them, so the wire is byte-for-byte the Litestar one: LF-framed SSE
with ``id:`` = thread sequence, input validated before the stream starts (4xx problem body),
``RUN_ERROR`` after. ``sse-starlette`` adds what a long-lived stream needs in Starlette:
disconnect detection, a send timeout for frozen clients and a clean end on shutdown.

A host with its own lifespan enters ``pausemesh.running()`` in it. Requests that arrive when
neither ran get a 500 ``NOT_STARTED`` problem naming the missing line.

Note: importing ``sse_starlette`` patches uvicorn's exit handler (so open streams end on
shutdown). Only this module imports it; the Litestar app and the CLI never do.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import msgspec
from sse_starlette import EventSourceResponse
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from pausemesh import __version__
from pausemesh.agui.agent import Agent
from pausemesh.agui.capabilities import agent_capabilities
from pausemesh.agui.conversations import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, Conversations
from pausemesh.agui.double_texting import requested_policy
from pausemesh.agui.input import RunAgentInput, check_thread_id, read_run_input
from pausemesh.agui.run import RunHost, each, snapshot_pieces, thread_snapshot
from pausemesh.agui.run.snapshots import DEFAULT_SNAPSHOT_MESSAGES, MAX_MESSAGE_PAGE
from pausemesh.agui.sse import LINE_SEPARATOR, SSE_HEADERS, counted_stream, replay_cursor
from pausemesh.bootstrap import open_runtime
from pausemesh.core.errors import (
    InvalidInputError,
    MisdirectedRequestError,
    NotStartedError,
    PauseMeshError,
    PayloadTooLargeError,
)
from pausemesh.core.identity import Identity
from pausemesh.core.large_json import LARGE_BYTES
from pausemesh.settings import Settings
from pausemesh.stores.storage import Storage
from pausemesh.web.auth import configured_resolver, resolve_identity
from pausemesh.web.browser import browser_refusal
from pausemesh.web.host_guard import host_policy, request_host
from pausemesh.web.limits import Limits, SendTimeoutGuard, keep_alive_writer
from pausemesh.web.owed import OwedRuns, run_owed_sweeper
from pausemesh.web.problems import problem_for
from pausemesh.web.schemas import ThreadTitleBody, strict_body
from pausemesh.web.served_agent import served_agent

__all__ = ("StarletteAgui", "StarlettePrincipalResolver")

_log = logging.getLogger("pausemesh.agui")

StarlettePrincipalResolver = Callable[[Request], Awaitable[str | Identity | None]]

_NOT_STARTED = (
    "PauseMesh has not started: its lifespan did not run. Pass `lifespan=pausemesh.lifespan`"
    " to the app, or enter `pausemesh.running()` from the host's own lifespan."
)


def _page_size(raw: str | None) -> int:
    """``?limit=``: within the Litestar route's bounds, refused with its code."""
    if raw is None:
        return DEFAULT_PAGE_SIZE
    # At most 3 digits: anything longer is out of bounds anyway, and never parsed.
    limit = int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 3 else 0
    if not 1 <= limit <= MAX_PAGE_SIZE:
        msg = f"limit must be a whole number between 1 and {MAX_PAGE_SIZE}"
        raise InvalidInputError(msg, code="INVALID_REQUEST")
    return limit


def _message_limit(raw: str | None) -> int:
    """``?limit=`` of a messages page: within the Litestar route's bounds, refused with its
    code."""
    if raw is None:
        return DEFAULT_SNAPSHOT_MESSAGES
    limit = int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 4 else 0
    if not 1 <= limit <= MAX_MESSAGE_PAGE:
        msg = f"limit must be a whole number between 1 and {MAX_MESSAGE_PAGE}"
        raise InvalidInputError(msg, code="INVALID_REQUEST")
    return limit


def _decode_title(body: bytes) -> ThreadTitleBody:
    """The ``PATCH`` body, with the Litestar route's codes (``EMPTY_BODY``,
    ``MALFORMED_JSON``, ``INVALID_REQUEST``) and its strict schema."""
    if not body.strip():
        msg = "The request needs a JSON body"
        raise InvalidInputError(msg, code="EMPTY_BODY")
    try:
        data = msgspec.json.decode(body)
    except (msgspec.DecodeError, RecursionError):
        msg = "The request body is not valid JSON"
        raise InvalidInputError(msg, code="MALFORMED_JSON") from None
    return strict_body(data, ThreadTitleBody)


class StarletteAgui:
    """The AG-UI routes of one agent, for a Starlette (or FastAPI) app."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        agent: Agent | object,
        storage: Storage | None = None,
        principal_resolver: StarlettePrincipalResolver | None = None,
        sweeper: bool = True,
        send_timeout: float | None = None,
    ) -> None:
        self.settings = settings or Settings()
        # A pydantic-ai Agent or a LangGraph graph is adapted here, as by the plugin.
        self.agent = served_agent(agent, self.settings)
        self.storage = storage
        self.principal_resolver = configured_resolver(principal_resolver, self.settings)
        # The Litestar app's Host allow-list, checked by each route here (they join the host's
        # app, whose other routes are its own business).
        self._hosts = host_policy(self.settings)
        self.sweeper = sweeper
        # A frozen reader is dropped after this long (default PAUSEMESH_SEND_TIMEOUT_SECONDS).
        self.send_timeout = (
            self.settings.send_timeout_seconds if send_timeout is None else send_timeout
        )
        self._host: RunHost | None = None
        self._limits: Limits | None = None

    @property
    def host(self) -> RunHost:
        if self._host is None:
            raise NotStartedError(_NOT_STARTED)
        return self._host

    @property
    def limits(self) -> Limits:
        if self._limits is None:
            raise NotStartedError(_NOT_STARTED)
        return self._limits

    @asynccontextmanager
    async def running(self) -> AsyncIterator[RunHost]:
        """Open the stores and the service for as long as the block runs."""
        async with open_runtime(
            self.settings, storage=self.storage, sweeper=self.sweeper
        ) as runtime:
            threads = runtime.storage.threads
            if threads is None:
                msg = "the AG-UI routes need a thread store (Storage.threads)"
                raise RuntimeError(msg)
            self._host = RunHost(
                agent=self.agent,
                service=runtime.service,
                threads=threads,
                operations=runtime.storage.operations,
                lease_seconds=runtime.settings.lease_seconds,
                keepalive_seconds=runtime.settings.keepalive_seconds,
                lease_holder=runtime.instance.holder,
                leases=runtime.leases,
                run_timeout_seconds=runtime.settings.run_timeout_seconds,
                drain=runtime.drain,
                max_thread_bytes=runtime.settings.max_thread_bytes,
                snapshot_messages=runtime.settings.snapshot_messages,
                double_texting=runtime.settings.double_texting,
                run_queue=runtime.storage.run_queue,
                queue_limit=runtime.settings.thread_queue_limit,
            )
            self._limits = Limits(runtime)
            # Threads decided elsewhere (another app's REST or approvals routes on the same
            # database) continue here too: this process sweeps the owed runs.
            host = self._host
            owed = OwedRuns(lambda: host)
            sweeper = (
                asyncio.create_task(
                    run_owed_sweeper(owed, runtime.settings.sweep_interval_seconds),
                    name="pausemesh-owed-runs",
                )
                if self.sweeper
                else None
            )
            try:
                yield self._host
            finally:
                if sweeper is not None:
                    sweeper.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await sweeper
                self._host = None
                self._limits = None

    def begin_shutdown(self) -> None:
        """Start draining, as ``PauseMeshPlugin.begin_shutdown`` does for Litestar: no new runs
        or tails (503 ``SERVER_SHUTTING_DOWN``), tails end now, in-flight runs get
        ``PAUSEMESH_SHUTDOWN_GRACE_SECONDS``. Call it on the app's event loop when the host's
        server is told to stop (before it waits for open requests)."""
        drain = None if self._host is None else self._host.drain
        if drain is not None and not drain.draining:
            _log.info("shutting down: no new runs; in-flight runs may finish")
            drain.begin(self.settings.shutdown_grace_seconds)

    @asynccontextmanager
    async def lifespan(self, _app: object) -> AsyncIterator[None]:
        """A Starlette ``lifespan=`` that runs PauseMesh."""
        async with self.running():
            yield

    def routes(self, prefix: str = "/agui") -> list[BaseRoute]:
        """``POST {prefix}``, ``POST {prefix}/connect``, ``GET {prefix}/threads`` (the list),
        ``GET|PATCH|DELETE {prefix}/threads/{id}``, ``GET {prefix}/threads/{id}/messages`` (older
        pages), ``GET {prefix}/threads/{id}/events`` and ``GET {prefix}/capabilities``."""
        prefix = prefix.rstrip("/")
        # The Litestar routes' send timeout, one guard per route: a stalled reader is dropped
        # with one warning (sse-starlette's own ``send_timeout`` raises out of the app instead).
        guard = [Middleware(SendTimeoutGuard, timeout=self.send_timeout)]
        return [
            Route(prefix, self._guard(self._run), methods=["POST"], middleware=guard),
            Route(
                f"{prefix}/connect", self._guard(self._connect), methods=["POST"], middleware=guard
            ),
            Route(f"{prefix}/threads", self._guard(self._threads), methods=["GET"]),
            # Public, like the Litestar route: it describes the agent, not a caller's data.
            Route(f"{prefix}/capabilities", self._capabilities, methods=["GET"]),
            Route(f"{prefix}/threads/{{thread_id}}", self._guard(self._thread), methods=["GET"]),
            Route(f"{prefix}/threads/{{thread_id}}", self._guard(self._rename), methods=["PATCH"]),
            Route(f"{prefix}/threads/{{thread_id}}", self._guard(self._erase), methods=["DELETE"]),
            Route(
                f"{prefix}/threads/{{thread_id}}/messages",
                self._guard(self._messages),
                methods=["GET"],
            ),
            Route(
                f"{prefix}/threads/{{thread_id}}/events",
                self._guard(self._events),
                methods=["GET"],
                middleware=guard,
            ),
        ]

    # -- endpoints ----------------------------------------------------------------------

    async def _capabilities(self, _request: Request) -> Response:
        body = agent_capabilities(self.agent, server_version=__version__)
        return JSONResponse(body, headers={"cache-control": "no-cache"})

    async def _run(self, request: Request) -> Response:
        host, limits = self.host, self.limits
        run_input = await self._input(request)
        identity = await resolve_identity(self.principal_resolver, request)
        principal = None if identity is None else identity.principal
        roles = frozenset[str]() if identity is None else identity.roles
        limits.refuse_if_draining()
        requested_policy(run_input)  # a bad doubleTexting is a 400 before the stream
        await limits.admit_work(principal, request.scope)
        await host.check_access(run_input.thread_id, principal)
        frames = counted_stream(host.run(run_input, principal, roles=roles), "run")
        return self._stream(limits.stream(principal, request.scope, frames))

    async def _connect(self, request: Request) -> Response:
        host = self.host
        run_input = await self._input(request)
        principal = await self._principal(request)
        frames = counted_stream(host.connect(run_input, principal), "connect")
        return self._stream(self.limits.stream(principal, request.scope, frames))

    async def _thread(self, request: Request) -> Response:
        host = self.host
        thread_id = check_thread_id(request.path_params["thread_id"])
        record = await host.snapshot(thread_id, await self._principal(request))
        if record.stored_bytes <= LARGE_BYTES:
            return JSONResponse(thread_snapshot(record))
        # A long thread's snapshot goes out in pieces, each write its own turn of the loop.
        pieces = await snapshot_pieces(record)
        return StreamingResponse(each(pieces), media_type="application/json")

    async def _messages(self, request: Request) -> Response:
        thread_id = check_thread_id(request.path_params["thread_id"])
        page = await self.host.messages(
            thread_id,
            await self._principal(request),
            before=request.query_params.get("before"),
            limit=_message_limit(request.query_params.get("limit")),
        )
        return Response(msgspec.json.encode(page), media_type="application/json")

    async def _threads(self, request: Request) -> Response:
        page = await self._conversations().page(
            await self._principal(request),
            limit=_page_size(request.query_params.get("limit")),
            cursor=request.query_params.get("cursor"),
        )
        return Response(msgspec.json.encode(page), media_type="application/json")

    async def _rename(self, request: Request) -> Response:
        thread_id = check_thread_id(request.path_params["thread_id"])
        body = _decode_title(await self._body(request))
        title = await self._conversations().rename(
            thread_id, await self._principal(request), body.title
        )
        return JSONResponse({"threadId": thread_id, "title": title})

    async def _erase(self, request: Request) -> Response:
        thread_id = check_thread_id(request.path_params["thread_id"])
        await self._conversations().delete(thread_id, await self._principal(request))
        return Response(status_code=204)

    async def _events(self, request: Request) -> Response:
        host = self.host
        thread_id = check_thread_id(request.path_params["thread_id"])
        cursor = replay_cursor(
            request.headers.get("last-event-id"), request.query_params.get("after")
        )
        principal = await self._principal(request)
        await host.load(thread_id, principal)
        # The guard's writer rides down with the tail: the wheel writes its idle keep-alives.
        keep_alive = keep_alive_writer(request.scope)
        tail = host.tail(thread_id, after_sequence=cursor, keep_alive=keep_alive)
        frames = counted_stream(tail, "tail")
        return self._stream(self.limits.tail(principal, request.scope, frames))

    # -- helpers ------------------------------------------------------------------------

    def _stream(self, frames: AsyncGenerator[bytes, None]) -> EventSourceResponse:
        # The run host yields finished LF-framed SSE bytes (ids and keep-alives included);
        # sse-starlette passes bytes through untouched, and its pings use the same LF framing.
        return EventSourceResponse(frames, headers=SSE_HEADERS, sep=LINE_SEPARATOR)

    def _conversations(self) -> Conversations:
        host = self.host
        return Conversations(threads=host.threads, service=host.service, clock=host.clock)

    async def _body(self, request: Request) -> bytes:
        limit = self.settings.max_payload_bytes
        body = bytearray()
        # Counted while it streams in, so an oversized body is refused before it is parsed.
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                raise PayloadTooLargeError(limit)
        return bytes(body)

    async def _input(self, request: Request) -> RunAgentInput:
        return read_run_input(await self._body(request))

    async def _principal(self, request: Request) -> str | None:
        identity = await resolve_identity(self.principal_resolver, request)
        return None if identity is None else identity.principal

    def _guard(
        self, endpoint: Callable[[Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        async def guarded(request: Request) -> Response:
            try:
                hosts = self._hosts
                if hosts is not None and not hosts.admits(request_host(request.scope)):
                    raise MisdirectedRequestError
                # The same CSRF fence as the Litestar routes (CORS is the host's middleware).
                refusal = browser_refusal(request.scope, self.settings.allowed_origins)
                if refusal is not None:
                    raise refusal
                return await endpoint(request)
            except PauseMeshError as error:
                problem = problem_for(error)
                return Response(problem.body, problem.status, headers=problem.headers)

        return guarded
