"""MCP Tasks (2025-11-25) at the ``/mcp`` mount, where the pinned SDK does not route them.

The ``mcp`` SDK leaves ``tasks/*`` out of its 2025-11-25 method table and validates every
``tools/call`` result as a ``CallToolResult``, so the mount answers these messages itself
(``McpTaskEndpoint.claims`` decides which) and keeps the SDK for running the tool:

* a task-augmented ``tools/call`` (``params.task``) runs the tool once as a 2026-07-28
  single exchange through the SDK's own session manager (an internal request carrying the
  caller's principal). A pause comes back as ``input_required`` with a sealed
  ``requestState``; it is recorded as a task (``pausemesh.mcp.tasks``) and answered with a
  ``CreateTaskResult`` in ``input_required``. A call that did not pause is a completed task.
* ``tasks/get``, ``tasks/list``, ``tasks/cancel`` read the task record and its continuation.
* ``tasks/result`` waits for a terminal status (spec: it blocks). While the task is
  ``input_required`` it sends the question as ``elicitation/create`` on its event stream, with
  the related-task metadata and an id that names the task; the client's answer (a JSON-RPC
  response POSTed to the mount) is settled here by the same 2026-07-28 retry the tool already
  understands: it resumes the continuation exactly once, the tool acts once, and the result is
  recorded. ``notifications/tasks/status`` goes down that stream when the status changes.

The **tasks extension of the current revision** (``io.modelcontextprotocol/tasks``, SEP-2663)
is served here too, over the same task records and pauses, negotiated per request: a
2026-07-28 request whose ``clientCapabilities.extensions`` declares it (and ``server/discover``
offers it). A ``tools/call`` of a task-capable tool that pauses is answered with a task
(``resultType: "task"``, ``ttlMs``: the pause's lifetime); one that finishes at once with its
plain result. ``tasks/get`` polls the detailed task (its ``inputRequests`` while it asks, its
``result`` or ``error`` once it ended), ``tasks/update`` answers the question (checked against
its schema by the tool's own retry: a bad answer is -32602 and the task keeps asking; the tool
acts once), ``tasks/cancel`` cancels it; there is no ``tasks/list`` in the extension.

Everything is read from the stores on each request, so any replica answers for any task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Final

import msgspec
from litestar.types import HTTPResponseBodyEvent, HTTPResponseStartEvent, Receive, Scope, Send
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PROTOCOL_VERSION_META_KEY,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from pausemesh.core.clock import iso_millis
from pausemesh.core.errors import ContinuationNotFoundError, ProtocolAdapterError
from pausemesh.core.model import Continuation
from pausemesh.core.principal_handoff import principal_in_scope
from pausemesh.mcp.elicitation import (
    McpProjectionContext,
    McpRelatedTask,
    issue_mcp_elicitation,
)
from pausemesh.mcp.task_feed import TaskFeed
from pausemesh.mcp.tasks import (
    POLL_INTERVAL_MS,
    RELATED_TASK,
    McpTasks,
    TaskEntry,
    TaskFinisher,
    TaskSupport,
    TaskView,
)
from pausemesh.web.mcp_sessions import (
    McpSessions,
    refused_session,
    send_session_not_found,
    status_notice,
)
from pausemesh.web.protocol_mount import send_json

__all__ = ("TASKS_EXTENSION", "McpTaskEndpoint", "declare_tasks_capability")

_log = logging.getLogger("pausemesh.mcp")

_MODERN: Final = "2026-07-28"
_TASK_METHODS: Final = frozenset({"tasks/get", "tasks/result", "tasks/list", "tasks/cancel"})
TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
_EXTENSION_METHODS: Final = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
# The id of a question sent on a tasks/result stream names its task, so the answer can be
# settled by whichever replica receives it.
_ASK_PREFIX: Final = "pausemesh-task:"
_FORM_CLIENT: Final[dict[str, Any]] = {"elicitation": {"form": {}}}
# A waiting tasks/result stream re-reads its task when the owner's feed moves, and at least
# this often (a keep-alive comment goes out each time nothing moved).
_SAFETY_READ_SECONDS = 15.0


class _Exchange(msgspec.Struct, frozen=True):
    """A parsed JSON-RPC message the mount may take over."""

    body: dict[str, Any]
    # A 2026-07-28 request of the tasks extension (else a 2025-11-25 task message).
    modern: bool = False

    @property
    def method(self) -> object:
        return self.body.get("method")

    @property
    def params(self) -> dict[str, Any]:
        params = self.body.get("params")
        return params if isinstance(params, dict) else {}


def declare_tasks_capability(server: MCPServer) -> None:
    """Add ``capabilities.tasks`` to the 2025-11-25 ``initialize`` answer (list, cancel,
    task-augmented ``tools/call``); 2026-07-28 discovery stays as the SDK derives it."""
    lowlevel = server._lowlevel_server  # noqa: SLF001 - the SDK has no public hook for this capability
    derive = lowlevel.get_capabilities

    def with_tasks(*args: Any, **kwargs: Any) -> Any:
        capabilities = derive(*args, **kwargs)
        if kwargs.get("protocol_version") is not None:
            # server/discover (2026-07-28): the tasks extension, taken per request.
            extensions = {**(capabilities.extensions or {}), TASKS_EXTENSION: {}}
            return capabilities.model_copy(update={"extensions": extensions})
        return capabilities.model_copy(
            update={
                "tasks": capabilities.model_validate(
                    {"tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}}
                ).tasks
            }
        )

    setattr(lowlevel, "get_capabilities", with_tasks)  # noqa: B010 - instance override, see above


def _is_ours(message: object, support: Callable[[object], TaskSupport | None]) -> bool:
    if not isinstance(message, dict):
        return False
    method = message.get("method")
    params = message.get("params")
    if method in _TASK_METHODS:
        return True
    if method == "tools/call":
        # A task call, or a plain call of a tool that must run as a task (refused here).
        return isinstance(params, dict) and (
            "task" in params or support(params.get("name")) == "required"
        )
    answered = message.get("id")
    return method is None and isinstance(answered, str) and answered.startswith(_ASK_PREFIX)


def _declares_extension(message: dict[str, Any]) -> bool:
    """Whether a 2026-07-28 request's client declares the tasks extension."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    declared = meta.get(CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, dict) else None
    extensions = declared.get("extensions") if isinstance(declared, dict) else None
    return isinstance(extensions, dict) and TASKS_EXTENSION in extensions


