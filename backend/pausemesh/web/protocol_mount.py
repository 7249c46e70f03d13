"""What the protocol mounts (``/mcp``, ``/a2a``) share around their SDK's ASGI app.

Each mount is a ``ProtocolMount``: a companion plugin of the app's ``PauseMeshPlugin`` (whose
runtime, service and stores it borrows). A request is admitted like every PauseMesh route, through
the host's principal resolver; the principal is left in the ASGI scope under
``PRINCIPAL_SCOPE_KEY`` for the SDK side (``principal_in_scope``, both from
``core.principal_handoff``). What is refused before the SDK
runs gets an RFC 9457 problem body (``send_problem``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import msgspec
from litestar import Request
from litestar.config.app import AppConfig
from litestar.middleware import DefineMiddleware
from litestar.plugins import InitPlugin
from litestar.types import HTTPResponseBodyEvent, HTTPResponseStartEvent, Receive, Scope, Send

from pausemesh.core.drain import Drain
from pausemesh.core.errors import (
    NotStartedError,
    RateLimitedError,
    ShuttingDownError,
    TooManyStreamsError,
    UnauthenticatedError,
)
from pausemesh.core.principal_handoff import (
    PRINCIPAL_SCOPE_KEY,
    ROLES_SCOPE_KEY,
    principal_in_scope,
)
from pausemesh.observability.telemetry import RATE_LIMITED, count, span
from pausemesh.web.auth import resolve_identity
from pausemesh.web.body_guard import (
    BodyTooLarge,
    MalformedJsonError,
    declared_length,
    decode_json,
    has_body,
    read_body,
    replay_body,
)
from pausemesh.web.browser import browser_refusal
from pausemesh.web.limits import Limits, limit_key, send_timeout_middleware
from pausemesh.web.plugin import PauseMeshPlugin
from pausemesh.web.problems import encode_problem, problem_for, send_encoded

RATE_LIMITED_RPC_CODE = -32029
"""The JSON-RPC error code of a rate-limited call (implementation-defined server range)."""

__all__ = (
    "MESSAGE_SCOPE_KEY",
    "PRINCIPAL_SCOPE_KEY",
    "RATE_LIMITED_RPC_CODE",
    "ProtocolMount",
    "call_span",
    "jsonrpc_ids",
    "jsonrpc_methods",
    "principal_in_scope",
    "readable_id",
    "request_origin",
    "send_invalid_request",
    "send_json",
    "send_jsonrpc_error",
    "send_jsonrpc_rate_limited",
    "send_parse_error",
    "send_problem",
)


_HOST_RE = re.compile(r"^[A-Za-z0-9.\-\[\]:]{1,255}$")


def request_origin(scope: Scope) -> str:
    """``scheme://host[:port]`` as the client addressed this server (its ``Host`` header)."""
    host = next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"host"), "")
    if not _HOST_RE.match(host):
        # Absent, or not a host[:port] (it ends up quoted in a header and in JSON).
        server = scope.get("server") or ("localhost", None)
        host = server[0] if server[1] is None else f"{server[0]}:{server[1]}"
    scheme = {"ws": "http", "wss": "https"}.get(
        scope.get("scheme", "http"), scope.get("scheme", "http")
    )
    return f"{scheme}://{host}"


# Where ``read_json_body`` leaves the JSON-RPC method it saw, for the call's span.
_log = logging.getLogger("pausemesh.web")

MESSAGE_SCOPE_KEY = "pausemesh.json_body"
"""Where ``read_json_body`` leaves the request's decoded JSON body."""
_RPC_METHOD_KEY = "pausemesh.rpc_method"
_MAX_METHOD = 64


def _rpc_method(decoded: Any) -> str | None:
    """The JSON-RPC method of a decoded request body (``batch`` for a batch), never its params."""
    if isinstance(decoded, list):
        return "batch"
    method = decoded.get("method") if isinstance(decoded, dict) else None
    return method[:_MAX_METHOD] if isinstance(method, str) else None


@contextmanager
def call_span(name: str, scope: Scope) -> Iterator[None]:
    """The span of one protocol call (``mcp.call``, ``a2a.call``): its method, not its content."""
    method: Any = scope.get(_RPC_METHOD_KEY)
    with span(name, rpc_method=method if isinstance(method, str) else None):
        yield


