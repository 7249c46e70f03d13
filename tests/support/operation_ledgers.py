"""Operation ledger factories for the contract suite (the PostgreSQL helper registers "postgres")."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from pausemesh.core.operations import OperationLedger
from pausemesh.stores.memory import InMemoryOperationLedger
from pausemesh.stores.sqlite import open_sqlite_operation_ledger

__all__ = ("LEDGER_FACTORIES", "open_ledger")

LedgerFactory = Callable[[Path], Awaitable[OperationLedger]]


async def _memory(_: Path) -> OperationLedger:
    return InMemoryOperationLedger()


async def _sqlite(tmp_path: Path) -> OperationLedger:
    return await open_sqlite_operation_ledger(str(tmp_path / "operations.db"))


LEDGER_FACTORIES: dict[str, LedgerFactory] = {"memory": _memory, "sqlite": _sqlite}


@asynccontextmanager
async def open_ledger(kind: str, tmp_path: Path) -> AsyncIterator[OperationLedger]:
    ledger = await LEDGER_FACTORIES[kind](tmp_path)
    try:
        yield ledger
    finally:
        await ledger.close()
