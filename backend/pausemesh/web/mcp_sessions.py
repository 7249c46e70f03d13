"""The live 2025-11-25 MCP sessions of this process that take task status notifications.

Why our own registry: the pinned SDK (``mcp`` 2.3.0) has no public way to enumerate its
sessions or to send on one from outside a request (its session manager keeps them in private
attributes). Every message of a session passes through our ``/mcp`` mount, though, so the
mount records what it sees, with nothing but ASGI:

* ``initialize`` (POST): the session id the SDK assigns (its ``mcp-session-id`` response
  header), the principal, and whether the client declared ``capabilities.tasks``;
* a task request (``tools/call`` with ``params.task``, ``tasks/*``) on a known session: the
  client speaks tasks, so it takes their notifications too;
* the session's standalone GET stream: its ASGI ``send`` is wrapped, so a notice can be
  written into the response between two of the SDK's server-sent events (only at an event
  boundary, under one lock with the SDK's own writes); the entry ends with the response;
* ``DELETE`` (answered 2xx: the SDK ended it): the session is forgotten.

A session belongs to the principal that opened it (``bind_session_owner``): the SDK's session
manager is handed the caller as its ``AuthenticatedUser``, records who opened each session and
answers any other principal 404 "Session not found", exactly as for a session that does not
exist (its GET stream, ``DELETE`` and every POST). The task messages the mount answers beside
the SDK are refused the same way first (``refused_session``: the SDK's own session table).

For each principal with at least one such stream, one follower reads the principal's task
feed (``mcp.task_feed``: the thread store's change notification, across replicas), re-reads
each hinted task (finishing a tool whose pause was answered elsewhere, e.g. over REST) and
sends ``notifications/tasks/status`` to each of the principal's streams that has not been told
that status yet. A ``tasks/result`` stream of the same session claims the same status first
(``claim``), so a session is told each status once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec
from litestar.types import Message, Receive, Scope, Send
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_REQUEST, ErrorData, JSONRPCError

from pausemesh.core.principal_handoff import principal_in_scope
from pausemesh.mcp.task_feed import TaskFeed
from pausemesh.mcp.tasks import McpTasks, TaskFinisher, TaskView
from pausemesh.web.protocol_mount import MESSAGE_SCOPE_KEY

__all__ = (
    "McpSessions",
    "SessionStream",
    "bind_session_owner",
    "refused_session",
    "send_session_not_found",
    "status_notice",
)

_log = logging.getLogger("pausemesh.mcp")

_SESSION_HEADER: Final = b"mcp-session-id"
# Sessions that end without DELETE are forgotten oldest first past this many.
_MAX_SESSIONS: Final = 4096
_RETRY_SECONDS = 1.0

Handler = Callable[[Scope, Receive, Send], Awaitable[None]]


def status_notice(view: TaskView) -> dict[str, Any]:
    """``notifications/tasks/status`` with the full task (2025-11-25)."""
    return {"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": view.to_wire()}


def _sse(message: dict[str, Any]) -> bytes:
    return b"event: message\ndata: " + msgspec.json.encode(message) + b"\n\n"


def bind_session_owner(scope: Scope) -> None:
    """Hand the SDK's session manager the resolved caller as its ``AuthenticatedUser``.

    The manager records the user that opens a session and answers a request for that session
    from any other user 404 "Session not found", as for an unknown session; without a user it
    binds nothing. Only the principal goes over (the credential stays with the resolver), as
    the SDK's ``client_id`` and ``subject``, the parts its comparison reads. An anonymous caller
    (no resolver) is left without one: every such caller is the same nobody.
    """
    principal = principal_in_scope(scope)
    if principal is None:
        return
    token = AccessToken(token="", client_id=principal, subject=principal, scopes=[])
    scope["user"] = AuthenticatedUser(token)


# The SDK's own answer for an unknown session (``streamable_http_manager``), byte for byte.
_SESSION_NOT_FOUND: Final = (
    JSONRPCError(
        jsonrpc="2.0", id=None, error=ErrorData(code=INVALID_REQUEST, message="Session not found")
    )
    .model_dump_json(by_alias=True, exclude_unset=True)
    .encode()
)


def refused_session(manager: StreamableHTTPSessionManager, scope: Scope) -> bool:
    """Whether the SDK would answer this request 404 "Session not found": it names a session
    the manager does not hold, or one another principal opened.

    For the task messages the mount answers beside the SDK, so they are refused exactly as the
    SDK refuses every other request of the session. The manager has no public lookup: its
    session table and owners are read as its ``_handle_stateful_request`` reads them (the SDK
    is pinned; ``tests/protocols/test_mcp_session_owners.py`` fails if they move).
    """
    session_id = session_id_of(scope)
    if session_id is None:
        return False
    if session_id not in manager._server_instances:  # noqa: SLF001 - see above
        return True
    user = scope.get("user")
    caller = authorization_context(user) if isinstance(user, AuthenticatedUser) else None
    return caller != manager._session_owners.get(session_id)  # noqa: SLF001 - see above


async def send_session_not_found(send: Send) -> None:
    """404 "Session not found", as the SDK answers for a session it does not hold."""
    await send(
        {
            "type": "http.response.start",
            "status": 404,
            "headers": [
                (b"content-length", str(len(_SESSION_NOT_FOUND)).encode()),
                (b"content-type", b"application/json"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": _SESSION_NOT_FOUND, "more_body": False})


def session_id_of(scope: Scope) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == _SESSION_HEADER:
            return bytes(value).decode("latin-1")
    return None


class SessionStream:
    """A session's GET stream: the SDK's writes pass through; ours go in between events."""

    def __init__(self, send: Send, scope: Scope) -> None:
        self._send = send
        self.scope = scope
        self._lock = asyncio.Lock()
        self._at_boundary = True
        self._queued: list[bytes] = []
        self.live = False

    async def sdk_send(self, message: Message) -> None:
        async with self._lock:
            if message["type"] == "http.response.start":
                self.live = message.get("status") == 200
            try:
                await self._send(message)
            except BaseException:
                self.live = False
                raise
            if message["type"] != "http.response.body":
                return
            if not message.get("more_body", False):
                self.live = False
                return
            body = bytes(message.get("body", b""))
            if body:
                self._at_boundary = body.endswith((b"\n\n", b"\r\n\r\n"))
            if self._at_boundary and self._queued:
                await self._flush()

    async def write(self, data: bytes) -> None:
        async with self._lock:
            if not self.live:
                return
            self._queued.append(data)
            if self._at_boundary:
                await self._flush()

    async def _flush(self) -> None:
        data, self._queued = b"".join(self._queued), []
        try:
            await self._send({"type": "http.response.body", "body": data, "more_body": True})
        except Exception:  # noqa: BLE001 - the client went away; the SDK sees it too
            self.live = False


@dataclass(slots=True)
class _Session:
    principal: str | None
    tasks: bool
    stream: SessionStream | None = None
    sent: dict[str, str] = field(default_factory=dict)  # task id -> last status told


class McpSessions:
    """This process's task-aware sessions and one feed follower per principal among them."""

    def __init__(
        self,
        tasks: McpTasks,
        feed: TaskFeed,
        finisher: Callable[[Scope], TaskFinisher],
    ) -> None:
        self._tasks = tasks
        self._feed = feed
        self._finisher = finisher
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._followers: dict[str | None, asyncio.Task[None]] = {}

    # -- what the mount sees --------------------------------------------------------------------

    async def handle(self, scope: Scope, receive: Receive, send: Send, sdk: Handler) -> None:
        """Pass a request to the SDK, noting sessions and streams on the way."""
        method = scope.get("method")
        if method == "GET":
            await self._serve_stream(scope, receive, send, sdk)
            return
        message = scope.get(MESSAGE_SCOPE_KEY)
        if method == "POST" and isinstance(message, dict) and message.get("method") == "initialize":
            await sdk(scope, receive, self._on_initialize(scope, message, send))
            return
        if method != "DELETE":
            await sdk(scope, receive, send)
            return
        ended = False

        async def watching(event: Message) -> None:
            nonlocal ended
            if event["type"] == "http.response.start":
                ended = 200 <= event.get("status", 0) < 300
            await send(event)

        await sdk(scope, receive, watching)
        session_id = session_id_of(scope)
        # Only a DELETE the SDK carried out ends the session: another principal's is a 404.
        if ended and session_id is not None:
            self._drop(session_id)

    def _on_initialize(self, scope: Scope, message: dict[str, Any], send: Send) -> Send:
        params = message.get("params")
        capabilities = params.get("capabilities") if isinstance(params, dict) else None
        declared = isinstance(capabilities, dict) and isinstance(capabilities.get("tasks"), dict)
        principal = principal_in_scope(scope)

        async def noting(event: Message) -> None:
            if event["type"] == "http.response.start" and event.get("status") == 200:
                for key, value in event.get("headers", ()):
                    if bytes(key).lower() == _SESSION_HEADER:
                        self._remember(bytes(value).decode("latin-1"), principal, declared)
            await send(event)

        return noting

    def _remember(self, session_id: str, principal: str | None, declared: bool) -> None:
        self._sessions[session_id] = _Session(principal, declared)
        while len(self._sessions) > _MAX_SESSIONS:
            self._sessions.popitem(last=False)

    def _session(self, scope: Scope) -> tuple[str, _Session] | None:
        """The known session a request names, if its caller is the session's principal."""
        session_id = session_id_of(scope)
        session = self._sessions.get(session_id) if session_id is not None else None
        if session_id is None or session is None:
            return None
        if session.principal != principal_in_scope(scope):
            return None
        return session_id, session

    def used_tasks(self, scope: Scope) -> str | None:
        """A task request on a known session: it takes notifications from now on. Returns the
        session id (None for a request outside a known session)."""
        found = self._session(scope)
        if found is None:
            return None
        session_id, session = found
        if not session.tasks:
            session.tasks = True
            self._follow_if_needed(session.principal)
        return session_id

    def claim(self, session_id: str | None, task_id: str, status: str) -> bool:
        """True if ``session_id`` is still to be told that the task is ``status`` (and note it
        as told); always True outside a known session."""
        session = self._sessions.get(session_id) if session_id is not None else None
        if session is None:
            return True
        if session.sent.get(task_id) == status:
            return False
        session.sent[task_id] = status
        return True

    async def _serve_stream(self, scope: Scope, receive: Receive, send: Send, sdk: Handler) -> None:
        found = self._session(scope)
        if found is None:
            await sdk(scope, receive, send)
            return
        session_id, session = found
        if session.stream is not None and session.stream.live:
            # The SDK allows one GET stream per session and refuses this one (409): the
            # registered stream stays the one that is told.
            await sdk(scope, receive, send)
            return
        stream = SessionStream(send, scope)
        session.stream = stream
        self._follow_if_needed(session.principal)
        try:
            await sdk(scope, receive, stream.sdk_send)
        finally:
            stream.live = False
            if session.stream is stream:
                session.stream = None
            self._stop_if_unneeded(session.principal)
            # The SDK refused the stream (e.g. a second one): the session itself lives on.
            if session_id in self._sessions:
                self._sessions.move_to_end(session_id)

    def _drop(self, session_id: str) -> None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            self._stop_if_unneeded(session.principal)

    # -- followers --------------------------------------------------------------------------------

    def _listening(self, principal: str | None) -> list[_Session]:
        return [
            s
            for s in self._sessions.values()
            if s.principal == principal and s.tasks and s.stream is not None
        ]

    def _follow_if_needed(self, principal: str | None) -> None:
        running = self._followers.get(principal)
        if (running is not None and not running.done()) or not self._listening(principal):
            return
        self._followers[principal] = asyncio.get_running_loop().create_task(
            self._follow(principal), name="pausemesh-mcp-task-follower"
        )

    def _stop_if_unneeded(self, principal: str | None) -> None:
        if self._listening(principal):
            return
        follower = self._followers.pop(principal, None)
        if follower is not None:
            follower.cancel()

    async def _follow(self, principal: str | None) -> None:
        while True:
            try:
                async for task_ids in self._feed.follow(principal):
                    for task_id in task_ids:
                        await self._tell(principal, task_id)
                return
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - keep following; the store may be back soon
                _log.warning("MCP task feed follower failed; retrying", exc_info=True)
                await asyncio.sleep(_RETRY_SECONDS)

    async def _tell(self, principal: str | None, task_id: str) -> None:
        listening = self._listening(principal)
        streams = [s.stream for s in listening if s.stream is not None and s.stream.live]
        if not streams:
            return
        # A pause answered elsewhere (REST, another replica) is finished here, with the
        # request context of one of the principal's streams, so the notice says how it ended.
        finish = self._finisher(streams[0].scope)
        try:
            view = await self._tasks.view(task_id, principal, finish)
        except MCPError:
            return  # not this principal's task (or gone)
        data = _sse(status_notice(view))
        for session in listening:
            stream = session.stream
            if stream is None or not stream.live:
                continue
            told = session.sent.get(task_id)
            session.sent[task_id] = view.status
            # Changes only: a task still asking (a refused answer hints too) is no news.
            if told == view.status or (told is None and view.status == "input_required"):
                continue
            await stream.write(data)

    async def close(self) -> None:
        followers, self._followers = list(self._followers.values()), {}
        for follower in followers:
            follower.cancel()
        for follower in followers:
            with contextlib.suppress(asyncio.CancelledError):
                await follower