def _is_extension_request(message: object, support: Callable[[object], TaskSupport | None]) -> bool:
    """A 2026-07-28 message the tasks extension answers: its methods (refused with -32021
    when the client did not declare it), a call of a task-capable tool by a declaring client,
    and a call of a task-required tool by any (-32021 without the extension)."""
    if not isinstance(message, dict):
        return False
    method, params = message.get("method"), message.get("params")
    if method in _EXTENSION_METHODS:
        return True
    if method != "tools/call" or not isinstance(params, dict):
        return False
    support_of = support(params.get("name"))
    return support_of == "required" or (support_of is not None and _declares_extension(message))


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def _header_mismatch(scope: Scope, exchange: _Exchange) -> str | None:
    """Why the routing headers disagree with the body (None: they agree or are absent).
    ``Mcp-Name`` names the tool of a ``tools/call`` and the task of ``tasks/*`` (SEP-2663);
    values are trimmed (RFC 9110 5.5)."""
    method = _header(scope, b"mcp-method")
    if method is not None and method.strip() != exchange.method:
        return "Mcp-Method header does not match the request's method"
    field = "name" if exchange.method == "tools/call" else "taskId"
    named = _header(scope, b"mcp-name")
    if named is not None and named.strip() != exchange.params.get(field):
        return f"Mcp-Name header does not match params.{field}"
    return None


def _error(request_id: object, error: MCPError) -> dict[str, Any]:
    body: dict[str, Any] = {"code": error.error.code, "message": error.error.message}
    if error.error.data is not None:
        body["data"] = error.error.data
    return {"jsonrpc": "2.0", "id": request_id, "error": body}


