"""The ``/mcp`` endpoint: an official-SDK ``MCPServer`` over streamable HTTP, inside Litestar.

``McpPlugin`` sits next to ``PauseMeshPlugin`` (it borrows that plugin's runtime: the
continuation service and stores) and:

* builds an ``MCPServer`` whose ``requestState`` is sealed with the PauseMesh server key
  (``KeyedRequestStateCodec``), so a 2026-07-28 retry is accepted by any replica and after any
  restart, and bound to the caller's principal;
* mounts the SDK's streamable-HTTP session manager at ``/mcp`` (both eras on one endpoint:
  2026-07-28 requests are single exchanges, older clients get stateful sessions);
* enters the session manager in the app's lifespan (a fresh manager per lifespan, as the SDK
  allows one ``run()`` per instance).

The principal comes from the host's resolver, like every PauseMesh route; tools read it with
``pausemesh.mcp.pauses.principal_of(ctx)``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from litestar import Litestar, Request, Response, asgi, get
from litestar.config.app import AppConfig
from litestar.handlers import ASGIRouteHandler
from litestar.types import Receive, Scope, Send
from mcp.server.mcpserver import MCPServer
from mcp.server.request_state import RequestStateSecurity
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import Tool, ToolExecution

from pausemesh.core.errors import UnauthenticatedError
from pausemesh.core.tokens import KeyedTokenIssuer
from pausemesh.mcp.elicitation import McpProjectionPolicy
from pausemesh.mcp.pauses import McpPauses
from pausemesh.mcp.sdk_server import StrictNames, principal_binding, quietly_build_server
from pausemesh.mcp.state import KeyedRequestStateCodec
from pausemesh.mcp.task_feed import TaskFeed, TaskStatusObserver
from pausemesh.mcp.tasks import McpTasks, TaskSupport
from pausemesh.web.mcp_sessions import bind_session_owner
from pausemesh.web.mcp_streams import primed, resume_or_refuse, trim_header_values
from pausemesh.web.mcp_tasks import McpTaskEndpoint, declare_tasks_capability
from pausemesh.web.plugin import PauseMeshPlugin
from pausemesh.web.protocol_mount import (
    MESSAGE_SCOPE_KEY,
    ProtocolMount,
    call_span,
    jsonrpc_envelope_fault,
    jsonrpc_ids,
    jsonrpc_methods,
    readable_id,
    request_origin,
    send_invalid_request,
    send_jsonrpc_rate_limited,
    send_parse_error,
    send_problem,
)

__all__ = (
    "McpPlugin",
    "McpToolRegistrar",
    "transport_security",
)

_METADATA_PATH = "/.well-known/oauth-protected-resource"

# The SDK's envelope expiry is only an outer bound: each pause state carries its
# continuation's own deadline, checked by the tool (pausemesh.mcp.state).
_ENVELOPE_TTL_SECONDS = 366 * 24 * 3600.0
_SERVER_NAME = "pausemesh"

McpToolRegistrar = Callable[[MCPServer, McpPauses, PauseMeshPlugin], Sequence[Any] | None]
"""Registers the host's tools on the server (``server.tool()(...)``) using ``pauses``; may
return Litestar route handlers to add (e.g. the trusted callback of a URL-mode pause)."""


def transport_security() -> TransportSecuritySettings:
    """The SDK's own DNS-rebinding check, off: every PauseMesh app answers an unlisted ``Host``
    with 421 ``MISDIRECTED_REQUEST`` before a mount runs (``web.host_guard``, with
    ``PAUSEMESH_ALLOWED_HOSTS``), and ``admit`` refuses a foreign ``Origin`` (``web.browser``).
    A second list here could only disagree with those (a proxied name admitted there, 421
    here) and would answer in plain text instead of a problem body."""
    return TransportSecuritySettings(enable_dns_rebinding_protection=False)


class TaskAwareServer(StrictNames):
    """``MCPServer`` whose ``tools/list`` shows each tool's ``execution.taskSupport``.

    The SDK's tool registration has no field for it (``mcp_types.Tool`` has), so the public
    ``list_tools`` is extended; ``support`` is ``McpPauses.task_support``. The 2026-07-28 wire
    model of a tool has no ``execution`` (tasks left the core spec), so only handshake-era
    clients see it.
    """

    def __init__(
        self, *args: Any, support: Callable[[object], TaskSupport | None], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self._task_support = support

    async def list_tools(self) -> list[Tool]:
        tools = await super().list_tools()
        listed: list[Tool] = []
        for tool in tools:
            support = self._task_support(tool.name)
            if support is not None:
                execution = ToolExecution(task_support=support)
                tool = tool.model_copy(update={"execution": execution})  # noqa: PLW2901 - the listed copy
            listed.append(tool)
        return listed


class McpRules(ProtocolMount):
    """What an MCP streamable-HTTP mount refuses before its SDK sees a request: JSON-RPC
    envelopes, rate limits on ``tools/call`` and stream slots (``/mcp`` and the gateway)."""

    __slots__ = ()

    async def admit(self, scope: Scope, receive: Receive, send: Send) -> bool:
        """``ProtocolMount.admit`` (on header values trimmed of whitespace, as HTTP reads them),
        then the caller handed to the SDK as the owner of the sessions it opens: another
        principal's session id is a 404 (``bind_session_owner``)."""
        trim_header_values(scope)
        if not await super().admit(scope, receive, send):
            return False
        bind_session_owner(scope)
        return True

    async def stream_send(self, scope: Scope, send: Send) -> Send | None:
        """The ``send`` to hand the SDK: its SSE streams primed (``web.mcp_streams``); None once
        a GET resuming a request stream has been refused here."""
        if await resume_or_refuse(scope, send):
            return None
        return primed(send, scope, scope.get(MESSAGE_SCOPE_KEY))

    def opens_stream(self, scope: Scope, rpc_method: str | None) -> bool:
        # The standalone GET stream, and a task's result stream (it waits for the answer).
        return scope.get("method") == "GET" or rpc_method == "tasks/result"

    def is_tail(self, scope: Scope, rpc_method: str | None) -> bool:  # noqa: ARG002 - one binding here
        # Both wait on someone else (a server message, a person's answer): idle tails.
        return True

    def starts_work(self, scope: Scope, message: Any) -> bool:  # noqa: ARG002 - one binding here
        return "tools/call" in jsonrpc_methods(message)

    def envelope_fault(self, scope: Scope, message: Any) -> str | None:  # noqa: ARG002 - one binding here
        # The SDK answers a body that is JSON but not a JSON-RPC message with its validator's
        # own text (pydantic's, with the input echoed); this answer says it in plain words.
        return jsonrpc_envelope_fault(message)

    async def refuse_envelope(self, scope: Scope, send: Send, detail: str, message: Any) -> None:  # noqa: ARG002 - one binding here
        await send_invalid_request(send, 400, detail, readable_id(message))

    async def refuse_rate_limited(
        self,
        scope: Scope,  # noqa: ARG002 - one binding here
        send: Send,
        retry_after: int,
        message: Any,
    ) -> None:
        ids = jsonrpc_ids(message)
        await send_jsonrpc_rate_limited(send, retry_after, ids[0] if len(ids) == 1 else None)

    async def refuse_malformed(self, scope: Scope, send: Send, detail: str) -> None:  # noqa: ARG002 - one binding here
        # What the SDK itself answers for a body it cannot parse (streamable HTTP: 400).
        await send_parse_error(send, 400, detail)


