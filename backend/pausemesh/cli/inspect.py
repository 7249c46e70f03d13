"""``pausemesh inspect thread|continuation|operation ID`` and ``pausemesh stats``: read-only.

Offline against the SQLite file (``--database-path``) or PostgreSQL (``--database-url``), with
the other commands' store flags. The store is opened for reading only (SQLite ``mode=ro``; a
PostgreSQL pool whose transactions are read-only) and never migrated: a missing or
unmigrated database is an error (exit 2). An unknown id exits 1. Human text by default,
``--json`` for one JSON object. Never printed: a resume token's hash, a retained response
body, a thread's messages or title (user text).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import msgspec

from pausemesh.cli.failures import failure_line
from pausemesh.cli.options import EXIT_REFUSED, EXIT_USAGE, add_store_arguments, settings_from
from pausemesh.core.errors import StoreError
from pausemesh.core.model import public_event
from pausemesh.core.reducer import replay
from pausemesh.core.timers import timers_view
from pausemesh.gateway.inspect import explain, inspect_operation

__all__ = ("add_inspect_arguments", "add_stats_arguments", "run_inspect", "run_stats")


def add_inspect_arguments(parser: argparse.ArgumentParser) -> None:
    kinds = parser.add_subparsers(dest="inspect_kind", metavar="KIND", required=True)
    for kind, summary in (
        ("thread", "a thread: versions, open questions, run lease (not its messages)"),
        ("continuation", "a continuation: its state and history (no token hash)"),
        ("operation", "a ledger operation: status, digests, who dispatched (no response body)"),
    ):
        sub = kinds.add_parser(kind, help=summary, description=summary)
        sub.add_argument("id", metavar="ID")
        add_store_arguments(sub)


def add_stats_arguments(parser: argparse.ArgumentParser) -> None:
    add_store_arguments(parser)


class _NotFoundError(Exception):
    """The id names nothing in this store (exit 1)."""


def _plain(value: Any) -> Any:
    return msgspec.to_builtins(value)


async def _thread(storage: Any, thread_id: str) -> dict[str, Any]:
    record = None if storage.threads is None else await storage.threads.get(thread_id)
    if record is None:
        raise _NotFoundError(f"no thread {thread_id!r}")
    cohort = record.open_receipt
    return {
        "threadId": record.thread_id,
        "owner": record.owner,
        "version": record.version,
        "lastSequence": record.last_sequence,
        "createdAt": record.created_at,
        "updatedAt": record.updated_at,
        "messages": len(record.messages),
        "openInterrupts": []
        if cohort is None
        else [
            {"continuationId": i.continuation_id, "expiresAt": i.expires_at}
            for i in cohort.receipt.interrupts
        ],
        "lease": None
        if record.lease is None
        else {"runId": record.lease.run_id, "expiresAt": record.lease.expires_at},
    }


async def _continuation(storage: Any, continuation_id: str) -> dict[str, Any]:
    events = await storage.events.load(continuation_id)
    state = replay(events)
    if state is None:
        raise _NotFoundError(f"no continuation {continuation_id!r}")
    body: dict[str, Any] = _plain(state)
    # The public history: every event as the HTTP API shows it, without the token hash.
    body["history"] = [_plain(public_event(event)) for event in events]
    # Its reminder, escalation and default outcome: when due, whether fired (core/timers.py).
    timers = timers_view(state)
    if timers:
        body["timers"] = timers
    return body


async def _operation(storage: Any, operation_id: str) -> dict[str, Any]:
    record = None if storage.operations is None else await storage.operations.get(operation_id)
    if record is None or storage.fencing is None:
        raise _NotFoundError(f"no operation {operation_id!r}")
    body = await inspect_operation(storage.operations, storage.fencing, record.domain, operation_id)
    body["domain"] = record.domain
    # How a lost outcome was recovered or sent again (``core/operations.py``), oldest first.
    body["recoveries"] = [
        {"step": r.step, "number": r.number, "recordedAt": r.recorded_at.isoformat()}
        for r in await storage.operations.recoveries(operation_id)
    ]
    body["explanation"] = explain(body)
    return body


def _open_and(args: argparse.Namespace, read: Callable[[Any, Any], Awaitable[Any]]) -> Any:
    from pausemesh.bootstrap import open_read_only_storage  # noqa: PLC0415 - the stores load only when opened

    settings = settings_from(args, require_key=False)

    async def main() -> Any:
        storage, stats = await open_read_only_storage(settings)
        try:
            return await read(storage, stats)
        finally:
            await storage.close()

    try:
        return asyncio.run(main())
    except StoreError as error:
        print(f"pausemesh: cannot read the store: {failure_line(error)}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None
    except _NotFoundError as missing:
        print(f"pausemesh: {missing}", file=sys.stderr)
        raise SystemExit(EXIT_REFUSED) from None


def _text(value: Any, indent: str = "") -> list[str]:
    lines = []
    for key, item in value.items():
        if isinstance(item, dict) and item:
            lines.append(f"{indent}{key}:")
            lines.extend(_text(item, indent + "  "))
        elif isinstance(item, list) and item and all(isinstance(i, dict) for i in item):
            lines.append(f"{indent}{key}: {len(item)}")
            for entry in item:
                first, *rest = _text(entry, indent + "    ")
                lines.append(f"{indent}  - {first.strip()}")
                lines.extend(rest)
        else:
            shown = "-" if item is None or item in ([], {}) else item
            if isinstance(shown, list):
                shown = ", ".join(str(i) for i in shown)
            lines.append(f"{indent}{key}: {shown}")
    return lines


def _print(body: dict[str, Any], *, as_json: bool) -> None:
    plain = _plain(body)
    if as_json:
        print(msgspec.json.encode(plain).decode())
    else:
        print("\n".join(_text(plain)))


def run_inspect(args: argparse.Namespace) -> None:
    readers = {"thread": _thread, "continuation": _continuation, "operation": _operation}
    reader = readers[args.inspect_kind]

    async def read(storage: Any, _stats: Any) -> dict[str, Any]:
        return await reader(storage, args.id)

    _print(_open_and(args, read), as_json=args.json)


def run_stats(args: argparse.Namespace) -> None:
    async def read(_storage: Any, stats: Any) -> Any:
        return await stats.stats(datetime.now(UTC))

    _print(_plain(_open_and(args, read)), as_json=args.json)
