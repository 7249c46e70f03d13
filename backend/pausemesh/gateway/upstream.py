"""Client sessions to the approved upstream MCP servers (official ``mcp`` SDK, stdio or HTTP).

Each upstream gets one long-lived ``ClientSession``, opened lazily on first need and held by
a background task (the SDK's transports are anyio context managers that must be exited by
the task that entered them). A session whose transport ended (the upstream exited) is
discarded and reopened on next use; a call that merely timed out leaves the session to the
other calls.

Retries are off by construction: the gateway speaks to ``ClientSession`` directly (the
high-level ``mcp.Client`` re-sends a ``tools/call`` after a 2026-07-28 ``HEADER_MISMATCH``),
with the handshake-era ``initialize`` (no header negotiation to mismatch), and sends each
``tools/call`` exactly once with its own read timeout. A timeout is not a cancellation: the
gateway reports it as an unknown outcome and never sends the call again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
from typing import Any, Final, TextIO

from mcp.client.session import ClientSession, IncomingMessage
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    REQUEST_TIMEOUT,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    Tool,
    ToolListChangedNotification,
)

from pausemesh.core.errors import GatewayError
from pausemesh.gateway.config import Upstream

__all__ = ("MAX_CATALOG_TOOLS", "UpstreamPool", "UpstreamSession", "catalog_tool", "definition_of")

_log = logging.getLogger("pausemesh.gateway")

MAX_CATALOG_TOOLS: Final = 64
_CONNECT_TIMEOUT_SECONDS = 30.0
_LIST_TIMEOUT_SECONDS = 30.0
# How much of a failed stdio upstream's stderr its refusal quotes (``capture_stderr``).
_STDERR_TAIL_LINES = 5
_STDERR_TAIL_CHARS = 1000


def definition_of(tool: Tool) -> dict[str, Any]:
    """The pinned part of a tool definition: name, input and output schema, annotations."""
    dumped = tool.model_dump(by_alias=True, exclude_none=True, mode="json")
    return {
        key: dumped[key]
        for key in ("name", "inputSchema", "outputSchema", "annotations")
        if key in dumped
    }


def catalog_tool(tools: list[Tool], next_cursor: str | None, name: str) -> Tool:
    """The tool ``name`` from one page of ``tools/list``, refusing an unbounded catalogue."""
    if next_cursor is not None:
        msg = "the upstream's tool catalogue has more than one page"
        raise GatewayError(msg, code="CATALOG_LIMIT")
    if len(tools) > MAX_CATALOG_TOOLS:
        msg = f"the upstream lists more than {MAX_CATALOG_TOOLS} tools"
        raise GatewayError(msg, code="CATALOG_LIMIT")
    names = [tool.name for tool in tools]
    if len(set(names)) != len(names):
        msg = "the upstream lists a tool name twice"
        raise GatewayError(msg, code="CATALOG_CONFLICT")
    for tool in tools:
        if tool.name == name:
            return tool
    msg = f"the upstream has no tool {name!r}"
    raise GatewayError(msg, code="TOOL_MISSING", tool=name)


class UpstreamSession:
    """One open session to one upstream, held by its own task until ``close``.

    ``capture_stderr``: a stdio upstream's stderr goes to a file instead of this process's
    stderr, and a failed ``open`` quotes its last lines (``pausemesh gateway pin``: the
    operator sees why the upstream would not start).
    """

    def __init__(self, upstream: Upstream, *, capture_stderr: bool = False) -> None:
        self.upstream = upstream
        self._errlog: TextIO | None = None
        if capture_stderr and upstream.command is not None:
            self._errlog = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115 - closed in close()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._session: ClientSession | None = None
        # The catalogue as listed on this connection: fetched on first need, dropped on
        # ``notifications/tools/list_changed`` (counted, so a listing that was in flight when
        # the notice came is not kept), fetched again on a new connection.
        self._list_lock = asyncio.Lock()
        self._changes = 0
        self._listed: ListToolsResult | None = None

    def _transport(self) -> Any:
        upstream = self.upstream
        if upstream.url is not None:
            return streamable_http_client(upstream.url)
        assert upstream.command is not None  # noqa: S101 - config validation guarantees one of them
        parameters = StdioServerParameters(
            command=upstream.command,
            args=list(upstream.args),
            env=dict(upstream.env) if upstream.env is not None else None,
            cwd=upstream.cwd,
        )
        if self._errlog is not None:
            return stdio_client(parameters, errlog=self._errlog)
        return stdio_client(parameters)

    def _stderr_tail(self) -> str:
        """The last lines the upstream wrote to its stderr (captured), or ""."""
        if self._errlog is None:
            return ""
        self._errlog.flush()
        self._errlog.seek(0)
        lines = [line.rstrip() for line in self._errlog.read().splitlines() if line.strip()]
        tail = " | ".join(lines[-_STDERR_TAIL_LINES:])[-_STDERR_TAIL_CHARS:]
        return f"; its stderr ended with: {tail}" if tail else "; it wrote nothing to stderr"

    async def _hold(self, ready: asyncio.Future[ClientSession]) -> None:
        try:
            async with (
                self._transport() as (read, write),
                ClientSession(read, write, message_handler=self._notice) as session,
            ):
                await session.initialize()
                ready.set_result(session)
                await self._stop.wait()
        except Exception as error:  # noqa: BLE001 - any transport failure: unavailable, retried on next use
            if not ready.done():
                ready.set_exception(error)
            else:
                _log.info("upstream %s session ended: %s", self.upstream.id, type(error).__name__)

    async def open(self) -> ClientSession:
        ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._hold(ready), name=f"upstream-{self.upstream.id}")
        try:
            self._session = await asyncio.wait_for(asyncio.shield(ready), _CONNECT_TIMEOUT_SECONDS)
        except Exception as error:  # noqa: BLE001 - spawn, handshake or HTTP: all mean unavailable
            await self._stop_holding()
            cause: BaseException = error
            while isinstance(cause, BaseExceptionGroup) and len(cause.exceptions) == 1:
                cause = cause.exceptions[0]
            msg = (
                f"upstream {self.upstream.id!r} is unavailable ({type(cause).__name__})"
                f"{self._stderr_tail()}"
            )
            await self.close()
            raise GatewayError(
                msg, code="UPSTREAM_UNAVAILABLE", upstream=self.upstream.id
            ) from None
        return self._session

    @property
    def session(self) -> ClientSession:
        assert self._session is not None  # noqa: S101 - only handed out after open()
        return self._session

    @property
    def alive(self) -> bool:
        return self._task is not None and not self._task.done()

    async def _notice(self, message: IncomingMessage) -> None:
        if isinstance(message, ToolListChangedNotification):
            self._changes += 1
            self._listed = None

    async def _listing(self) -> ListToolsResult:
        """The catalogue of this connection, listed again after a ``list_changed`` notice."""
        async with self._list_lock:
            while self._listed is None:
                changes = self._changes
                listed = await asyncio.wait_for(
                    self.session.list_tools(params=PaginatedRequestParams()), _LIST_TIMEOUT_SECONDS
                )
                if self._changes == changes:
                    self._listed = listed
            return self._listed

    async def list_tool(self, name: str) -> Tool:
        """The definition of ``name`` as this connection lists it now (one page only): listed
        when the connection is made, and again after every ``list_changed`` notice."""
        try:
            listed = await self._listing()
        except Exception as error:  # noqa: BLE001 - a dead session, a timeout, a bad page alike
            msg = f"upstream {self.upstream.id!r} did not list its tools ({type(error).__name__})"
            raise GatewayError(
                msg, code="UPSTREAM_UNAVAILABLE", upstream=self.upstream.id
            ) from None
        return catalog_tool(listed.tools, listed.next_cursor, name)

    @staticmethod
    def timed_out(error: BaseException) -> bool:
        return isinstance(error, MCPError) and error.code == REQUEST_TIMEOUT

    async def call_once(
        self, name: str, arguments: dict[str, Any], read_timeout: float
    ) -> CallToolResult:
        """Send ``tools/call`` once. Raises on timeout, a closed session or an unreadable reply."""
        return await self.session.call_tool(name, arguments, read_timeout_seconds=read_timeout)

    async def _stop_holding(self) -> None:
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(self._task, 10.0)

    async def close(self) -> None:
        await self._stop_holding()
        if self._errlog is not None:
            self._errlog.close()
            self._errlog = None


class UpstreamPool:
    """The open sessions of one gateway process, one per upstream, reopened after failure."""

    def __init__(self, upstreams: dict[str, Upstream], *, capture_stderr: bool = False) -> None:
        self._upstreams = upstreams
        self._capture_stderr = capture_stderr
        self._sessions: dict[str, UpstreamSession] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def get(self, upstream_id: str) -> UpstreamSession:
        lock = self._locks.setdefault(upstream_id, asyncio.Lock())
        async with lock:
            current = self._sessions.get(upstream_id)
            if current is not None and current.alive:
                return current
            if current is not None:
                await current.close()
            fresh = UpstreamSession(
                self._upstreams[upstream_id], capture_stderr=self._capture_stderr
            )
            await fresh.open()
            self._sessions[upstream_id] = fresh
            return fresh

    async def discard(self, session: UpstreamSession) -> None:
        """Drop a session whose connection failed; the next call opens a fresh one."""
        if self._sessions.get(session.upstream.id) is session:
            del self._sessions[session.upstream.id]
        await session.close()

    async def close(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            await session.close()