async def send_json(
    send: Send,
    status: int,
    payload: bytes,
    media_type: str,
    extra_headers: tuple[tuple[bytes, bytes], ...] = (),
) -> None:
    headers = [
        (b"content-type", media_type.encode()),
        (b"content-length", str(len(payload)).encode()),
        *extra_headers,
    ]
    start: HTTPResponseStartEvent = {
        "type": "http.response.start",
        "status": status,
        "headers": headers,
    }
    await send(start)
    end: HTTPResponseBodyEvent = {"type": "http.response.body", "body": payload, "more_body": False}
    await send(end)


async def send_parse_error(send: Send, status: int, detail: str) -> None:
    """A JSON-RPC 2.0 parse error (-32700): the body could not be read as JSON, so no id."""
    error = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": f"Parse error: {detail}"},
    }
    await send_json(send, status, msgspec.json.encode(error), "application/json")


def jsonrpc_envelope_fault(message: Any) -> str | None:  # noqa: PLR0911 - one reason per rule
    """Why ``message`` is not one JSON-RPC 2.0 message (the MCP transport takes no batch)."""
    if not isinstance(message, dict):
        return "The body must be one JSON-RPC 2.0 message (an object)"
    if message.get("jsonrpc") != "2.0":
        return 'The message must carry "jsonrpc": "2.0"'
    if "id" in message and (
        isinstance(message["id"], bool) or not isinstance(message["id"], (str, int))
    ):
        return "The message id must be a string or an integer"
    if "method" in message:
        if not isinstance(message["method"], str):
            return "The method must be a string"
        if "params" in message and not isinstance(message["params"], dict):
            return "The params must be an object"
        return None
    if "id" in message and ("result" in message or "error" in message):
        return None
    return "The message must be a request, a notification or a response"


def readable_id(message: Any) -> str | int | None:
    """The id of one JSON-RPC message when it can be read (a string or an integer), else None:
    JSON-RPC 2.0 answers an invalid request with its id whenever the id can be read."""
    request_id = message.get("id") if isinstance(message, dict) else None
    if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
        return None
    return request_id


async def send_invalid_request(
    send: Send, status: int, detail: str, request_id: str | int | None = None
) -> None:
    """A JSON-RPC 2.0 invalid request (-32600): JSON, but not a message this endpoint takes."""
    await send_jsonrpc_error(send, status, -32600, f"Invalid Request: {detail}", request_id)


async def send_jsonrpc_error(
    send: Send,
    status: int,
    code: int,
    message: str,
    request_id: str | int | None,
    *,
    data: Any = None,
) -> None:
    """One JSON-RPC 2.0 error response answering ``request_id`` (null when unreadable)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    body = {"jsonrpc": "2.0", "id": request_id, "error": error}
    await send_json(send, status, msgspec.json.encode(body), "application/json")


def jsonrpc_ids(message: Any) -> list[Any]:
    """The ids of a JSON-RPC request or batch (strings and numbers only; others read as null)."""
    items = message if isinstance(message, list) else [message]
    return [
        item.get("id") if isinstance(item.get("id"), (str, int)) else None
        for item in items
        if isinstance(item, dict)
    ]


def jsonrpc_methods(message: Any) -> set[str]:
    """The methods a JSON-RPC request or batch calls."""
    items = message if isinstance(message, list) else [message]
    return {
        item["method"]
        for item in items
        if isinstance(item, dict) and isinstance(item.get("method"), str)
    }


async def send_jsonrpc_rate_limited(send: Send, retry_after: int, request_id: Any) -> None:
    """PAUSEMESH_RATE_LIMIT's refusal as a JSON-RPC error, under HTTP 429 and ``Retry-After``."""
    error = {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {
            "code": RATE_LIMITED_RPC_CODE,
            "message": f"Too many requests; retry after {retry_after} s",
            "data": {"code": "RATE_LIMITED", "retryAfter": retry_after},
        },
    }
    headers = ((b"retry-after", str(retry_after).encode()),)
    await send_json(send, 429, msgspec.json.encode(error), "application/json", headers)


