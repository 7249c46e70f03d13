"""``pausemesh serve`` and ``pausemesh demo``: what to serve, the checks before binding, and
serving it in this process or, with ``--workers N``, in N worker processes on one port.

A command is prepared into a ``PreparedCommand`` (settings, agent, plugins); one process builds
and serves its app (``serve_app``), or a supervisor starts N workers that each prepare the same
command line again and build their own app (``pausemesh.cli.workers``). Litestar and uvicorn
load only here, when a command serves (``pausemesh.serving.server``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pausemesh.cli.failures import bind_listener, bind_refusal
from pausemesh.cli.options import CliError, add_server_arguments, settings_from
from pausemesh.core.errors import AgentLoadError
from pausemesh.core.hosts import is_loopback_host
from pausemesh.demo.agent import configure_approvals, travel_agent
from pausemesh.demo.identity import demo_identity
from pausemesh.demo.reservations import Airline, configure_airline
from pausemesh.integrations.agents import load_agent
from pausemesh.server_key import resolve_secret_key
from pausemesh.serving.process_logging import configure_process_logging
from pausemesh.serving.workers import WORKER_ARGV_ENV, listener_for_workers, migration_advice
from pausemesh.settings import Settings, with_overrides

__all__ = (
    "PreparedCommand",
    "add_demo_arguments",
    "add_serve_arguments",
    "check_start",
    "demo_model_agent",
    "prepare_command",
    "probe_store",
    "run_server",
    "serve_app",
)

_log = logging.getLogger("pausemesh.cli")

# What each worker process builds its app with (an import string: a spawned process imports it).
_WORKER_APP = "pausemesh.cli.workers:worker_app"


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    add_server_arguments(parser)
    _add_workers_argument(parser)
    parser.add_argument(
        "--agent",
        help="'module:attr' or 'path.py:attr' of the agent to serve on /agui: a PauseMesh agent"
        " function, a pydantic-ai Agent or a compiled LangGraph graph (PAUSEMESH_AGENT)",
    )


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    add_server_arguments(parser)
    _add_workers_argument(parser)
    parser.add_argument(
        "--no-browser", action="store_true", help="do not open the demo page in a browser"
    )


def _add_workers_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workers",
        help="worker processes on the one port, sharing the store (PAUSEMESH_WORKERS, default 1)",
    )


def check_start(
    settings: Settings, loopback_resolver: Any | None = None, *, warn: bool = True
) -> Any:
    """The principal resolver, after the checks that refuse to start (bind, server key).

    ``loopback_resolver``: used only when no resolver is configured and the bind is loopback
    (the demo's two people); never with a real resolver or on another address. ``warn``: log
    what is allowed but unsafe (a worker does not repeat its supervisor's warnings).
    """
    from pausemesh.web.auth import import_resolver  # noqa: PLC0415 - Litestar loads only to serve

    resolver = None
    if settings.principal_resolver is not None:
        try:
            resolver = import_resolver(settings.principal_resolver)
        except (ImportError, ValueError, TypeError) as error:
            raise CliError(str(error)) from None
    if (
        resolver is None
        and not settings.uses_bearer_auth
        and loopback_resolver is not None
        and is_loopback_host(settings.host)
    ):
        resolver = loopback_resolver
    authenticated = resolver is not None or settings.uses_bearer_auth
    if not authenticated and not is_loopback_host(settings.host) and not settings.insecure_no_auth:
        raise CliError(
            f"refusing to bind {settings.host}: without a principal resolver anyone who can"
            " reach it could create and cancel continuations. Bind 127.0.0.1, configure"
            " PAUSEMESH_AUTH_JWKS_URL or PAUSEMESH_AUTH_API_KEYS_FILE, pass"
            " --principal-resolver, or --insecure-no-auth if you really mean it."
        )
    if warn and not is_loopback_host(settings.host):
        _warn_about_bind(settings, authenticated=authenticated)
    # Fail before binding: a missing or unreadable key is a startup error, not a 500 later.
    # With several workers the parent creates the key file once, before any worker starts.
    resolve_secret_key(settings)
    return resolver


def _warn_about_bind(settings: Settings, *, authenticated: bool) -> None:
    """A non-loopback bind that starts, said out loud when it is open to more than it should."""
    if not authenticated:
        _log.warning(
            "--insecure-no-auth on %s: no principal resolver, so anyone who can reach this"
            " address can create, read, resume and cancel every conversation",
            settings.host,
        )
    if settings.allowed_hosts is None:
        _log.warning(
            "PAUSEMESH_ALLOWED_HOSTS is not set: on %s any Host is answered. Set it to the"
            " names clients use (e.g. api.example.com) so a DNS-rebinding page gets 421",
            settings.host,
        )


def probe_store(settings: Settings) -> None:
    """Open the store and close it again, before anything is served: a store that cannot be
    opened (an unmigrated schema, a missing database, a data directory that is not writable)
    stops the command here with its one line (``pausemesh.cli.failures``), where inside the
    app's lifespan it would be a traceback from the server. With ``--workers N`` the
    supervisor probes once for all workers."""
    from pausemesh.bootstrap import open_storage  # noqa: PLC0415 - the stores load only when opened

    async def probe() -> None:
        storage = await open_storage(settings)
        await storage.close()

    asyncio.run(probe())


def serve_app(
    settings: Settings,
    *,
    agent: Any | None = None,
    plugins: Sequence[Any] = (),
    loopback_resolver: Any | None = None,
    open_url: str | None = None,
) -> None:
    """Run the app in this process under uvicorn until SIGTERM/SIGINT (graceful: in-flight
    requests finish); ``open_url`` is opened in a browser once it has started.
    ``pausemesh serve --workers N`` goes through ``_serve_workers``."""
    from pausemesh.serving.server import build_app, run_app  # noqa: PLC0415 - Litestar and uvicorn load only to serve

    resolver = check_start(settings, loopback_resolver)
    probe_store(settings)
    # Bound before the app starts: a port in use is said now, in one line, not by uvicorn
    # once the app has opened its store.
    listener = bind_listener(settings.host, settings.port)
    if settings.instance_name is None:
        # host:port names this replica across restarts, so a restart frees its predecessor's
        # run leases at once (pausemesh.core.instance).
        name = f"{socket.gethostname()}:{settings.port}"
        settings = with_overrides(settings, instance_name=name)
    app = build_app(
        settings, agent=agent, principal_resolver=resolver, plugins=plugins, open_url=open_url
    )
    if not run_app(app, settings, listener):
        raise CliError("the server did not start (see the log above)")


def _serve_workers(settings: Settings, argv: Sequence[str]) -> None:
    """N worker processes on one port (uvicorn's supervisor); each rebuilds the app from
    ``argv`` in ``pausemesh.cli.workers.worker_app``."""
    from pausemesh.serving.server import announce, supervise_workers  # noqa: PLC0415 - uvicorn loads only to serve

    check_start(settings)
    probe_store(settings)
    os.environ[WORKER_ARGV_ENV] = json.dumps(list(argv))
    try:
        listener = listener_for_workers(settings.host, settings.port)
    except OSError as error:
        raise CliError(bind_refusal(settings.host, settings.port, error)) from None
    announce(settings)
    if listener is not None and (advice := migration_advice()) is not None:
        _log.info(advice)
    supervise_workers(_WORKER_APP, settings, listener)


@dataclass(frozen=True, slots=True)
class PreparedCommand:
    """What ``serve`` or ``demo`` runs: its settings, agent and plugins (in every worker)."""

    settings: Settings
    agent: Any | None = None
    plugins: tuple[Any, ...] = ()
    # The demo opens the browser once: in the only process, or in worker slot 0.
    open_url: str | None = None
    loopback_resolver: Any | None = None

    def build_app(self, settings: Settings, *, first_worker: bool) -> Any:
        """A worker's app (``pausemesh.cli.workers``), with its own logging."""
        from pausemesh.serving.server import build_app  # noqa: PLC0415 - Litestar loads only to serve

        configure_process_logging(settings)
        # The supervisor already warned about the bind before starting the workers.
        resolver = check_start(settings, self.loopback_resolver, warn=False)
        return build_app(
            settings,
            agent=self.agent,
            principal_resolver=resolver,
            plugins=self.plugins,
            open_url=self.open_url if first_worker else None,
        )


def _prepare_serve(args: argparse.Namespace) -> PreparedCommand:
    settings = settings_from(args)
    agent = None
    if settings.agent is not None:
        try:
            agent = load_agent(settings.agent, history_messages=settings.agent_history_messages)
        except AgentLoadError as error:
            raise CliError(error.message) from None
    return PreparedCommand(settings=settings, agent=agent)


def _prepare_demo(args: argparse.Namespace) -> PreparedCommand:
    # The demo's Litestar plugins (its page, its protocol routes, the operation watch).
    from pausemesh.demo.operation_watch import OperationWatchPlugin  # noqa: PLC0415 - Litestar loads only to serve
    from pausemesh.demo.protocols import demo_protocol_plugins  # noqa: PLC0415 - Litestar loads only to serve
    from pausemesh.demo.site import DemoSitePlugin  # noqa: PLC0415 - Litestar loads only to serve

    settings = settings_from(args)
    airline_path = settings.demo_airline_path or settings.resolved_data_dir / "airline.db"
    configure_airline(Airline(airline_path, latency_seconds=settings.demo_airline_latency_seconds))
    configure_approvals(settings.demo_approval_threshold, default_ttl=settings.token_ttl_seconds)
    model = settings.example_model
    return PreparedCommand(
        settings=settings,
        agent=travel_agent if model is None else demo_model_agent(model, settings),
        plugins=(DemoSitePlugin(), *demo_protocol_plugins(), OperationWatchPlugin()),
        open_url=None if args.no_browser else f"http://{settings.host}:{settings.port}/",
        # The demo's two people, only on loopback without a configured resolver.
        loopback_resolver=demo_identity,
    )


def demo_model_agent(model: str, settings: Settings) -> Any:
    """The demo agent on the pydantic-ai model ``model`` (``PAUSEMESH_EXAMPLE_MODEL``), or a
    ``CliError`` in one line: the pydantic-ai extra missing, or a model it cannot use."""
    try:
        from pausemesh.demo.model_agent import ModelTravelAgent, model_from  # noqa: PLC0415 - the pydantic-ai extra loads only with the setting
    except ModuleNotFoundError as error:
        if (error.name or "").partition(".")[0] != "pydantic_ai":
            raise
        msg = (
            f"PAUSEMESH_EXAMPLE_MODEL={model!r} needs pydantic-ai: pip install"
            " 'pausemesh[pydantic-ai]' (or unset it for the rule-based demo agent)"
        )
        raise CliError(msg) from None
    try:
        agent = ModelTravelAgent(
            model_from(model), history_messages=settings.agent_history_messages
        )
    except AgentLoadError as error:
        raise CliError(error.message) from None
    _log.info("the demo agent runs on the pydantic-ai model %s (PAUSEMESH_EXAMPLE_MODEL)", model)
    return agent


def prepare_command(args: argparse.Namespace, *, worker: bool = False) -> PreparedCommand:
    """``serve`` or ``demo`` up to the app (a worker process builds its app from this)."""
    if not worker:
        # A worker's logging is set up when it builds its app (build_app).
        configure_process_logging(settings_from(args))
    return _prepare_demo(args) if args.command == "demo" else _prepare_serve(args)


def run_server(args: argparse.Namespace) -> None:
    """``serve`` and ``demo``: in this process, or in ``--workers`` processes."""
    settings = settings_from(args)
    if settings.workers > 1:
        configure_process_logging(settings)
        if args.command == "demo" and settings.example_model is not None:
            # Said once, before any worker starts (each worker builds its own agent).
            demo_model_agent(settings.example_model, settings)
        _serve_workers(settings, args.argv)
        return
    prepared = prepare_command(args)
    serve_app(
        prepared.settings,
        agent=prepared.agent,
        plugins=prepared.plugins,
        loopback_resolver=prepared.loopback_resolver,
        open_url=prepared.open_url,
    )
