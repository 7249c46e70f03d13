"""The gateway served over streamable HTTP at ``/mcp``, and its human approval, in Litestar.

``GatewayMount`` sits next to ``PauseMeshPlugin`` (borrowing its runtime: stores, the
continuation service and the server key) like the ``/mcp`` router does: it resolves the
caller's principal (401 problem body otherwise), starts the ``Gateway`` (claiming the
worker's epoch) in the app's lifespan and hands requests to the SDK's session manager.

``mcp_approver`` asks a person through the existing MCP pause machinery (``McpPauses``):
2026-07-28 clients get ``input_required`` with sealed request state, older clients a live
``elicitation/create``; both are backed by one durable continuation, so an approval
survives a gateway restart. The stdio gateway uses the same approver and server options.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from litestar import Litestar, asgi
from litestar.config.app import AppConfig
from litestar.handlers import ASGIRouteHandler
from litestar.types import Receive, Scope, Send
from mcp.server.mcpserver import Context
from mcp.server.request_state import RequestStateSecurity
from mcp_types import InputRequiredResult

from pausemesh.core.canonical import canonical_json
from pausemesh.core.service import ContinuationService
from pausemesh.core.tokens import KeyedTokenIssuer
from pausemesh.gateway.config import GatewayConfig, Job
from pausemesh.gateway.dispatcher import Approver, Gateway, Pending
from pausemesh.gateway.lock import GatewayLock
from pausemesh.gateway.server import GatewayServer
from pausemesh.mcp.pauses import McpPauses, principal_of, roles_of
from pausemesh.mcp.state import KeyedRequestStateCodec
from pausemesh.web.mcp_mount import (
    McpRules,
    principal_binding,
    quietly_build_server,
    transport_security,
)
from pausemesh.web.protocol_mount import send_problem

__all__ = ("APPROVAL_SCHEMA", "GatewayMount", "build_gateway_server", "mcp_approver")

_ENVELOPE_TTL_SECONDS = 366 * 24 * 3600.0
_AUDIENCE = "pausemesh-gateway"

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "title": "Approve this call"}},
    "required": ["approve"],
}


def _question(job: Job, operation_id: str, arguments: dict[str, Any]) -> str:
    return (
        f"Approve {job.name}: tool {job.tool} on upstream {job.upstream}, once, with arguments"
        f" {canonical_json(arguments)} (operation {operation_id})?"
    )


def mcp_approver(pauses: McpPauses) -> Callable[[Context[Any, Any]], Approver]:
    """For each request, an approver that pauses the call until a person answers."""

    def approver_for(ctx: Context[Any, Any]) -> Approver:
        async def approve(job: Job, operation_id: str, arguments: dict[str, Any]) -> bool | Pending:
            answer = await pauses.ask(
                ctx,
                tool=job.name,
                arguments=arguments,
                message=_question(job, operation_id, arguments),
                schema=APPROVAL_SCHEMA,
                key="approval",
            )
            if isinstance(answer, InputRequiredResult):
                return Pending(answer)
            return answer.action == "accept" and (answer.content or {}).get("approve") is True

        return approve

    return approver_for


def build_gateway_server(
    gateway: Gateway,
    service: Callable[[], ContinuationService],
) -> GatewayServer:
    """The gateway's MCP server with approvals and 2026-07-28 request state sealed by the
    PauseMesh server key (any restart or replica accepts a retry)."""

    def issuer() -> KeyedTokenIssuer:
        keyed = service().keyed_issuer
        if keyed is None:
            msg = "the gateway's approvals need the server key (keyed tokens)"
            raise RuntimeError(msg)
        return keyed

    pauses = McpPauses(service)
    return quietly_build_server(
        lambda: GatewayServer.build(
            gateway,
            principal_of=principal_of,
            roles_of=roles_of,
            approver_for=mcp_approver(pauses),
            request_state_security=RequestStateSecurity(
                codec=KeyedRequestStateCodec(issuer),
                ttl=_ENVELOPE_TTL_SECONDS,
                bind_principal=principal_binding,
                audience=_AUDIENCE,
            ),
        )
    )


class GatewayMount(McpRules):
    """Adds the gateway at ``path`` to an app that also has a ``PauseMeshPlugin``."""

    __slots__ = ("_running", "config", "gateway", "lock", "path", "server", "worker")

    def __init__(
        self,
        config: GatewayConfig,
        lock: GatewayLock,
        *,
        worker: str | None = None,
        path: str = "/mcp",
    ) -> None:
        super().__init__()
        self.config = config
        self.lock = lock
        self.worker = worker
        self.path = path
        self.gateway: Gateway | None = None
        self.server: GatewayServer | None = None
        self._running = False

    @asynccontextmanager
    async def lifespan(self, _: Litestar) -> AsyncIterator[None]:
        runtime = self.pausemesh.runtime
        storage = runtime.storage
        if storage.operations is None or storage.fencing is None:
            msg = "the gateway needs stores with an operation ledger and worker fencing"
            raise RuntimeError(msg)
        gateway = Gateway(
            self.config,
            self.lock,
            ledger=storage.operations,
            fencing=storage.fencing,
            worker=self.worker,
        )
        await gateway.start()
        server = build_gateway_server(gateway, lambda: self.pausemesh.runtime.service)
        server.streamable_http_app(
            streamable_http_path="/",
            transport_security=transport_security(),
        )
        self.gateway, self.server = gateway, server
        try:
            async with server.session_manager.run():
                self._running = True
                try:
                    yield
                finally:
                    self._running = False
        finally:
            await gateway.close()

    def route_handler(self) -> ASGIRouteHandler:
        mount = self

        @asgi(mount.path, is_mount=True, copy_scope=True, middleware=[mount.stream_guard()])
        async def gateway_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
            if not mount._running or mount.server is None:
                await send_problem(send, 503, "NOT_STARTED", "the gateway has not started")
                return
            if not await mount.admit(scope, receive, send):
                return
            # The same body limit, JSON-RPC checks, rate limit and stream cap as /mcp.
            checked = await mount.read_json_body(scope, receive, send)
            if checked is None:
                return
            async with mount.stream_slot(scope, send) as admitted:
                if admitted:
                    await mount.server.session_manager.handle_request(scope, checked, send)  # type: ignore[arg-type]

        return gateway_endpoint

    def on_app_init(self, app_config: AppConfig) -> AppConfig:
        self.attach(app_config)
        app_config.route_handlers.append(self.route_handler())
        # After PauseMeshPlugin's lifespan (registered first), so the runtime is up.
        app_config.lifespan.append(self.lifespan)
        return app_config
