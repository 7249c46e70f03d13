"""``pausemesh``: the parser and the dispatch of its commands.

Each command is a sub-parser registered in ``_COMMANDS`` with its parser function and its
runner, both from the command group's module beside this one (``serve``, ``gateway``, ``ops``,
``inspect``, ``keys``, ``migrate``, ``purge``, ``conformance``); adding a command is one more
entry. Importing this loads no web framework: a command loads Litestar and uvicorn only when it
serves.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable, Sequence

from pausemesh import __version__
from pausemesh.cli.conformance import add_conformance_arguments, run_conformance
from pausemesh.cli.failures import failure_line, wants_traceback
from pausemesh.cli.gateway import add_gateway_arguments, run_gateway
from pausemesh.cli.inspect import add_inspect_arguments, add_stats_arguments, run_inspect, run_stats
from pausemesh.cli.keys import add_keys_arguments, run_keys
from pausemesh.cli.migrate import add_migrate_arguments, run_migrate
from pausemesh.cli.ops import add_ops_arguments, run_ops
from pausemesh.cli.options import EXIT_INTERRUPTED, EXIT_USAGE
from pausemesh.cli.purge import add_purge_arguments, run_purge
from pausemesh.cli.serve import add_demo_arguments, add_serve_arguments, run_server

__all__ = ("build_parser", "main")

Runner = Callable[[argparse.Namespace], None]
_COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Runner]] = {
    "serve": (
        "serve the continuation API (and --agent on /agui)",
        add_serve_arguments,
        run_server,
    ),
    "demo": (
        "serve the travel-agent demo (AG-UI + browser UI)",
        add_demo_arguments,
        run_server,
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
        add_purge_arguments,
        run_purge,
    ),
    "conformance": (
        "check another server against a protocol's rules, as a client (agui URL)",
        add_conformance_arguments,
        run_conformance,
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
        return EXIT_USAGE
    try:
        _COMMANDS[args.command][2](args)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as error:
        # A command that cannot start says why in one line (pausemesh.cli.failures); an
        # unexpected error is a bug and keeps its traceback.
        line = failure_line(error)
        if line is None:
            raise
        if wants_traceback(getattr(args, "log_level", None)):
            traceback.print_exception(error, file=sys.stderr)
        print(f"pausemesh: error: {line}", file=sys.stderr)
        return EXIT_USAGE
    return 0


if __name__ == "__main__":
    sys.exit(main())
