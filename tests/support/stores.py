"""Store factories for the contract suite: every kind must pass the same tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from pausemesh.core.ports import EventStore
from pausemesh.stores.memory import InMemoryEventStore
from pausemesh.stores.sqlite import open_sqlite_store

__all__ = ("STORE_FACTORIES", "open_store")

StoreFactory = Callable[[Path], Awaitable[EventStore]]


async def _memory(_: Path) -> EventStore:
    return InMemoryEventStore()


async def _sqlite(tmp_path: Path) -> EventStore:
    return await open_sqlite_store(tmp_path / "contract.db")


# The PostgreSQL store registers itself here too (tests/support/postgres.py).
STORE_FACTORIES: dict[str, StoreFactory] = {"memory": _memory, "sqlite": _sqlite}


@asynccontextmanager
async def open_store(kind: str, tmp_path: Path) -> AsyncIterator[EventStore]:
    store = await STORE_FACTORIES[kind](tmp_path)
    try:
        yield store
    finally:
        await store.close()
