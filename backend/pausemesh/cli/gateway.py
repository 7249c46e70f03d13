"""``pausemesh gateway`` (serve, ``pin``, ``retire``): the continuity gateway.

Every command takes ``--config`` and the same store flags as ``pausemesh serve``. Errors are
printed with their code and exit 2 (usage/config) or 1 (refused); nothing here dispatches
an upstream call except ``gateway`` serving an agent. Its operator's view is ``pausemesh ops``
(``pausemesh.cli.ops``).
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from pausemesh.cli.options import (
    add_config_arguments,
    ledger_storage,
    refusal,
    run_refusing,
    settings_from,
)
from pausemesh.cli.serve import serve_app
from pausemesh.core.clock import SystemClock
from pausemesh.core.errors import GatewayError, PauseMeshError
from pausemesh.gateway.config_load import load_gateway_config
from pausemesh.serving.process_logging import configure_process_logging
from pausemesh.settings import Settings

__all__ = ("add_gateway_arguments", "run_gateway")


def _add_serve(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    parser.add_argument("--lock", help="lock file (default gateway.lock.json beside the config)")
    parser.add_argument("--worker", help="this process's worker name (default: the config's)")
    parser.add_argument("--stdio", action="store_true", help="serve MCP over stdin/stdout")
    parser.add_argument("--host", help="bind address for streamable HTTP (default 127.0.0.1)")
    parser.add_argument("--port", help="TCP port for streamable HTTP (default 8787)")
    parser.add_argument("--principal-resolver", help="'module:function' resolving the caller")
    parser.add_argument(
        "--insecure-no-auth",
        action="store_true",
        default=None,
        help="allow a non-loopback bind without a principal resolver",
    )


def add_gateway_arguments(parser: argparse.ArgumentParser) -> None:
    _add_serve(parser)
    actions = parser.add_subparsers(dest="gateway_action", metavar="ACTION")
    pin = actions.add_parser("pin", help="pin each job's upstream tool definition into the lock")
    add_config_arguments(pin)
    pin.add_argument("--lock", help="lock file (default gateway.lock.json beside the config)")
    retire = actions.add_parser("retire", help="advance a worker's fencing epoch (retire it)")
    add_config_arguments(retire)
    retire.add_argument("--worker", required=True, help="the worker to retire")


def _lock_path(args: argparse.Namespace, config: Any) -> Path:
    from pausemesh.gateway.lock import default_lock_path  # noqa: PLC0415 - the MCP SDK loads only with the lock

    return Path(args.lock) if getattr(args, "lock", None) else default_lock_path(config)


def _pin(args: argparse.Namespace) -> None:
    from pausemesh.gateway.lock import pin, write_lock  # noqa: PLC0415 - the MCP SDK loads only with the lock

    async def main() -> None:
        config = load_gateway_config(args.config)
        lock = await pin(config)
        path = _lock_path(args, config)
        write_lock(lock, path)
        for name, job in lock.jobs.items():
            print(f"pinned {name}: {job.upstream}/{job.tool} sha256:{job.digest}")
        print(f"wrote {path}")

    run_refusing(main)


def _retire(args: argparse.Namespace) -> None:
    async def main() -> None:
        config = load_gateway_config(args.config)
        async with ledger_storage(settings_from(args)) as storage:
            epoch = await storage.fencing.retire_worker(
                config.domain, args.worker, now=SystemClock().now()
            )
        print(f"worker {args.worker} retired: its epoch is now {epoch}")

    run_refusing(main)


async def _load(args: argparse.Namespace) -> tuple[Any, Any]:
    from pausemesh.gateway.lock import check_lock, load_lock  # noqa: PLC0415 - the MCP SDK loads only with the lock

    config = load_gateway_config(args.config)
    lock = load_lock(_lock_path(args, config))
    check_lock(config, lock)
    return config, lock


def _serve_stdio(args: argparse.Namespace, settings: Settings) -> None:
    from pausemesh.bootstrap import open_runtime  # noqa: PLC0415 - the stores load only when opened
    from pausemesh.gateway.dispatcher import Gateway  # noqa: PLC0415 - the MCP SDK loads only to serve
    from pausemesh.gateway.mcp_compose import build_gateway_server  # noqa: PLC0415 - the MCP SDK loads only to serve

    async def main() -> None:
        config, lock = await _load(args)
        async with open_runtime(settings) as runtime:
            storage = runtime.storage
            if storage.operations is None or storage.fencing is None:
                msg = "these stores have no operation ledger or worker fencing"
                raise GatewayError(msg, code="STORE_UNAVAILABLE")
            gateway = Gateway(
                config,
                lock,
                ledger=storage.operations,
                fencing=storage.fencing,
                worker=args.worker,
                webhooks=runtime.service.webhooks,
            )
            await gateway.start()
            try:
                await build_gateway_server(gateway, lambda: runtime.service).run_stdio_async()
            finally:
                await gateway.close()

    run_refusing(main)


def run_gateway(args: argparse.Namespace) -> None:
    if args.gateway_action == "pin":
        _pin(args)
        return
    if args.gateway_action == "retire":
        _retire(args)
        return
    settings = settings_from(args)
    # Its logging goes to stderr (stdout is MCP's with --stdio).
    configure_process_logging(settings)
    if args.stdio:
        _serve_stdio(args, settings)
        return
    from pausemesh.web.gateway_mount import GatewayMount  # noqa: PLC0415 - Litestar loads only to serve HTTP

    try:
        config, lock = asyncio.run(_load(args))
    except PauseMeshError as error:
        raise refusal(error) from None
    serve_app(settings, plugins=[GatewayMount(config, lock, worker=args.worker)])
