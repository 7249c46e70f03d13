"""Thread store factories for the contract suite (the PostgreSQL helper registers "postgres")."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from pausemesh.core.threads import ThreadStore
from pausemesh.stores.memory import InMemoryThreadStore
from pausemesh.stores.sqlite import SqliteDatabase, SqliteThreadStore

__all__ = ("THREAD_STORE_FACTORIES", "open_thread_store")

ThreadStoreFactory = Callable[[Path], Awaitable[ThreadStore]]


async def _memory(_: Path) -> ThreadStore:
    return InMemoryThreadStore()


async def _sqlite(tmp_path: Path) -> ThreadStore:
    database = await SqliteDatabase(tmp_path / "threads.db").open()
    return SqliteThreadStore(database, owns_database=True)


THREAD_STORE_FACTORIES: dict[str, ThreadStoreFactory] = {"memory": _memory, "sqlite": _sqlite}


@asynccontextmanager
async def open_thread_store(kind: str, tmp_path: Path) -> AsyncIterator[ThreadStore]:
    store = await THREAD_STORE_FACTORIES[kind](tmp_path)
    try:
        yield store
    finally:
        await store.close()
