"""Push store factories for the contract suite (the PostgreSQL helper registers "postgres").

Each yields the thread store and the push store on one database, as the app wires them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from pausemesh.core.push import PushStore
from pausemesh.core.threads import ThreadStore
from pausemesh.stores.memory import InMemoryThreadStore
from pausemesh.stores.memory.push import InMemoryPushStore
from pausemesh.stores.sqlite import SqliteDatabase, SqliteThreadStore
from pausemesh.stores.sqlite.push import SqlitePushStore

__all__ = ("PUSH_STORE_FACTORIES", "open_push_store")

PushStoreFactory = Callable[[Path], Awaitable[tuple[ThreadStore, PushStore]]]


async def _memory(_: Path) -> tuple[ThreadStore, PushStore]:
    threads = InMemoryThreadStore()
    return threads, InMemoryPushStore(threads)


async def _sqlite(tmp_path: Path) -> tuple[ThreadStore, PushStore]:
    database = await SqliteDatabase(tmp_path / "push.db").open()
    return SqliteThreadStore(database, owns_database=True), SqlitePushStore(database)


PUSH_STORE_FACTORIES: dict[str, PushStoreFactory] = {"memory": _memory, "sqlite": _sqlite}


@asynccontextmanager
async def open_push_store(
    kind: str, tmp_path: Path
) -> AsyncIterator[tuple[ThreadStore, PushStore]]:
    threads, push = await PUSH_STORE_FACTORIES[kind](tmp_path)
    try:
        yield threads, push
    finally:
        await threads.close()
