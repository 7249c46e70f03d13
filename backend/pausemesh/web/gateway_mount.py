"""The gateway served over streamable HTTP at ``/mcp``, in Litestar.

``GatewayMount`` sits next to ``PauseMeshPlugin`` (borrowing its runtime: stores, the
continuation service and the server key) like the ``/mcp`` router does: it resolves the
caller's principal (401 problem body otherwise), starts the ``Gateway`` (claiming the
worker's epoch) in the app's lifespan and hands requests to the SDK's session manager.
The server itself, with a person's approval of a job, is ``gateway.mcp_compose``'s, the
same one the stdio gateway runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from litestar import Litestar, asgi
from litestar.config.app import AppConfig
from litestar.handlers import ASGIRouteHandler
from litestar.types import Receive, Scope, Send

from pausemesh.gateway.config import GatewayConfig
from pausemesh.gateway.dispatcher import Gateway
from pausemesh.gateway.lock import GatewayLock
from pausemesh.gateway.mcp_compose import build_gateway_server
from pausemesh.gateway.server import GatewayServer
from pausemesh.web.mcp_mount import McpRules, transport_security
from pausemesh.web.protocol_mount import send_problem

__all__ = ("GatewayMount",)


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
            webhooks=runtime.service.webhooks,
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
            streamed = None if checked is None else await mount.stream_send(scope, send)
            if checked is None or streamed is None:
                return
            async with mount.stream_slot(scope, send) as admitted:
                if admitted:
                    await mount.server.session_manager.handle_request(scope, checked, streamed)  # type: ignore[arg-type]

        return gateway_endpoint

    def on_app_init(self, app_config: AppConfig) -> AppConfig:
        self.attach(app_config)
        app_config.route_handlers.append(self.route_handler())
        # After PauseMeshPlugin's lifespan (registered first), so the runtime is up.
        app_config.lifespan.append(self.lifespan)
        return app_config
