"""``PauseMeshPlugin``: the continuation API as one line in a host Litestar app.

``Litestar(plugins=[PauseMeshPlugin(PauseMeshConfig(settings=...))])`` adds the routes,
their dependencies, RFC 9457 problem bodies, the request body limit and a lifespan that
opens the stores (or uses the ones the host passes in) and runs the expiry sweeper.

Mounted inside another ASGI app (Starlette ``Mount``, FastAPI ``mount``), the host's
lifespan must enter ``litestar_app.lifespan()``; a request that arrives without it gets a
500 ``NOT_STARTED`` problem saying so, never a half-initialized store.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from litestar import Litestar, Request, Router
from litestar.config.app import AppConfig
from litestar.di import Provide
from litestar.exceptions import HTTPException
from litestar.middleware import DefineMiddleware
from litestar.openapi.spec import Components, SecurityScheme
from litestar.plugins import InitPlugin

from pausemesh.bootstrap import Runtime, open_runtime
from pausemesh.core.errors import NotStartedError, PauseMeshError
from pausemesh.core.service import ContinuationService
from pausemesh.stores.storage import Storage
from pausemesh.web.agui_routes import AguiController, agui_dependencies
from pausemesh.web.auth import resolve_identity, resolve_principal
from pausemesh.web.browser import BrowserGuard, cors_config
from pausemesh.web.config import PauseMeshConfig
from pausemesh.web.context import PauseMeshCaller
from pausemesh.web.continuations import ContinuationController
from pausemesh.web.health import healthz, readyz
from pausemesh.web.limits import Limits, SendTimeoutGuard
from pausemesh.web.problems import (
    http_exception_to_problem,
    internal_error_to_problem,
    pausemesh_error_to_problem,
    undecodable_body_to_problem,
)
from pausemesh.web.served_agent import served_agent

__all__ = ("PauseMeshConfig", "PauseMeshPlugin")

_log = logging.getLogger("pausemesh.web")

_NOT_STARTED = (
    "PauseMesh has not started: its lifespan did not run. When this app is mounted in"
    " another ASGI app, enter `app.lifespan()` from the host's lifespan."
)

_RESUME_TOKEN_SCHEME = SecurityScheme(
    type="apiKey",
    name="Authorization",
    security_scheme_in="header",
    description="`PauseMesh <resume token>`, the token returned once by create.",
)


class PauseMeshPlugin(InitPlugin):
    __slots__ = ("_runtime", "config")

    def __init__(self, config: PauseMeshConfig | None = None) -> None:
        self.config = config or PauseMeshConfig()
        self._runtime: Runtime | None = None

    @property
    def runtime(self) -> Runtime:
        """The running runtime; raises ``NotStartedError`` outside the lifespan."""
        if self._runtime is None:
            raise NotStartedError(_NOT_STARTED)
        return self._runtime

    # -- lifespan -----------------------------------------------------------------------

    @asynccontextmanager
    async def lifespan(self, _: Litestar) -> AsyncIterator[None]:
        async with open_runtime(
            self.config.settings, storage=self.config.storage, sweeper=self.config.sweeper
        ) as runtime:
            self._runtime = runtime
            try:
                yield
            finally:
                self._runtime = None

    def begin_shutdown(self) -> None:
        """Start draining (SIGTERM): no new runs or tails, tails end now, in-flight runs get
        ``PAUSEMESH_SHUTDOWN_GRACE_SECONDS``. Call it on the app's event loop; ``pausemesh
        serve`` does on SIGTERM, a host that runs the app its own way calls it itself."""
        if self._runtime is not None:
            _log.info("shutting down: no new runs; in-flight runs may finish")
            self._runtime.drain.begin(self.config.settings.shutdown_grace_seconds)

    # -- registration -------------------------------------------------------------------

    def router(self) -> Router:
        handlers: list[Any] = [ContinuationController]
        if self.config.health_routes:
            handlers += [healthz, readyz]
        # With an agent, the AG-UI controller joins below and shares these dependencies.
        # Plain closures, not bound methods: Litestar deep-copies layers when it registers
        # them, and a copied bound method would carry a copy of this plugin (never started).
        plugin = self
        config = self.config

        def service() -> ContinuationService:
            return plugin.runtime.service

        def storage() -> Storage:
            return plugin.runtime.storage

        def runtime() -> Runtime:
            return plugin.runtime

        def pausemesh_config() -> PauseMeshConfig:
            return config

        limits_cache: dict[int, Limits] = {}

        def pausemesh_limits() -> Limits:
            current = plugin.runtime
            limits = limits_cache.get(id(current))
            if limits is None:
                limits_cache.clear()
                limits = limits_cache[id(current)] = Limits(current)
            return limits

        async def principal(request: Request[Any, Any, Any]) -> str | None:
            return await resolve_principal(config.principal_resolver, request)

        async def caller(request: Request[Any, Any, Any]) -> PauseMeshCaller:
            service = plugin.runtime.service
            identity = await resolve_identity(config.principal_resolver, request)
            if identity is None:
                return PauseMeshCaller(service=service, principal=None, config=config)
            return PauseMeshCaller(
                service=service, principal=identity.principal, config=config, roles=identity.roles
            )

        extra: dict[str, Provide] = {}
        if config.agent is not None:
            handlers.append(AguiController)
            # A pydantic-ai Agent or a LangGraph graph is adapted here; a bad one fails at start.
            agent = served_agent(config.agent, config.settings)
            extra.update(agui_dependencies(runtime, agent))

        return Router(
            path=self.config.path,
            route_handlers=handlers,
            dependencies={
                "caller": Provide(caller),
                "service": Provide(service, sync_to_thread=False),
                "principal": Provide(principal),
                "pausemesh_config": Provide(pausemesh_config, sync_to_thread=False),
                "pausemesh_storage": Provide(storage, sync_to_thread=False),
                "pausemesh_runtime": Provide(runtime, sync_to_thread=False),
                "pausemesh_limits": Provide(pausemesh_limits, sync_to_thread=False),
                **extra,
            },
            exception_handlers={
                PauseMeshError: pausemesh_error_to_problem,
                HTTPException: http_exception_to_problem,
                # Raised by the JSON decoder while Litestar extracts the body, not by our code.
                UnicodeDecodeError: undecodable_body_to_problem,
                RecursionError: undecodable_body_to_problem,
                Exception: internal_error_to_problem,
            },
            # Litestar counts bytes while it streams the body in, before any parsing,
            # whether or not Content-Length is sent (chunked uploads included).
            request_max_body_size=self.config.settings.max_payload_bytes,
            middleware=[
                DefineMiddleware(
                    BrowserGuard, allowed_origins=self.config.settings.allowed_origins
                ),
                DefineMiddleware(
                    SendTimeoutGuard, timeout=self.config.settings.send_timeout_seconds
                ),
            ],
        )

    def on_app_init(self, app_config: AppConfig) -> AppConfig:
        app_config.route_handlers.append(self.router())
        if app_config.cors_config is None:
            # A host that configured CORS itself keeps its own policy.
            app_config.cors_config = cors_config(self.config.settings)
        app_config.lifespan.append(self.lifespan)
        app_config.signature_namespace.update(
            ContinuationService=ContinuationService,
            PauseMeshCaller=PauseMeshCaller,
            Runtime=Runtime,
            Storage=Storage,
        )
        if self.config.problem_details_for_app:
            # Router-level handlers never see unmatched routes (404/405); the app's do.
            app_config.exception_handlers.setdefault(HTTPException, http_exception_to_problem)
            app_config.exception_handlers.setdefault(Exception, internal_error_to_problem)
        openapi = app_config.openapi_config
        if openapi is not None:
            extra = Components(security_schemes={"pausemeshResumeToken": _RESUME_TOKEN_SCHEME})
            existing = openapi.components
            merged = [*existing, extra] if isinstance(existing, list) else [existing, extra]
            openapi.components = merged
        return app_config