def _result(request_id: object, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _sse(message: dict[str, Any]) -> bytes:
    return b"event: message\ndata: " + msgspec.json.encode(message) + b"\n\n"


def _related(task_id: str) -> dict[str, Any]:
    return {RELATED_TASK: {"taskId": task_id}}


class McpTaskEndpoint:
    """Answers the task messages of 2025-11-25 clients at the ``/mcp`` mount."""

    def __init__(
        self,
        tasks: McpTasks,
        server: Callable[[], MCPServer],
        continuation_in: Callable[[str], str | None],
        *,
        feed: TaskFeed,
        support: Callable[[object], TaskSupport | None],
        work: Callable[[object], timedelta | None] = lambda _: None,
    ) -> None:
        """``continuation_in``: the pause a sealed ``requestState`` names (``mcp.state``);
        ``support``: a tool's ``execution.taskSupport`` (None: forbidden); ``work``: how long
        a tool that works without asking may take as a task (None: it is not work)."""
        self._work = work
        # The work this process runs for tasks of the extension, by task id.
        self._working: dict[str, asyncio.Task[None]] = {}
        self._tasks = tasks
        self._server = server
        self._continuation_in = continuation_in
        self._support = support
        self._feed = feed
        self.sessions = McpSessions(tasks, feed, self._finisher)

    def claims(self, scope: Scope, message: Any) -> _Exchange | None:
        """The message if it is ours: a handshake-era task request or an answer to our question
        (``message``: the body ``read_json_body`` decoded, None without one)."""
        if scope.get("method") != "POST" or not self._tasks.enabled:
            return None
        version = _header(scope, b"mcp-protocol-version")
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            modern = version == _MODERN and _is_extension_request(message, self._support)
            return _Exchange(message, modern=True) if modern else None
        return _Exchange(message) if _is_ours(message, self._support) else None

    async def handle(self, scope: Scope, receive: Receive, send: Send, exchange: _Exchange) -> None:
        if refused_session(self._server().session_manager, scope):
            # An unknown session, or another principal's: what the SDK answers on its requests.
            await send_session_not_found(send)
            return
        principal = principal_in_scope(scope)
        request_id = exchange.body.get("id")
        method = exchange.method
        if exchange.modern:
            await self._extension(scope, send, exchange, principal)
            return
        if method is None:
            await self._answered(scope, exchange, principal)
            await send_json(send, 202, b"", "application/json")
            return
        session_id = self.sessions.used_tasks(scope)
        if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
            error = MCPError(code=INVALID_REQUEST, message="A task request needs an id")
            await send_json(send, 400, msgspec.json.encode(_error(None, error)), "application/json")
            return
        if method == "tasks/result":
            await self._result(
                scope, receive, send, request_id=request_id, exchange=exchange, session=session_id
            )
            return
        try:
            result = await self._dispatch(scope, exchange, principal)
        except MCPError as error:
            reply = _error(request_id, error)
        else:
            reply = _result(request_id, result)
        await send_json(send, 200, msgspec.json.encode(reply), "application/json")

    async def _dispatch(
        self, scope: Scope, exchange: _Exchange, principal: str | None
    ) -> dict[str, Any]:
        params = exchange.params
        tasks = self._tasks
        if exchange.method == "tools/call":
            return {"task": (await self._call(scope, params, principal)).to_wire()}
        if exchange.method == "tasks/get":
            finish = self._finisher(scope)
            return (await tasks.view(params.get("taskId"), principal, finish)).to_wire()
        if exchange.method == "tasks/cancel":
            return (await tasks.cancel(params.get("taskId"), principal)).to_wire()
        views, after = await tasks.list(principal, params.get("cursor"))
        listed: dict[str, Any] = {"tasks": [view.to_wire() for view in views]}
        if after is not None:
            listed["nextCursor"] = after
        return listed

    # -- tools/call with params.task --------------------------------------------------------

    async def _call(self, scope: Scope, params: dict[str, Any], principal: str | None) -> TaskView:
        name, arguments, task = params.get("name"), params.get("arguments"), params.get("task")
        if not isinstance(name, str) or not name:
            raise MCPError(code=INVALID_PARAMS, message="params.name must be a tool name")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise MCPError(code=INVALID_PARAMS, message="params.arguments must be an object")
        if task is None and "task" not in params:
            raise MCPError(  # the spec's answer for a required tool called without a task
                code=METHOD_NOT_FOUND, message="This tool requires task-augmented invocation"
            )
        ttl = task.get("ttl") if isinstance(task, dict) else None
        if not isinstance(task, dict) or not (ttl is None or type(ttl) is int):
            raise MCPError(code=INVALID_PARAMS, message="params.task must be {ttl?: integer}")
        if ttl is not None and not 0 <= ttl <= self._tasks.max_ttl_ms:
            # A deadline the client sets, capped like REST expiresAt (INVALID_EXPIRY there).
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"params.task.ttl must be 0 to {self._tasks.max_ttl_ms} milliseconds"
                " (PAUSEMESH_MAX_PAUSE_TTL_SECONDS)",
            )
        if self._support(name) is None:
            raise MCPError(  # execution.taskSupport absent, i.e. forbidden (spec: -32601)
                code=METHOD_NOT_FOUND,
                message="This tool does not support task-augmented invocation",
            )
        outcome = await self._run_tool(scope, {"name": name, "arguments": arguments})
        result = outcome.get("result")
        if result is None:
            raise _as_error(outcome.get("error"))
        entry = TaskEntry(tool=name, arguments=arguments)
        if result.get("resultType") == "input_required":
            entry = _paused(entry, result, self._continuation_in)
        else:
            entry = msgspec.structs.replace(entry, result=_call_tool_result(result))
        return await self._tasks.open(principal, entry)

    # -- the 2026-07-28 tasks extension -------------------------------------------------------

    async def _extension(
        self, scope: Scope, send: Send, exchange: _Exchange, principal: str | None
    ) -> None:
        request_id = exchange.body.get("id")
        if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
            error = MCPError(code=INVALID_REQUEST, message="A task request needs an id")
            await send_json(send, 400, msgspec.json.encode(_error(None, error)), "application/json")
            return
        params = exchange.params
        mismatch = _header_mismatch(scope, exchange)
        if mismatch is not None:
            # What the SDK answers on the requests it routes (SEP-2243): HTTP 400, -32020.
            refused = MCPError(code=HEADER_MISMATCH, message=mismatch)
            body = msgspec.json.encode(_error(request_id, refused))
            await send_json(send, 400, body, "application/json")
            return
        try:
            if not _declares_extension(exchange.body):
                raise MCPError(
                    code=MISSING_REQUIRED_CLIENT_CAPABILITY,
                    message=f"This request needs the {TASKS_EXTENSION} extension",
                    data={"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
                )
            if exchange.method == "tools/call":
                result = await self._extension_call(scope, params, principal)
            elif exchange.method == "tasks/get":
                view = await self._tasks.view(
                    params.get("taskId"), principal, self._finisher(scope)
                )
                result = {**await self._detailed(view, principal), "resultType": "complete"}
            elif exchange.method == "tasks/update":
                await self._update(scope, params, principal)
                result = {"resultType": "complete"}
            else:
                await self._cancel(params.get("taskId"), principal)
                result = {"resultType": "complete"}
        except MCPError as error:
            reply = _error(request_id, error)
        else:
            reply = _result(request_id, result)
        await send_json(send, 200, msgspec.json.encode(reply), "application/json")

    async def _extension_call(
        self, scope: Scope, params: dict[str, Any], principal: str | None
    ) -> dict[str, Any]:
        """Run the tool; a pause makes it a task (``CreateTaskResult``), else its result."""
        name, arguments = params.get("name"), params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise MCPError(code=INVALID_PARAMS, message="params.arguments must be an object")
        work = self._work(name)
        if work is not None:
            return await self._start_work(scope, str(name), arguments, work, principal)
        outcome = await self._run_tool(scope, {"name": name, "arguments": arguments})
        result = outcome.get("result")
        if result is None:
            raise _as_error(outcome.get("error"))
        if result.get("resultType") != "input_required":
            return dict(result)
        entry = _paused(
            TaskEntry(tool=str(name), arguments=arguments), result, self._continuation_in
        )
        entry = msgspec.structs.replace(entry, input_requests=result.get("inputRequests"))
        view = await self._tasks.open(principal, entry)
        return {**await self._task(view, principal), "resultType": "task"}

    async def _start_work(
        self,
        scope: Scope,
        name: str,
        arguments: dict[str, Any],
        work: timedelta,
        principal: str | None,
    ) -> dict[str, Any]:
        """A ``working`` task, recorded before the answer (``tasks/get`` resolves at once),
        while this process runs the tool and records its outcome."""
        now = self._tasks.now()
        entry = TaskEntry(tool=name, arguments=arguments, work_until=(now + work).isoformat())
        view = await self._tasks.open(principal, entry, now)
        task_id = view.task_id

        async def run() -> None:
            try:
                outcome = await self._run_tool(scope, {"name": name, "arguments": arguments})
                result = outcome.get("result")
                if isinstance(result, dict) and result.get("resultType") != "input_required":
                    finished = msgspec.structs.replace(entry, result=_call_tool_result(result))
                else:
                    error = outcome.get("error")
                    if not isinstance(error, dict):
                        error = {"code": INTERNAL_ERROR, "message": "work cannot ask a question"}
                    finished = msgspec.structs.replace(entry, error=error)
                await self._tasks.settle(task_id, principal, finished)
            except Exception:  # noqa: BLE001 - the task ends failed at its time; say why here
                _log.warning(
                    "MCP work task %s failed to record its outcome", task_id, exc_info=True
                )
            finally:
                self._working.pop(task_id, None)

        self._working[task_id] = asyncio.ensure_future(run())
        return {**await self._task(view, principal), "resultType": "task"}

    async def stop_work(self) -> None:
        """At shutdown: the work still running stops (its tasks end failed at their time)."""
        running = list(self._working.values())
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)

    async def _cancel(self, task_id: object, principal: str | None) -> None:
        """``tasks/cancel`` is an ack only (SEP-2663): a task that already ended, or whose
        question was answered first, is left as it is; ``tasks/get`` shows how it ended. Only
        an unknown task id is refused."""
        view = await self._tasks.view(task_id, principal)
        if view.status in ("completed", "failed", "cancelled"):
            return
        with contextlib.suppress(MCPError):
            await self._tasks.cancel(task_id, principal)
        running = self._working.get(view.task_id)
        if running is not None:  # this process runs it: stop it (elsewhere it is dropped)
            running.cancel()

    async def _task(self, view: TaskView, principal: str | None) -> dict[str, Any]:
        """The extension's ``Task``: ``ttlMs`` is the pause's lifetime from the task's creation."""
        ttl_ms: int | None = None
        if view.entry.work_until is not None:
            until = datetime.fromisoformat(view.entry.work_until)
            ttl_ms = max(0, int((until - view.created_at).total_seconds() * 1000))
        elif view.entry.continuation_id is not None:
            with contextlib.suppress(ContinuationNotFoundError):
                pause = await self._tasks.continuation(view.entry.continuation_id, principal)
                ttl_ms = max(0, int((pause.expires_at - view.created_at).total_seconds() * 1000))
        tool_error = _tool_error(view)
        task: dict[str, Any] = {
            "taskId": view.task_id,
            # A tool that ran and reported an error completed (SEP-2663: ``failed`` is for
            # protocol errors); the 2025-11-25 form calls it failed.
            "status": "completed" if tool_error else view.status,
            "createdAt": iso_millis(view.created_at),
            "lastUpdatedAt": iso_millis(view.updated_at),
            "ttlMs": ttl_ms,
            "pollIntervalMs": POLL_INTERVAL_MS,
        }
        if view.message is not None and not tool_error:
            task["statusMessage"] = view.message
        return task

    async def _detailed(self, view: TaskView, principal: str | None) -> dict[str, Any]:
        """The ``DetailedTask`` variant of the task's status."""
        task = await self._task(view, principal)
        entry = view.entry
        if view.status == "input_required":
            task["inputRequests"] = entry.input_requests or await self._input_requests(
                view, principal
            )
        elif task["status"] == "completed" and entry.result is not None:
            task["result"] = entry.result
        elif view.status == "failed":
            task["error"] = entry.error or {
                "code": INTERNAL_ERROR,
                "message": view.message or "The task failed.",
            }
        return task

    async def _input_requests(self, view: TaskView, principal: str | None) -> dict[str, Any]:
        """A 2025-11-25 task's question as ``inputRequests`` (its record kept none)."""
        request = await self._question(view, principal)
        if request is None:
            return {}
        question = {"method": request["method"], "params": request["params"]}
        return {view.entry.key or "question": question}

    async def _update(self, scope: Scope, params: dict[str, Any], principal: str | None) -> None:
        """``tasks/update``: the answer to the outstanding question, settled once. Keys that
        name no outstanding question (unknown, or answered already) are ignored (SEP-2663):
        the ack says nothing, ``tasks/get`` shows the task."""
        task_id = params.get("taskId")
        view = await self._tasks.view(task_id, principal)
        key = view.entry.key
        responses = params.get("inputResponses")
        if not isinstance(responses, dict):
            raise MCPError(code=INVALID_PARAMS, message="params.inputResponses must be an object")
        if view.status != "input_required" or key is None or key not in responses:
            return
        response = responses[key]
        if not isinstance(response, dict):
            raise MCPError(
                code=INVALID_PARAMS, message=f"inputResponses[{key!r}] must be an object"
            )
        finished = await self._resume(scope, view.entry, response)
        if finished.error is not None and finished.error.get("code") == INVALID_PARAMS:
            await self._tasks.refused(view.task_id, principal)  # still asking
            raise _as_error(finished.error)
        await self._tasks.settle(view.task_id, principal, finished)

    # -- tasks/result -------------------------------------------------------------------------

    async def _result(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        *,
        request_id: str | int,
        exchange: _Exchange,
        session: str | None,
    ) -> None:
        principal = principal_in_scope(scope)
        task_id = exchange.params.get("taskId")
        finish = self._finisher(scope)
        try:
            view = await self._tasks.view(task_id, principal, finish)
        except MCPError as error:
            await send_json(
                send, 200, msgspec.json.encode(_error(request_id, error)), "application/json"
            )
            return
        if view.status in ("completed", "failed", "cancelled"):
            reply = self._final(request_id, view)
            await send_json(send, 200, msgspec.json.encode(reply), "application/json")
            return
        # Not terminal: stream (questions, status notices), then the result when it comes.
        start: HTTPResponseStartEvent = {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
        }
        await send(start)
        gone = asyncio.ensure_future(_disconnected(receive))
        try:
            await self._stream_until_terminal(
                send,
                request_id=request_id,
                view=view,
                finish=finish,
                gone=gone,
                principal=principal,
                session=session,
            )
        finally:
            gone.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await gone

    async def _stream_until_terminal(
        self,
        send: Send,
        *,
        request_id: str | int,
        view: TaskView,
        finish: TaskFinisher,
        gone: asyncio.Future[None],
        principal: str | None,
        session: str | None,
    ) -> None:
        asked = -1  # the refusal count the question was last asked at
        last = view.status
        # Every change of the task hints its owner's feed (mcp.task_feed): wait on that, not
        # on a timer. The position is taken before the re-read, so no change falls between.
        after = await self._feed.head(principal)
        view = await self._tasks.view(view.task_id, principal, finish)
        while view.status not in ("completed", "failed", "cancelled"):
            if view.status == "input_required" and asked < view.entry.refusals:
                question = await self._question(view, principal)
                if question is not None:
                    await _chunk(send, _sse(question))
                asked = view.entry.refusals
            moved = asyncio.ensure_future(self._feed.wait(principal, after, _SAFETY_READ_SECONDS))
            waiting: set[asyncio.Future[Any]] = {gone, moved}
            try:
                await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not moved.done():
                    moved.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await moved
            if gone.done():
                return
            if moved.cancelled() or moved.exception() is not None or not moved.result():
                # Nothing moved (or the store could not say): keep the stream alive, re-read.
                await _chunk(send, b": ping\n\n")
            after = await self._feed.head(principal)
            view = await self._tasks.view(view.task_id, principal, finish)
            if view.status != last:
                last = view.status
                # Unless the session's GET stream was told already (McpSessions).
                if self.sessions.claim(session, view.task_id, view.status):
                    await _chunk(send, _sse(status_notice(view)))
        await _chunk(send, _sse(self._final(request_id, view)), more=False)

    def _final(self, request_id: str | int, view: TaskView) -> dict[str, Any]:
        entry = view.entry
        if entry.result is not None:
            return _result(request_id, {**entry.result, "_meta": _related(view.task_id)})
        if entry.error is not None:
            return _error(request_id, _as_error(entry.error))
        if view.status == "cancelled":
            error = MCPError(
                code=INVALID_PARAMS,
                message="Task was cancelled",
                data={"taskId": view.task_id, "status": "cancelled"},
            )
            return _error(request_id, error)
        failed = {
            "content": [{"type": "text", "text": view.message or "The task failed."}],
            "isError": True,
            "_meta": _related(view.task_id),
        }
        return _result(request_id, failed)

    async def _question(self, view: TaskView, principal: str | None) -> dict[str, Any] | None:
        """The pause as ``elicitation/create`` for the task's stream (None if it settled)."""
        cid = view.entry.continuation_id
        if cid is None:
            return None
        try:
            continuation = await self._tasks.continuation(cid, principal)
            context = McpProjectionContext(
                client_capabilities=_FORM_CLIENT,
                request_id=f"{_ASK_PREFIX}{view.task_id}",
                related_task=McpRelatedTask(task_id=view.task_id),
            )
            request, _receipt = issue_mcp_elicitation(continuation, context)
        except (ContinuationNotFoundError, ProtocolAdapterError):
            return None
        return request

    # -- the client's answer to our question --------------------------------------------------

    async def _answered(self, scope: Scope, exchange: _Exchange, principal: str | None) -> None:
        """Settle the answer POSTed for a task's question; the stream reports the outcome.

        A bad answer leaves the task ``input_required`` (the answer is checked by the tool's
        own retry path, which refuses it without resuming).
        """
        answer_id = exchange.body.get("id")
        assert isinstance(answer_id, str)  # noqa: S101 - claims() checked it
        task_id = answer_id.removeprefix(_ASK_PREFIX)
        response = exchange.body.get("result")
        if not isinstance(response, dict):
            response = {"action": "cancel"}  # the client failed to answer: the pause ends
        with contextlib.suppress(MCPError):
            view = await self._tasks.view(task_id, principal)
            if view.status != "input_required":
                return
            finished = await self._resume(scope, view.entry, response)
            if finished.error is not None and finished.error.get("code") == INVALID_PARAMS:
                await self._tasks.refused(task_id, principal)  # still asking: ask again
                return
            await self._tasks.settle(task_id, principal, finished)

    # -- running the tool through the SDK -------------------------------------------------------

    def _finisher(self, scope: Scope) -> TaskFinisher:
        async def finish(entry: TaskEntry, continuation: Continuation) -> TaskEntry:
            response: dict[str, Any] | None = None
            if continuation.status == "resumed":
                payload = continuation.resume_payload
                response = {
                    "action": "accept",
                    "content": payload if isinstance(payload, dict) else {},
                }
            return await self._resume(scope, entry, response)

        return finish

    async def _resume(
        self, scope: Scope, entry: TaskEntry, response: dict[str, Any] | None
    ) -> TaskEntry:
        """The tool's retry with the task's ``requestState`` (and ``response`` to its question)."""
        params: dict[str, Any] = {
            "name": entry.tool,
            "arguments": entry.arguments,
            "requestState": entry.request_state,
        }
        if response is not None and entry.key is not None:
            params["inputResponses"] = {entry.key: response}
        outcome = await self._run_tool(scope, params)
        result = outcome.get("result")
        if isinstance(result, dict) and result.get("resultType") != "input_required":
            return msgspec.structs.replace(entry, result=_call_tool_result(result))
        error = outcome.get("error")
        if not isinstance(error, dict):
            error = {"code": INTERNAL_ERROR, "message": "the tool asked again after its answer"}
        return msgspec.structs.replace(entry, error=error)

    async def _run_tool(self, scope: Scope, params: dict[str, Any]) -> dict[str, Any]:
        """One ``tools/call`` as a 2026-07-28 single exchange through the SDK, for this caller."""
        meta = {PROTOCOL_VERSION_META_KEY: _MODERN, CLIENT_CAPABILITIES_META_KEY: _FORM_CLIENT}
        body = msgspec.json.encode(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {**{k: v for k, v in params.items() if v is not None}, "_meta": meta},
            }
        )
        kept = [
            (key, value)
            for key, value in scope.get("headers", ())
            if key.lower() in (b"host", b"origin", b"authorization", b"cookie")
        ]
        headers = [
            *kept,
            (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"),
            (b"content-length", str(len(body)).encode()),
            (b"mcp-protocol-version", _MODERN.encode()),
            (b"mcp-method", b"tools/call"),
            (b"mcp-name", str(params["name"]).encode()),
        ]
        inner: dict[str, Any] = {**scope, "headers": headers, "method": "POST"}
        delivered = asyncio.Event()
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await delivered.wait()
            return {"type": "http.disconnect"}

        chunks: list[bytes] = []

        async def capture(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False):
                    delivered.set()

        manager = self._server().session_manager
        await manager.handle_request(inner, receive, capture)  # type: ignore[arg-type]
        return _reply_of(b"".join(chunks))


async def _chunk(send: Send, data: bytes, *, more: bool = True) -> None:
    event: HTTPResponseBodyEvent = {"type": "http.response.body", "body": data, "more_body": more}
    await send(event)


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _reply_of(raw: bytes) -> dict[str, Any]:
    """The JSON-RPC response in a JSON or event-stream body."""
    text = raw.strip()
    if text.startswith(b"{"):
        decoded = msgspec.json.decode(text)
        return decoded if isinstance(decoded, dict) else {}
    for line in reversed(raw.splitlines()):
        if line.startswith(b"data:"):
            with contextlib.suppress(msgspec.DecodeError):
                decoded = msgspec.json.decode(line[5:].strip())
                if isinstance(decoded, dict) and ("result" in decoded or "error" in decoded):
                    return decoded
    return {"error": {"code": INTERNAL_ERROR, "message": "the tool call gave no answer"}}


def _call_tool_result(result: dict[str, Any]) -> dict[str, Any]:
    """The 2025-11-25 ``CallToolResult`` in a 2026-07-28 answer (no result type, no server
    stamp: ``tasks/result`` adds the related-task metadata)."""
    return {key: value for key, value in result.items() if key not in ("resultType", "_meta")}


def _paused(
    entry: TaskEntry, result: dict[str, Any], continuation_in: Callable[[str], str | None]
) -> TaskEntry:
    requests = result.get("inputRequests")
    state = result.get("requestState")
    if not isinstance(requests, dict) or len(requests) != 1 or not isinstance(state, str):
        raise MCPError(code=INTERNAL_ERROR, message="the tool paused in a way tasks cannot carry")
    key = next(iter(requests))
    cid = continuation_in(state)
    if cid is None:
        raise MCPError(code=INTERNAL_ERROR, message="the tool paused without a durable pause")
    return msgspec.structs.replace(entry, continuation_id=cid, request_state=state, key=key)


def _tool_error(view: TaskView) -> bool:
    """The tool ran and reported an error (``isError``), as opposed to a protocol error."""
    entry = view.entry
    return view.status == "failed" and entry.error is None and entry.result is not None


def _as_error(error: object) -> MCPError:
    if isinstance(error, dict) and isinstance(error.get("code"), int):
        return MCPError(
            code=error["code"], message=str(error.get("message", "")), data=error.get("data")
        )
    return MCPError(code=INTERNAL_ERROR, message="the tool call failed")
