"""``pausemesh``: the command line (serve, demo, --version).

Subcommands are argparse sub-parsers registered in ``_COMMANDS``; adding one is a
parser function plus a runner (``migrate`` and the real ``demo`` join this way).
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys
from collections.abc import Callable, Sequence
from typing import Any

from pausemesh import __version__
from pausemesh.cli_gateway import add_gateway_arguments, add_ops_arguments, run_gateway, run_ops
from pausemesh.cli_inspect import (
    add_inspect_arguments,
    add_stats_arguments,
    run_inspect,
    run_stats,
)
from pausemesh.cli_keys import add_keys_arguments, run_keys
from pausemesh.cli_migrate import add_migrate_arguments, run_migrate
from pausemesh.core.errors import SettingsError
from pausemesh.core.hosts import is_loopback_host
from pausemesh.keys import resolve_secret_key
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
    parser.add_argument(
        "--env-file", default=".env", help="dotenv file to read PAUSEMESH_* from (default .env)"
    )


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
    }
    return load_settings(env_file=args.env_file, overrides=overrides)


def _configure_logging(settings: Settings) -> None:
    """Logs in ``PAUSEMESH_LOG_FORMAT``; traces when the ``OTEL_*`` variables ask for them."""
    from pausemesh.core.log_format import configure_logging  # noqa: PLC0415 - server commands only
    from pausemesh.otel import configure_tracing  # noqa: PLC0415

    configure_logging(settings.log_level, settings.log_format)
    try:
        configure_tracing()
    except (RuntimeError, ValueError) as error:
        raise CliError(str(error)) from None


def serve_app(
    settings: Settings,
    *,
    agent: Any | None = None,
    plugins: Sequence[Any] = (),
    loopback_resolver: Any | None = None,
) -> None:
    """Run the app under uvicorn until SIGTERM/SIGINT (graceful: in-flight requests finish).

    ``loopback_resolver``: used only when no resolver is configured and the bind is loopback
    (the demo's two people); never with a real resolver or on another address.
    """
    import uvicorn  # noqa: PLC0415 - only the server commands need it

    from pausemesh.web.app import create_app  # noqa: PLC0415 - keeps --version light
    from pausemesh.web.auth import import_resolver  # noqa: PLC0415

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
    # Fail before binding: a missing or unreadable key is a startup error, not a 500 later.
    resolve_secret_key(settings)
    if settings.instance_name is None:
        # host:port names this replica across restarts, so a restart frees its predecessor's
        # run leases at once (pausemesh.core.instance).
        name = f"{socket.gethostname()}:{settings.port}"
        settings = with_overrides(settings, instance_name=name)
    app = create_app(settings, agent=agent, principal_resolver=resolver, plugins=plugins)
    _log.info(
        "PauseMesh %s on http://%s:%d (%s)",
        __version__,
        settings.host,
        settings.port,
        "PostgreSQL" if settings.uses_postgres else settings.database_path,
    )
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        loop="uvloop",
        http="auto",
        lifespan="on",
        log_config=None,
        log_level=settings.log_level,
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=10,
    )
    server = uvicorn.Server(config)
    server.run()
    if not server.started:
        raise CliError("the server did not start (see the log above)")


def _add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    _add_server_arguments(parser)
    parser.add_argument(
        "--agent",
        help="'module:attr' or 'path.py:attr' of the agent to serve on /agui: a PauseMesh agent"
        " function, a pydantic-ai Agent or a compiled LangGraph graph (PAUSEMESH_AGENT)",
    )


def _run_serve(args: argparse.Namespace) -> None:
    settings = _settings_from(args)
    _configure_logging(settings)
    agent = None
    if settings.agent is not None:
        from pausemesh.core.errors import AgentLoadError  # noqa: PLC0415 - keeps --version light
        from pausemesh.integrations.agents import load_agent  # noqa: PLC0415

        try:
            agent = load_agent(settings.agent)
        except AgentLoadError as error:
            raise CliError(error.message) from None
    serve_app(settings, agent=agent)


def _add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    _add_server_arguments(parser)
    parser.add_argument(
        "--no-browser", action="store_true", help="do not open the demo page in a browser"
    )


def _run_demo(args: argparse.Namespace) -> None:
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
    _configure_logging(settings)
    airline_path = settings.demo_airline_path or settings.resolved_data_dir / "airline.db"
    configure_airline(Airline(airline_path, latency_seconds=settings.demo_airline_latency_seconds))
    configure_approvals(settings.demo_approval_threshold)
    plugins: list[Any] = [DemoSitePlugin(), *demo_protocol_plugins(), OperationWatchPlugin()]
    if not args.no_browser:
        plugins.append(_open_browser_plugin(f"http://{settings.host}:{settings.port}/"))
    serve_app(settings, agent=travel_agent, plugins=plugins, loopback_resolver=demo_identity)


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
    parser.add_argument(
        "--env-file", default=".env", help="dotenv file to read PAUSEMESH_* from (default .env)"
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
        _run_serve,
    ),
    "demo": ("serve the travel-agent demo (AG-UI + browser UI)", _add_demo_arguments, _run_demo),
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
    args = parser.parse_args(argv)
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
