"""``pausemesh``: the command line (serve, demo, --version).

Subcommands are argparse sub-parsers registered in ``_COMMANDS``; adding one is a
parser function plus a runner (``migrate`` and the real ``demo`` join this way).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pausemesh import __version__
from pausemesh.cli.gateway import add_gateway_arguments, add_ops_arguments, run_gateway, run_ops
from pausemesh.cli.inspect import (
    add_inspect_arguments,
    add_stats_arguments,
    add_store_arguments,
    run_inspect,
    run_stats,
)
from pausemesh.cli.keys import add_keys_arguments, run_keys
from pausemesh.cli.migrate import add_migrate_arguments, run_migrate
from pausemesh.core.errors import SettingsError
from pausemesh.core.hosts import is_loopback_host
from pausemesh.server_key import resolve_secret_key
from pausemesh.settings import Settings, load_settings, with_overrides

__all__ = ("build_parser", "main")

_log = logging.getLogger("pausemesh.cli")

_EXIT_USAGE = 2


class CliError(Exception):
    """A startup problem the user can fix; printed without a traceback."""


def _add_server_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", help="bind address (PAUSEMESH_HOST, default 127.0.0.1)")
    parser.add_argument("--port", help="TCP port (PAUSEMESH_PORT, default 8787)")
    parser.add_argument(
        "--database-path",
        help="SQLite file (PAUSEMESH_DATABASE_PATH, default ./data/pausemesh.db)",
    )
    parser.add_argument(
        "--database-url", help="PostgreSQL URL; wins over --database-path (PAUSEMESH_DATABASE_URL)"
    )
    parser.add_argument(
        "--database-schema",
        help="PostgreSQL schema (PAUSEMESH_DATABASE_SCHEMA, default pausemesh)",
    )
    parser.add_argument("--log-level", help="critical|error|warning|info|debug")
    parser.add_argument(
        "--principal-resolver",
        help="'module:function' resolving the caller's principal (PAUSEMESH_PRINCIPAL_RESOLVER)",
    )
    parser.add_argument(
        "--insecure-no-auth",
        action="store_true",
        default=None,
        help="allow a non-loopback bind without a principal resolver (anyone can call the API)",
    )
    for flag, help_text in _IDENTITY_AND_LIMIT_FLAGS:
        parser.add_argument(flag, help=f"{help_text} ({_env_name(flag)})")
    parser.add_argument(
        "--env-file", default=".env", help="dotenv file to read PAUSEMESH_* from (default .env)"
    )


# Identity, browser and limit settings a deployment most often sets per process; each flag is
# the setting's field name with dashes (``--auth-issuer`` -> ``auth_issuer``, PAUSEMESH_AUTH_ISSUER).
_IDENTITY_AND_LIMIT_FLAGS: Final = (
    ("--auth-jwks-url", "JWT bearer: the identity provider's JWKS, https:// or file://"),
    ("--auth-issuer", "JWT bearer: the tokens' exact iss"),
    ("--auth-audience", "JWT bearer: the audience the tokens must name"),
    ("--auth-principal-claim", "JWT bearer: the claim naming the principal (default sub)"),
    ("--auth-roles-claim", "JWT bearer: the claim holding roles (a dotted path reaches in)"),
    ("--auth-api-keys-file", "API keys: the file `pausemesh keys create` writes"),
    ("--cors-origins", "comma-separated browser origins allowed cross-site"),
    ("--allowed-hosts", "comma-separated Host names answered besides loopback (* any)"),
    ("--rate-limit", "runs started per principal, such as 120/minute"),
    ("--run-timeout-seconds", "the longest an agent run may take"),
    ("--shutdown-grace-seconds", "how long in-flight runs may go on after SIGTERM"),
)


def _field_name(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


def _env_name(flag: str) -> str:
    return f"PAUSEMESH_{_field_name(flag).upper()}"


def _settings_from(args: argparse.Namespace) -> Settings:
    overrides = {
        "host": args.host,
        "port": args.port,
        "database_path": args.database_path,
        "database_url": args.database_url,
        "database_schema": args.database_schema,
        "log_level": args.log_level,
        "principal_resolver": args.principal_resolver,
        "insecure_no_auth": args.insecure_no_auth,
        "agent": getattr(args, "agent", None),
        "workers": getattr(args, "workers", None),
    }
    for flag, _ in _IDENTITY_AND_LIMIT_FLAGS:
        name = _field_name(flag)
        overrides[name] = getattr(args, name, None)
    return load_settings(env_file=args.env_file, overrides=overrides)


def _configure_logging(settings: Settings) -> None:
    """Logs in ``PAUSEMESH_LOG_FORMAT``; traces when the ``OTEL_*`` variables ask for them."""
    from pausemesh.observability.log_format import configure_logging  # noqa: PLC0415 - server commands only
    from pausemesh.observability.otel import configure_tracing  # noqa: PLC0415

    configure_logging(settings.log_level, settings.log_format)
    try:
        configure_tracing()
    except (RuntimeError, ValueError) as error:
        raise CliError(str(error)) from None
    if settings.workers > 1:
        # Several workers write to one stream: each line names the process that wrote it.
        for handler in logging.getLogger().handlers:
            handler.addFilter(_WorkerTag())


class _WorkerTag(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.name = f"{record.name}[{record.process}]"
        return True


def _check_start(
    settings: Settings, loopback_resolver: Any | None = None, *, warn: bool = True
) -> Any:
    """The principal resolver, after the checks that refuse to start (bind, server key).

    ``loopback_resolver``: used only when no resolver is configured and the bind is loopback
    (the demo's two people); never with a real resolver or on another address. ``warn``: log
    what is allowed but unsafe (a worker does not repeat its supervisor's warnings).
    """
    from pausemesh.web.auth import import_resolver  # noqa: PLC0415 - keeps --version light

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


def uvicorn_config(app: Any, settings: Settings, **extra: Any) -> Any:
    """The uvicorn settings ``pausemesh serve`` runs with (``bench/stack_floor.py`` too)."""
    # Only the server commands need uvicorn (which this imports).
    from pausemesh.serving.http_protocol import CoalescingHttpToolsProtocol, ServerConfig  # noqa: PLC0415

    return ServerConfig(
        app,
        host=settings.host,
        port=settings.port,
        loop="uvloop",
        http=CoalescingHttpToolsProtocol,
        lifespan="on",
        log_config=None,
        log_level=settings.log_level,
        access_log=False,
        server_header=False,
        timeout_keep_alive=settings.idle_connection_seconds,
        header_timeout=settings.header_timeout_seconds,
        # A backstop only: the drain ends every run and tail within the grace period.
        timeout_graceful_shutdown=math.ceil(settings.shutdown_grace_seconds) + 2,
        **extra,
    )


def _announce(settings: Settings) -> None:
    _log.info(
        "PauseMesh %s on http://%s:%d (%s%s)",
        __version__,
        settings.host,
        settings.port,
        "PostgreSQL" if settings.uses_postgres else settings.database_path,
        f", {settings.workers} workers" if settings.workers > 1 else "",
    )


def serve_app(
    settings: Settings,
    *,
    agent: Any | None = None,
    plugins: Sequence[Any] = (),
    loopback_resolver: Any | None = None,
) -> None:
    """Run the app in this process under uvicorn until SIGTERM/SIGINT (graceful: in-flight
    requests finish). ``pausemesh serve --workers N`` goes through ``_serve_workers``."""
    import uvicorn  # noqa: PLC0415 - only the server commands need it

    from pausemesh.serving.drain import DrainOnStopSignals  # noqa: PLC0415 - keeps --version light
    from pausemesh.serving.process_tuning import tune_for_serving  # noqa: PLC0415
    from pausemesh.web.app import create_app  # noqa: PLC0415

    resolver = _check_start(settings, loopback_resolver)
    if settings.instance_name is None:
        # host:port names this replica across restarts, so a restart frees its predecessor's
        # run leases at once (pausemesh.core.instance).
        name = f"{socket.gethostname()}:{settings.port}"
        settings = with_overrides(settings, instance_name=name)
    app = create_app(
        settings,
        agent=agent,
        principal_resolver=resolver,
        plugins=[*plugins, DrainOnStopSignals()],
    )
    tune_for_serving()
    _announce(settings)
    server = uvicorn.Server(uvicorn_config(app, settings))
    # uvicorn raises the signal again once it has stopped; this handler takes it, so a
    # graceful stop exits 0 instead of dying of the re-raised SIGTERM.
    signal.signal(signal.SIGTERM, lambda *_: None)
    server.run()
    if not server.started:
        raise CliError("the server did not start (see the log above)")


def _serve_workers(settings: Settings, argv: Sequence[str]) -> None:
    """N worker processes on one port (uvicorn's supervisor); each rebuilds the app from
    ``argv`` in ``pausemesh.cli.workers.worker_app``."""
    import os  # noqa: PLC0415

    from pausemesh.cli.workers import (  # noqa: PLC0415
        WORKER_ARGV_ENV,
        listener_for_workers,
        migration_advice,
    )

    _check_start(settings)
    os.environ[WORKER_ARGV_ENV] = json.dumps(list(argv))
    try:
        listener = listener_for_workers(settings.host, settings.port)
    except OSError as error:
        raise CliError(f"cannot listen on {settings.host}:{settings.port}: {error}") from None
    _announce(settings)
    if listener is not None and (advice := migration_advice()) is not None:
        _log.info(advice)
    supervise_workers("pausemesh.cli.workers:worker_app", settings, listener)


def supervise_workers(factory: str, settings: Settings, listener: socket.socket | None) -> None:
    """``settings.workers`` processes under uvicorn's supervisor, each building its app with
    ``factory`` (an import string), on ``listener`` (``cli_workers.listener_for_workers``;
    None: uvicorn's one shared socket). ``bench/stack_floor.py`` serves its apps with it too."""
    from uvicorn.supervisors import Multiprocess  # noqa: PLC0415 - only the server commands

    config = uvicorn_config(factory, settings, factory=True, workers=settings.workers)
    Multiprocess(config, sockets=[listener or config.bind_socket()]).run()


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
        from pausemesh.serving.drain import DrainOnStopSignals  # noqa: PLC0415 - keeps --version light
        from pausemesh.web.app import create_app  # noqa: PLC0415

        _configure_logging(settings)
        plugins = list(self.plugins)
        if self.open_url is not None and first_worker:
            plugins.append(_open_browser_plugin(self.open_url))
        # The supervisor already warned about the bind before starting the workers.
        resolver = _check_start(settings, self.loopback_resolver, warn=False)
        # Each worker drains on the SIGTERM its supervisor forwards, as one process does.
        plugins.append(DrainOnStopSignals())
        return create_app(settings, agent=self.agent, principal_resolver=resolver, plugins=plugins)


def _add_workers_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workers",
        help="worker processes on the one port, sharing the store (PAUSEMESH_WORKERS, default 1)",
    )


def _add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    _add_server_arguments(parser)
    _add_workers_argument(parser)
    parser.add_argument(
        "--agent",
        help="'module:attr' or 'path.py:attr' of the agent to serve on /agui: a PauseMesh agent"
        " function, a pydantic-ai Agent or a compiled LangGraph graph (PAUSEMESH_AGENT)",
    )


def _prepare_serve(args: argparse.Namespace) -> PreparedCommand:
    settings = _settings_from(args)
    agent = None
    if settings.agent is not None:
        from pausemesh.core.errors import AgentLoadError  # noqa: PLC0415 - keeps --version light
        from pausemesh.integrations.agents import load_agent  # noqa: PLC0415

        try:
            agent = load_agent(settings.agent)
        except AgentLoadError as error:
            raise CliError(error.message) from None
    return PreparedCommand(settings=settings, agent=agent)


def _add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    _add_server_arguments(parser)
    _add_workers_argument(parser)
    parser.add_argument(
        "--no-browser", action="store_true", help="do not open the demo page in a browser"
    )


def _prepare_demo(args: argparse.Namespace) -> PreparedCommand:
    from pausemesh.demo.agent import (  # noqa: PLC0415 - keeps --version light
        configure_approvals,
        travel_agent,
    )
    from pausemesh.demo.identity import demo_identity  # noqa: PLC0415
    from pausemesh.demo.operation_watch import OperationWatchPlugin  # noqa: PLC0415
    from pausemesh.demo.protocols import demo_protocol_plugins  # noqa: PLC0415
    from pausemesh.demo.reservations import Airline, configure_airline  # noqa: PLC0415
    from pausemesh.demo.site import DemoSitePlugin  # noqa: PLC0415

    settings = _settings_from(args)
    airline_path = settings.demo_airline_path or settings.resolved_data_dir / "airline.db"
    configure_airline(Airline(airline_path, latency_seconds=settings.demo_airline_latency_seconds))
    configure_approvals(settings.demo_approval_threshold)
    return PreparedCommand(
        settings=settings,
        agent=travel_agent,
        plugins=(DemoSitePlugin(), *demo_protocol_plugins(), OperationWatchPlugin()),
        open_url=None if args.no_browser else f"http://{settings.host}:{settings.port}/",
        # The demo's two people, only on loopback without a configured resolver.
        loopback_resolver=demo_identity,
    )


def prepare_command(args: argparse.Namespace, *, worker: bool = False) -> PreparedCommand:
    """``serve`` or ``demo`` up to the app (a worker process builds its app from this)."""
    if not worker:
        # A worker's logging is set up when it builds its app (build_app).
        settings = _settings_from(args)
        _configure_logging(settings)
    return _prepare_demo(args) if args.command == "demo" else _prepare_serve(args)


def _run_server(args: argparse.Namespace) -> None:
    settings = _settings_from(args)
    if settings.workers > 1:
        _configure_logging(settings)
        _serve_workers(settings, args.argv)
        return
    prepared = prepare_command(args)
    plugins = list(prepared.plugins)
    if prepared.open_url is not None:
        plugins.append(_open_browser_plugin(prepared.open_url))
    serve_app(
        prepared.settings,
        agent=prepared.agent,
        plugins=plugins,
        loopback_resolver=prepared.loopback_resolver,
    )


def _open_browser_plugin(url: str) -> Any:
    """A plugin that opens the demo page once the app has started (off the event loop)."""
    import threading  # noqa: PLC0415 - only the demo opens a browser
    import webbrowser  # noqa: PLC0415

    from litestar.plugins import InitPlugin  # noqa: PLC0415

    class OpenBrowser(InitPlugin):
        def on_app_init(self, app_config: Any) -> Any:
            def open_page() -> None:
                threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()

            app_config.on_startup.append(open_page)
            return app_config

    return OpenBrowser()


def _add_purge_arguments(parser: argparse.ArgumentParser) -> None:
    add_store_arguments(parser)
    parser.add_argument(
        "--older-than",
        required=True,
        type=_days,
        metavar="DAYS",
        help="erase threads idle for longer than DAYS days",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="list what would be erased; change nothing"
    )


def _days(text: str) -> int:
    try:
        days = int(text)
    except ValueError:
        days = 0
    if days < 1:
        msg = f"DAYS must be a whole number of days, at least 1 (got {text!r})"
        raise argparse.ArgumentTypeError(msg)
    return days


def _run_purge(args: argparse.Namespace) -> None:
    import asyncio  # noqa: PLC0415 - only purge runs a loop here
    from datetime import timedelta  # noqa: PLC0415

    from pausemesh.bootstrap import purge_threads  # noqa: PLC0415 - keeps --version light

    overrides = {
        "database_path": args.database_path,
        "database_url": args.database_url,
        "database_schema": args.database_schema,
    }
    settings = load_settings(env_file=args.env_file, overrides=overrides)

    def progress(count: int) -> None:
        print(f"erased {count} threads...", file=sys.stderr, flush=True)

    report = asyncio.run(
        purge_threads(
            settings,
            older_than=timedelta(days=args.older_than),
            dry_run=args.dry_run,
            progress=progress,
        )
    )
    verb = "would erase" if report.dry_run else "erased"
    for thread_id in report.thread_ids if report.dry_run else ():
        print(thread_id)
    cutoff = report.cutoff.isoformat()
    print(f"{verb} {len(report.thread_ids)} threads idle since before {cutoff}")


Runner = Callable[[argparse.Namespace], None]
_COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Runner]] = {
    "serve": (
        "serve the continuation API (and --agent on /agui)",
        _add_serve_arguments,
        _run_server,
    ),
    "demo": (
        "serve the travel-agent demo (AG-UI + browser UI)",
        _add_demo_arguments,
        _run_server,
    ),
    "migrate": (
        "create or upgrade the PostgreSQL schema (run by a DDL role, never by the app)",
        add_migrate_arguments,
        run_migrate,
    ),
    "gateway": ("serve the continuity gateway (pin, retire)", add_gateway_arguments, run_gateway),
    "ops": ("inspect and resolve the gateway's operations", add_ops_arguments, run_ops),
    "keys": (
        "create, list and revoke API keys (PAUSEMESH_AUTH_API_KEYS_FILE)",
        add_keys_arguments,
        run_keys,
    ),
    "inspect": (
        "read one thread, continuation or operation offline (read-only, --json)",
        add_inspect_arguments,
        run_inspect,
    ),
    "stats": (
        "counts by state and the oldest waiting question, offline (read-only, --json)",
        add_stats_arguments,
        run_stats,
    ),
    "purge": (
        "erase conversations idle longer than --older-than DAYS (retention)",
        _add_purge_arguments,
        _run_purge,
    ),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pausemesh", description="Durable pauses for AI agents, resumed exactly once."
    )
    parser.add_argument("--version", action="version", version=f"pausemesh {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (summary, add_arguments, _) in _COMMANDS.items():
        add_arguments(commands.add_parser(name, help=summary, description=summary))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    # Workers rebuild the command from its argv (pausemesh.cli.workers).
    args.argv = argv
    if args.command is None:
        parser.print_help()
        return _EXIT_USAGE
    try:
        _COMMANDS[args.command][2](args)
    except (SettingsError, CliError) as error:
        print(f"pausemesh: error: {error}", file=sys.stderr)
        return _EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