class McpPlugin(McpRules):
    """Adds ``/mcp`` (under ``path``) to an app that also has a ``PauseMeshPlugin``."""

    __slots__ = (
        "_policy",
        "_registrars",
        "_running",
        "feed",
        "path",
        "pauses",
        "server",
        "tasks",
    )

    def __init__(
        self,
        *tools: McpToolRegistrar,
        path: str = "/mcp",
        policy: McpProjectionPolicy | None = None,
    ) -> None:
        """``policy`` is the trusted URL-mode policy; without it (here or in the PauseMesh
        config) URL-mode authorization fails closed."""
        super().__init__()
        self.path = path
        self._policy = policy
        self._registrars = tools
        self._running = False
        self.pauses = McpPauses(
            lambda: self.pausemesh.runtime.service,
            self._projection_policy,
            lambda: self.pausemesh.runtime.storage.threads,
        )
        self.server = quietly_build_server(
            lambda: TaskAwareServer(
                _SERVER_NAME,
                support=self.pauses.task_support,
                instructions="Tools that may pause to ask the user; every pause is durable.",
                request_state_security=RequestStateSecurity(
                    codec=KeyedRequestStateCodec(self._issuer),
                    ttl=_ENVELOPE_TTL_SECONDS,
                    bind_principal=principal_binding,
                    audience=_SERVER_NAME,
                ),
            )
        )
        declare_tasks_capability(self.server)
        self.feed = TaskFeed(
            lambda: self.pausemesh.runtime.storage.threads,
            lambda: self.pausemesh.runtime.service.clock,
            lambda: self.pausemesh.runtime.leases,
        )
        self.tasks = McpTaskEndpoint(
            McpTasks(
                lambda: self.pausemesh.runtime.service,
                lambda: self.pausemesh.runtime.storage.threads,
                self.feed.publish,
            ),
            lambda: self.server,
            KeyedRequestStateCodec(self._issuer).continuation_in,
            feed=self.feed,
            support=self.pauses.task_support,
            work=self.pauses.work_time,
        )

    def _projection_policy(self) -> McpProjectionPolicy | None:
        if self._policy is not None:
            return self._policy
        configured = self.pausemesh.config.mcp_projection_policy
        return configured if isinstance(configured, McpProjectionPolicy) else None

    def _issuer(self) -> KeyedTokenIssuer:
        issuer = self.pausemesh.runtime.service.keyed_issuer
        if issuer is None:
            msg = "the MCP router needs the server key (keyed tokens)"
            raise RuntimeError(msg)
        return issuer

    @asynccontextmanager
    async def lifespan(self, _: Litestar) -> AsyncIterator[None]:
        # A new session manager per lifespan: the SDK runs each one at most once.
        self.server.streamable_http_app(
            streamable_http_path="/",
            transport_security=transport_security(),
        )
        service = self.pausemesh.runtime.service
        observer = service.observer
        if self.pausemesh.runtime.storage.threads is not None:
            # Every transition of a task's pause (REST resume, expiry, ...) hints its owner.
            service.observer = TaskStatusObserver(observer, self.feed)
        try:
            async with self.server.session_manager.run():
                self._running = True
                try:
                    yield
                finally:
                    self._running = False
                    await self.tasks.stop_work()
                    await self.tasks.sessions.close()
        finally:
            service.observer = observer
            await self.feed.close()

    def route_handler(self) -> ASGIRouteHandler:
        plugin = self

        @asgi(plugin.path, is_mount=True, copy_scope=True, middleware=[plugin.stream_guard()])
        async def mcp_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
            if not plugin._running:
                await send_problem(send, 503, "NOT_STARTED", "the MCP endpoint has not started")
                return
            if not await plugin.admit(scope, receive, send):
                return
            checked = await plugin.read_json_body(scope, receive, send)
            streamed = None if checked is None else await plugin.stream_send(scope, send)
            if checked is None or streamed is None:
                return
            send = streamed
            # Tasks (2025-11-25) are answered here: the SDK does not route them.
            exchange = plugin.tasks.claims(scope, scope.get(MESSAGE_SCOPE_KEY))
            async with plugin.stream_slot(scope, send) as admitted:
                if not admitted:
                    return
                with call_span("mcp.call", scope):
                    if exchange is not None:
                        await plugin.tasks.handle(scope, receive, send, exchange)
                        return
                    await plugin.tasks.sessions.handle(
                        scope,
                        checked,
                        send,
                        plugin.server.session_manager.handle_request,  # type: ignore[arg-type]
                    )

        return mcp_endpoint

    def unauthenticated(self, scope: Scope, error: UnauthenticatedError) -> UnauthenticatedError:
        """With JWT auth on, the challenge names this resource's metadata (MCP authorization,
        RFC 9728 §5.1), so a client can find the authorization server to get a token from."""
        challenge = error.challenge
        if not self._publishes_metadata() or challenge is None:
            return error
        url = f"{request_origin(scope)}{_METADATA_PATH}{self.path}"
        return UnauthenticatedError(
            error.message, challenge=f'{challenge}, resource_metadata="{url}"'
        )

    def _publishes_metadata(self) -> bool:
        settings = self.pausemesh.config.settings
        return settings.auth_jwks_url is not None and settings.auth_issuer is not None

    def metadata_handlers(self) -> list[Any]:
        """``GET /.well-known/oauth-protected-resource/mcp`` (RFC 9728 §3.1: the well-known
        string goes between the host and the resource's path) and the root variant, which
        clients fall back to and which describes the whole server."""
        plugin = self

        def document(resource: str) -> Response[dict[str, Any]]:
            issuer = plugin.pausemesh.config.settings.auth_issuer
            body = {
                "resource": resource,
                "authorization_servers": [issuer],
                "bearer_methods_supported": ["header"],
                "resource_name": "PauseMesh",
            }
            return Response(body, headers={"cache-control": "public, max-age=3600"})

        @get(f"{_METADATA_PATH}{plugin.path}", include_in_schema=False)
        async def mcp_resource_metadata(
            request: Request[Any, Any, Any],
        ) -> Response[dict[str, Any]]:
            return document(request_origin(request.scope) + plugin.path)

        @get(_METADATA_PATH, include_in_schema=False)
        async def server_resource_metadata(
            request: Request[Any, Any, Any],
        ) -> Response[dict[str, Any]]:
            return document(request_origin(request.scope))

        return [mcp_resource_metadata, server_resource_metadata]

    def on_app_init(self, app_config: AppConfig) -> AppConfig:
        pausemesh = self.attach(app_config)
        for register in self._registrars:
            app_config.route_handlers.extend(register(self.server, self.pauses, pausemesh) or ())
        app_config.route_handlers.append(self.route_handler())
        if self._publishes_metadata():
            app_config.route_handlers.extend(self.metadata_handlers())
        # After PauseMeshPlugin's lifespan (registered first), so the runtime is up.
        app_config.lifespan.append(self.lifespan)
        return app_config