async def send_problem(send: Send, status: int, code: str, detail: str) -> None:
    """An RFC 9457 problem straight onto the ASGI channel (the mounts answer before Litestar)."""
    await send_encoded(send, encode_problem(status, code, detail))


class ProtocolMount(InitPlugin):
    """Base of a plugin that mounts a protocol next to a ``PauseMeshPlugin``."""

    __slots__ = ("_pausemesh",)

    def __init__(self) -> None:
        self._pausemesh: PauseMeshPlugin | None = None

    def _needs_pausemesh(self) -> RuntimeError:
        return RuntimeError(f"{type(self).__name__} needs a PauseMeshPlugin in the same app")

    @property
    def pausemesh(self) -> PauseMeshPlugin:
        if self._pausemesh is None:
            raise self._needs_pausemesh()
        return self._pausemesh

    def attach(self, app_config: AppConfig) -> PauseMeshPlugin:
        """Find the app's ``PauseMeshPlugin`` (from ``on_app_init``); refuse an app without one."""
        found = [p for p in app_config.plugins if isinstance(p, PauseMeshPlugin)]
        if not found:
            raise self._needs_pausemesh()
        self._pausemesh = found[0]
        return found[0]

    async def admit(self, scope: Scope, receive: Receive, send: Send) -> bool:
        """Resolve the caller into the scope; answer 401 and return False if there is none.

        A cross-site state change or a non-JSON body is refused first (``web.browser``).
        """
        refusal = browser_refusal(scope, self.pausemesh.config.settings.allowed_origins)
        if refusal is not None:
            await send_encoded(send, problem_for(refusal))
            return False
        request: Request[Any, Any, Any] = Request(scope, receive)
        try:
            identity = await resolve_identity(self.pausemesh.config.principal_resolver, request)
        except UnauthenticatedError as error:
            await send_encoded(send, problem_for(self.unauthenticated(scope, error)))
            return False
        principal = None if identity is None else identity.principal
        scope[PRINCIPAL_SCOPE_KEY] = principal  # type: ignore[literal-required]
        scope[ROLES_SCOPE_KEY] = frozenset() if identity is None else identity.roles  # type: ignore[literal-required]
        return True

    def stream_guard(self) -> DefineMiddleware:
        """The mount's route middleware: ``PAUSEMESH_SEND_TIMEOUT_SECONDS`` for its SSE streams,
        which also end cleanly when the process drains (``SendTimeoutGuard``)."""
        plugin = self

        def drain() -> Drain | None:
            try:
                return plugin.pausemesh.runtime.drain
            except NotStartedError:
                return None

        return send_timeout_middleware(self.pausemesh.config.settings, drain=drain)

    def unauthenticated(self, scope: Scope, error: UnauthenticatedError) -> UnauthenticatedError:  # noqa: ARG002 - the MCP mount reads the scope
        """The 401 to answer (the MCP mount adds its ``resource_metadata`` to the challenge)."""
        return error

    async def read_json_body(self, scope: Scope, receive: Receive, send: Send) -> Receive | None:
        """Read a request's body within the payload limit and check it is JSON text.

        Returns the ``receive`` to hand the SDK (it replays the body), or None once the request
        has been refused here: 413 past the limit, ``refuse_malformed`` for bad JSON.
        """
        if not has_body(scope):
            return receive
        limit = self.pausemesh.config.settings.max_payload_bytes
        declared = declared_length(scope)
        try:
            if declared is not None and declared > limit:
                raise BodyTooLarge
            body = await read_body(receive, limit)
        except BodyTooLarge:
            detail = "The request body exceeds the configured limit"
            await send_problem(send, 413, "PAYLOAD_TOO_LARGE", detail)
            return None
        if body:
            try:
                message = decode_json(body)
            except MalformedJsonError as fault:
                await self.refuse_malformed(scope, send, str(fault))
                return None
            # The decoded message stays with the request: the span reads its method, the MCP
            # tasks router the message itself (the body is decoded once).
            scope[MESSAGE_SCOPE_KEY] = message  # type: ignore[literal-required]
            scope[_RPC_METHOD_KEY] = _rpc_method(message)  # type: ignore[literal-required]
            if not await self._admit_message(scope, send, message):
                return None
        return replay_body(body, receive)

    async def _admit_message(self, scope: Scope, send: Send, message: Any) -> bool:
        """The protocol's envelope check, then the rate limit; False once refused here."""
        envelope = self.envelope_fault(scope, message)
        if envelope is not None:
            await self.refuse_envelope(scope, send, envelope, message)
            return False
        return await self._admit_work(scope, send, message)

    def envelope_fault(self, scope: Scope, message: Any) -> str | None:  # noqa: ARG002 - for subclasses
        """Why a JSON body is not a message this mount's SDK takes (None: hand it over)."""
        return None

    async def refuse_envelope(
        self,
        scope: Scope,
        send: Send,
        detail: str,
        message: Any,  # noqa: ARG002 - a JSON-RPC mount answers with the message's readable id
    ) -> None:
        """Answer a JSON body that is not a message of the protocol (a mount overrides this)."""
        await self.refuse_malformed(scope, send, detail)

    async def _admit_work(self, scope: Scope, send: Send, message: Any) -> bool:
        """Count a request that starts work against ``PAUSEMESH_RATE_LIMIT``; refuse past it."""
        if not self.starts_work(scope, message):
            return True
        limits = Limits(self.pausemesh.runtime)
        try:
            await limits.admit_work(principal_in_scope(scope), scope)
        except RateLimitedError as error:
            await self.refuse_rate_limited(scope, send, error.retry_after, message)
            return False
        return True

    def opens_stream(self, scope: Scope, rpc_method: str | None) -> bool:  # noqa: ARG002 - for subclasses
        """Whether this request holds an SSE stream open (it then takes a stream slot)."""
        return False

    def is_tail(self, scope: Scope, rpc_method: str | None) -> bool:  # noqa: ARG002 - for subclasses
        """Whether the stream it opens is an idle tail (a tail slot, counted apart from runs)."""
        return False

    @asynccontextmanager
    async def stream_slot(self, scope: Scope, send: Send) -> AsyncIterator[bool]:
        """Hold one of the caller's stream slots while a request that opens an SSE stream is
        served (``PAUSEMESH_MAX_STREAMS_PER_PRINCIPAL``, or ``PAUSEMESH_MAX_TAILS_PER_PRINCIPAL``
        for an idle tail: the same counts as the AG-UI streams); yields False once it answered
        429 ``TOO_MANY_STREAMS``, or 503 ``SERVER_SHUTTING_DOWN`` while the process drains
        (nothing handed over)."""
        method: Any = scope.get(_RPC_METHOD_KEY)
        rpc_method = method if isinstance(method, str) else None
        if not self.opens_stream(scope, rpc_method):
            yield True
            return
        runtime = self.pausemesh.runtime
        if runtime.drain.draining:
            # Like a tail asked for during the drain: the client reconnects elsewhere.
            await send_encoded(send, problem_for(ShuttingDownError()))
            yield False
            return
        key = limit_key(principal_in_scope(scope), scope)
        slots = runtime.tails if self.is_tail(scope, rpc_method) else runtime.streams
        try:
            slot = slots.acquire(key)
        except TooManyStreamsError as error:
            _log.info("%s cap reached for %s", slots.what, key)
            count(RATE_LIMITED, "TOO_MANY_STREAMS")
            await send_encoded(send, problem_for(error))
            yield False
            return
        try:
            yield True
        finally:
            slot.release()

    def starts_work(self, scope: Scope, message: Any) -> bool:  # noqa: ARG002 - for subclasses
        """Whether this request starts work (a tool call, a message to an agent)."""
        return False

    async def refuse_rate_limited(
        self,
        scope: Scope,  # noqa: ARG002 - the scope tells a subclass which binding was called
        send: Send,
        retry_after: int,
        message: Any,  # noqa: ARG002 - a JSON-RPC subclass answers with the request's id
    ) -> None:
        """Answer a request past the rate limit (429 problem; JSON-RPC mounts override this)."""
        await send_encoded(send, problem_for(RateLimitedError(retry_after)))

    async def refuse_malformed(self, scope: Scope, send: Send, detail: str) -> None:  # noqa: ARG002 - the scope tells a subclass which binding was called
        """Answer a body that is not JSON text (a JSON-RPC mount overrides this)."""
        await send_problem(send, 400, "MALFORMED_JSON", detail)
