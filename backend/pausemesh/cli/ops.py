"""``pausemesh ops list|status|why|resolve``: the operator's view of the gateway's operations.

Takes ``--config`` (or ``--domain``) and the store flags of ``pausemesh gateway``: a gateway
config names no store, so ``ops`` reads the one the flags (or PAUSEMESH_DATABASE_*) name, the
same the gateway was served with. ``list``, ``status`` and ``why`` open it for reading only;
no command creates a database: a SQLite file that does not exist is refused (exit 2), where an
empty new one would answer ``[]`` and ``NOT_STARTED``. Errors are printed with their code and
exit 2 (usage/config) or 1 (refused); ``resolve`` records what a person found out and never
dispatches an upstream call.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec

from pausemesh.cli.options import (
    CliError,
    add_config_arguments,
    ledger_storage,
    run_refusing,
    settings_from,
)
from pausemesh.core.clock import SystemClock
from pausemesh.core.errors import GatewayError
from pausemesh.core.operations import begun
from pausemesh.gateway.config import MAX_TIMEOUT_SECONDS
from pausemesh.gateway.config_load import load_gateway_config
from pausemesh.gateway.inspect import describe, explain, inspect_operation
from pausemesh.settings import Settings

__all__ = ("add_ops_arguments", "run_ops")


def _add_ops_common(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
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


def _print(body: Any) -> None:
    sys.stdout.write(msgspec.json.format(msgspec.json.encode(body), indent=2).decode() + "\n")


def _require_database(settings: Settings) -> None:
    """Refuse a SQLite file that does not exist: opening it would create an empty store."""
    if not settings.uses_postgres and not Path(settings.database_path).is_file():
        msg = (
            f"no PauseMesh database at {settings.database_path}: ops reads the store the"
            " gateway wrote; pass the --database-path (or --database-url) the gateway was"
            " served with (a gateway config does not name its store)"
        )
        raise CliError(msg)


@asynccontextmanager
async def _ops_storage(settings: Settings, *, writes: bool) -> AsyncIterator[Any]:
    """The gateway's store (``_require_database`` first): for reading only unless ``writes``."""
    if writes:
        async with ledger_storage(settings) as storage:
            yield storage
        return
    from pausemesh.bootstrap import open_read_only_storage  # noqa: PLC0415 - the stores load only when opened

    storage, _ = await open_read_only_storage(settings)
    try:
        yield storage
    finally:
        await storage.close()


def run_ops(args: argparse.Namespace) -> None:
    settings = settings_from(args)
    _require_database(settings)

    async def main() -> None:
        # An agent's operations (``--domain``) have no gateway config: no job, no worker.
        config = None if args.domain else load_gateway_config(args.config)
        domain: str = args.domain if config is None else config.domain
        writes = args.ops_action == "resolve"
        async with _ops_storage(settings, writes=writes) as storage:
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

    run_refusing(main)


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
    from pausemesh.gateway.reconcile import in_flight  # noqa: PLC0415 - the MCP SDK loads only for resolve

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
