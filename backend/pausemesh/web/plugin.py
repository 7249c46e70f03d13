"""``PauseMeshPlugin``: the continuation API as one line in a host Litestar app.

``Litestar(plugins=[PauseMeshPlugin(PauseMeshConfig(settings=...))])`` adds the routes,
their dependencies, RFC 9457 problem bodies, the request body limit and a lifespan that
opens the stores (or uses the ones the host passes in) and runs the expiry sweeper.

Mounted inside another ASGI app (Starlette ``Mount``, FastAPI ``mount``), the host's
lifespan must enter ``litestar_app.lifespan()``; a request that arrives without it gets a
500 ``NOT_STARTED`` problem saying so, never a half-initialized store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
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
from pausemesh.observability.telemetry import set_metrics
from pausemesh.stores.storage import Storage
from pausemesh.web.agui_capabilities import capabilities_route
from pausemesh.web.agui_routes import AguiController, agui_dependencies, host_factory
from pausemesh.web.approvals import ApprovalController
from pausemesh.web.auth import configured_resolver, resolve_identity, resolve_principal
from pausemesh.web.browser import BrowserGuard, cors_config
from pausemesh.web.config import PauseMeshConfig
from pausemesh.web.context import PauseMeshCaller
from pausemesh.web.continuations import ContinuationController
from pausemesh.web.decision_links import DecisionLinkController
from pausemesh.web.health import healthz, readyz
from pausemesh.web.host_guard import HostGuard, host_policy
from pausemesh.web.limits import Limits, send_timeout_middleware
from pausemesh.web.metrics import PrometheusMetrics, metrics_route
from pausemesh.web.observability import TelemetryMiddleware
from pausemesh.web.owed import OwedRuns, run_owed_sweeper
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
    name="PauseMesh-Token",
    security_scheme_in="header",
    description=(
        "The resume token returned once by create. Without bearer identity it may also be"
        " sent as `Authorization: PauseMesh <token>`."
    ),
)


class PauseMeshPlugin(InitPlugin):
    __slots__ = ("_owed", "_runtime", "config", "metrics")

    def __init__(self, config: PauseMeshConfig | None = None) -> None:
        config = config or PauseMeshConfig()
        # The host's resolver, or the bearer one PAUSEMESH_AUTH_* configure: every route and
        # mount reads ``config.principal_resolver``, so this is the one place it is chosen.
        resolver = configured_resolver(config.principal_resolver, config.settings)
        self.config = replace(config, principal_resolver=resolver)
        self._runtime: Runtime | None = None
        # This app's own registry (PAUSEMESH_METRICS=1), never prometheus_client's global one.
        self.metrics = PrometheusMetrics() if self.config.settings.metrics else None
        # Set by ``router()``: continues threads decided elsewhere (a no-op without an agent).
        self._owed = OwedRuns(None)

    @property
    def runtime(self) -> Runtime:
        """The running runtime; raises ``NotStartedError`` outside the lifespan."""
        if self._runtime is None:
            raise NotStartedError(_NOT_STARTED)
        return self._runtime

    # -- lifespan -----------------------------------------------------------------------

    @asynccontextmanager
    async def lifespan(self, _: Litestar) -> AsyncIterator[None]:
        if self.metrics is not None:
            # Background tasks started from here (the sweeper, the SQLite writer, the protocol
            # mounts' task groups) inherit this context, so they count into this app's registry.
            set_metrics(self.metrics)
        async with open_runtime(
            self.config.settings, storage=self.config.storage, sweeper=self.config.sweeper
        ) as runtime:
            self._runtime = runtime
            sweeper: asyncio.Task[None] | None = None
            if self.config.sweeper and self._owed.enabled:
                sweeper = asyncio.create_task(
                    run_owed_sweeper(self._owed, self.config.settings.sweep_interval_seconds),
                    name="pausemesh-owed-runs",
                )
            try:
                yield
            finally:
                if sweeper is not None:
                    sweeper.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await sweeper
                await self._owed.close()
                self._runtime = None

    def begin_shutdown(self) -> None:
        """Start draining (SIGTERM): no new runs or tails, tails end now, in-flight runs get
        ``PAUSEMESH_SHUTDOWN_GRACE_SECONDS``. Call it on the app's event loop; ``pausemesh
        serve`` does on SIGTERM, a host that runs the app its own way calls it itself."""
        # A second signal (Ctrl-C reaches every worker, then their supervisor's SIGTERM) is
        # neither logged again nor moves the deadline.
        if self._runtime is not None and not self._runtime.drain.draining:
            _log.info("shutting down: no new runs; in-flight runs may finish")
            self._runtime.drain.begin(self.config.settings.shutdown_grace_seconds)

    # -- registration -------------------------------------------------------------------

    def router(self) -> Router:
        handlers: list[Any] = [ContinuationController, ApprovalController, DecisionLinkController]
        if self.config.health_routes:
            handlers += [healthz, readyz]
            if self.metrics is not None:
                handlers.append(metrics_route)
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

        def pausemesh_metrics() -> PrometheusMetrics | None:
            return plugin.metrics

        limits_cache: dict[int, Limits] = {}

        def pausemesh_limits() -> Limits:
            current = plugin.runtime
            limits = limits_cache.get(id(current))
            if limits is None:
                limits_cache.clear()
                limits = limits_cache[id(current)] = Limits(current)
            return limits

        extra: dict[str, Provide] = {}
        if config.agent is not None:
            # The only streaming routes here: the SSE send timeout wraps them alone, so a
            # plain JSON request does not pay for a send and receive watcher it never needs.
            handlers.append(
                Router(
                    path="/",
                    route_handlers=[AguiController],
                    middleware=[send_timeout_middleware(config.settings)],
                )
            )
            # A pydantic-ai Agent or a LangGraph graph is adapted here; a bad one fails at start.
            agent = served_agent(config.agent, config.settings)
            handlers.append(capabilities_route(agent))
            hosts = host_factory(runtime, agent)
            extra.update(agui_dependencies(hosts))
            self._owed = OwedRuns(hosts)
        owed = self._owed

        def pausemesh_owed() -> OwedRuns:
            return owed

        async def principal(request: Request[Any, Any, Any]) -> str | None:
            return await resolve_principal(config.principal_resolver, request)

        async def caller(request: Request[Any, Any, Any]) -> PauseMeshCaller:
            service = plugin.runtime.service
            limits = pausemesh_limits()
            identity = await resolve_identity(config.principal_resolver, request)
            if identity is None:
                return PauseMeshCaller(
                    service=service, principal=None, config=config, limits=limits, owed=owed
                )
            return PauseMeshCaller(
                service=service,
                principal=identity.principal,
                config=config,
                limits=limits,
                owed=owed,
                roles=identity.roles,
            )

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
                "pausemesh_metrics": Provide(pausemesh_metrics, sync_to_thread=False),
                "pausemesh_limits": Provide(pausemesh_limits, sync_to_thread=False),
                "pausemesh_owed": Provide(pausemesh_owed, sync_to_thread=False),
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
            ],
        )

    def on_app_init(self, app_config: AppConfig) -> AppConfig:
        app_config.route_handlers.append(self.router())
        if app_config.cors_config is None:
            # A host that configured CORS itself keeps its own policy.
            app_config.cors_config = cors_config(self.config.settings)
        app_config.lifespan.append(self.lifespan)
        # App-wide, so the protocol mounts (/mcp, /a2a) and a host's own routes get a span,
        # a request id and an access line too.
        app_config.middleware.insert(
            0,
            DefineMiddleware(
                TelemetryMiddleware,
                metrics=self.metrics,
                access_log=self.config.settings.access_log,
            ),
        )
        # Just inside telemetry (a refused request is still logged and counted), before any
        # route's own work: every route, the mounts and the direct create/resume path alike.
        app_config.middleware.insert(
            1, DefineMiddleware(HostGuard, policy=host_policy(self.config.settings))
        )
        app_config.signature_namespace.update(
            ContinuationService=ContinuationService,
            PauseMeshCaller=PauseMeshCaller,
            PrometheusMetrics=PrometheusMetrics,
            Runtime=Runtime,
            Storage=Storage,
            OwedRuns=OwedRuns,
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
