"""``pausemesh gateway`` (serve, ``pin``, ``retire``) and ``pausemesh ops`` (the operator's view).

Every command takes ``--config`` and the same store flags as ``pausemesh serve``. Errors are
printed with their code and exit 2 (usage/config) or 1 (refused); nothing here dispatches
an upstream call except ``gateway`` serving an agent.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec

from pausemesh.core.clock import SystemClock
from pausemesh.core.errors import GatewayError, PauseMeshError
from pausemesh.settings import Settings, load_settings

__all__ = ("add_gateway_arguments", "add_ops_arguments", "run_gateway", "run_ops")

_EXIT_REFUSED = 1
_EXIT_USAGE = 2


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", default="gateway.toml", help="gateway TOML (default gateway.toml)"
    )
    parser.add_argument("--database-path", help="SQLite file (PAUSEMESH_DATABASE_PATH)")
    parser.add_argument("--database-url", help="PostgreSQL URL; wins over --database-path")
    parser.add_argument("--database-schema", help="PostgreSQL schema (default pausemesh)")
    parser.add_argument("--log-level", help="critical|error|warning|info|debug")
    parser.add_argument("--env-file", default=".env", help="dotenv file to read PAUSEMESH_* from")


def _add_serve(parser: argparse.ArgumentParser) -> None:
    _add_common(parser)
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
    _add_common(pin)
    pin.add_argument("--lock", help="lock file (default gateway.lock.json beside the config)")
    retire = actions.add_parser("retire", help="advance a worker's fencing epoch (retire it)")
    _add_common(retire)
    retire.add_argument("--worker", required=True, help="the worker to retire")


def _add_ops_common(parser: argparse.ArgumentParser) -> None:
    _add_common(parser)
    parser.add_argument(
        "--domain",
        help="the operations' domain instead of a gateway config's: operations an agent"
        " recorded through the ledger (the demo's: demo.flight-bookings)",
    )


def add_ops_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="ops_action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="operations of the config's domain (no payloads)")
    _add_ops_common(listing)
    listing.add_argument("--limit", type=int, default=100)
    for name, summary in (
        ("status", "digests, flags and timestamps of one operation"),
        ("why", "why an operation is where it is"),
    ):
        action = actions.add_parser(name, help=summary)
        _add_ops_common(action)
        action.add_argument("operation")
    resolve = actions.add_parser(
        "resolve", help="record a person's resolution of an OUTCOME_UNKNOWN (never dispatches)"
    )
    _add_ops_common(resolve)
    resolve.add_argument("operation")
    resolve.add_argument("--result-file", required=True, help="JSON file: what really happened")
    resolve.add_argument("--reason", required=True, help="why (kept in the audit record)")
    resolve.add_argument("--by", help="who resolves it (default: the OS user)")


def _settings(args: argparse.Namespace) -> Settings:
    overrides = {
        "host": getattr(args, "host", None),
        "port": getattr(args, "port", None),
        "database_path": args.database_path,
        "database_url": args.database_url,
        "database_schema": args.database_schema,
        "log_level": args.log_level,
        "principal_resolver": getattr(args, "principal_resolver", None),
        "insecure_no_auth": getattr(args, "insecure_no_auth", None),
    }
    return load_settings(env_file=args.env_file, overrides=overrides)


def _print(body: Any) -> None:
    sys.stdout.write(msgspec.json.format(msgspec.json.encode(body), indent=2).decode() + "\n")


def _fail(error: PauseMeshError) -> SystemExit:
    print(f"pausemesh: {error.code}: {error.message}", file=sys.stderr)
    for line in error.details.get("errors", []) if error.code == "GATEWAY_CONFIG_INVALID" else []:
        print(f"  - {line}", file=sys.stderr)
    usage = error.code in {
        "GATEWAY_CONFIG_INVALID",
        "GATEWAY_LOCK_MISSING",
        "GATEWAY_LOCK_MISMATCH",
    }
    return SystemExit(_EXIT_USAGE if usage else _EXIT_REFUSED)


def _run(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    try:
        asyncio.run(main())
    except PauseMeshError as error:
        raise _fail(error) from None


@asynccontextmanager
async def _storage(settings: Settings) -> AsyncIterator[Any]:
    from pausemesh.bootstrap import open_storage  # noqa: PLC0415 - keeps --version light

    storage = await open_storage(settings)
    try:
        if storage.operations is None or storage.fencing is None:
            msg = "these stores have no operation ledger or worker fencing"
            raise GatewayError(msg, code="STORE_UNAVAILABLE")
        yield storage
    finally:
        await storage.close()


def _lock_path(args: argparse.Namespace, config: Any) -> Path:
    from pausemesh.gateway.lock import default_lock_path  # noqa: PLC0415

    return Path(args.lock) if getattr(args, "lock", None) else default_lock_path(config)


def _pin(args: argparse.Namespace) -> None:
    from pausemesh.gateway.config_load import load_gateway_config  # noqa: PLC0415
    from pausemesh.gateway.lock import pin, write_lock  # noqa: PLC0415

    async def main() -> None:
        config = load_gateway_config(args.config)
        lock = await pin(config)
        path = _lock_path(args, config)
        write_lock(lock, path)
        for name, job in lock.jobs.items():
            print(f"pinned {name}: {job.upstream}/{job.tool} sha256:{job.digest}")
        print(f"wrote {path}")

    _run(main)


def _retire(args: argparse.Namespace) -> None:
    from pausemesh.gateway.config_load import load_gateway_config  # noqa: PLC0415

    async def main() -> None:
        config = load_gateway_config(args.config)
        async with _storage(_settings(args)) as storage:
            epoch = await storage.fencing.retire_worker(
                config.domain, args.worker, now=SystemClock().now()
            )
        print(f"worker {args.worker} retired: its epoch is now {epoch}")

    _run(main)


async def _load(args: argparse.Namespace) -> tuple[Any, Any]:
    from pausemesh.gateway.config_load import load_gateway_config  # noqa: PLC0415
    from pausemesh.gateway.lock import check_lock, load_lock  # noqa: PLC0415

    config = load_gateway_config(args.config)
    lock = load_lock(_lock_path(args, config))
    check_lock(config, lock)
    return config, lock


def _serve_stdio(args: argparse.Namespace, settings: Settings) -> None:
    from pausemesh.bootstrap import open_runtime  # noqa: PLC0415
    from pausemesh.gateway.dispatcher import Gateway  # noqa: PLC0415
    from pausemesh.gateway.mcp_compose import build_gateway_server  # noqa: PLC0415

    async def main() -> None:
        config, lock = await _load(args)
        async with open_runtime(settings) as runtime:
            storage = runtime.storage
            if storage.operations is None or storage.fencing is None:
                msg = "these stores have no operation ledger or worker fencing"
                raise GatewayError(msg, code="STORE_UNAVAILABLE")
            gateway = Gateway(
                config, lock, ledger=storage.operations, fencing=storage.fencing, worker=args.worker
            )
            await gateway.start()
            try:
                await build_gateway_server(gateway, lambda: runtime.service).run_stdio_async()
            finally:
                await gateway.close()

    _run(main)


def run_gateway(args: argparse.Namespace) -> None:
    if args.gateway_action == "pin":
        _pin(args)
        return
    if args.gateway_action == "retire":
        _retire(args)
        return
    settings = _settings(args)
    # Imported here: cli imports this module. Its logging goes to stderr (stdout is MCP's).
    from pausemesh.cli.main import _configure_logging, serve_app  # noqa: PLC0415

    _configure_logging(settings)
    if args.stdio:
        _serve_stdio(args, settings)
        return
    from pausemesh.web.gateway_mount import GatewayMount  # noqa: PLC0415

    try:
        config, lock = asyncio.run(_load(args))
    except PauseMeshError as error:
        raise _fail(error) from None
    serve_app(settings, plugins=[GatewayMount(config, lock, worker=args.worker)])


def _ops(args: argparse.Namespace) -> None:
    from pausemesh.gateway.config_load import load_gateway_config  # noqa: PLC0415
    from pausemesh.gateway.inspect import describe, explain, inspect_operation  # noqa: PLC0415

    async def main() -> None:
        # An agent's operations (``--domain``) have no gateway config: no job, no worker.
        config = None if args.domain else load_gateway_config(args.config)
        domain: str = args.domain if config is None else config.domain
        async with _storage(_settings(args)) as storage:
            if args.ops_action == "list":
                records = await storage.operations.list(domain, limit=args.limit)
                _print([describe(r.operation_id, r) for r in records])
                return
            op = args.operation
            if args.ops_action == "resolve":
                await _resolve(args, storage, config, domain, op)
            body = await inspect_operation(storage.operations, storage.fencing, domain, op)
            if args.ops_action == "why":
                body = {"operationId": op, "status": body["status"], "explanation": explain(body)}
            _print(body)

    _run(main)


def _result_file(path: str) -> Any:
    try:
        return msgspec.json.decode(Path(path).read_bytes())
    except (OSError, msgspec.DecodeError) as error:
        msg = f"--result-file must be a readable JSON file ({error})"
        raise GatewayError(msg, code="INVALID_RESULT_FILE") from None


async def _resolve(
    args: argparse.Namespace, storage: Any, config: Any | None, domain: str, op: str
) -> None:
    """Record the operator's result, unless the dispatching worker may still record its reply."""
    from pausemesh.core.operations import begun  # noqa: PLC0415
    from pausemesh.gateway.config import MAX_TIMEOUT_SECONDS  # noqa: PLC0415
    from pausemesh.gateway.reconcile import in_flight  # noqa: PLC0415

    result = _result_file(args.result_file)
    now = SystemClock().now()
    record = begun(op, await storage.operations.get(op))
    dispatch = await storage.fencing.dispatch_of(op)
    job = None if dispatch is None or config is None else config.job(dispatch.job)
    # A job no longer in the config (or no config): assume the longest timeout a job may have.
    timeout = MAX_TIMEOUT_SECONDS if job is None else job.timeout_seconds
    if await in_flight(storage.fencing, domain, timeout, record, now):
        msg = (
            "a current worker is still waiting for the upstream's reply to this operation;"
            " resolving it now would race that reply. Wait until the reply deadline passes"
            " (the job's timeout plus 5 s after the attempt) or retire the worker"
        )
        raise GatewayError(msg, code="OPERATION_IN_FLIGHT", operation_id=op)
    await storage.fencing.resolve(
        op,
        result={"resolvedResult": result},
        resolved_by=args.by or getpass.getuser(),
        reason=args.reason,
        now=now,
    )


def run_ops(args: argparse.Namespace) -> None:
    _ops(args)
