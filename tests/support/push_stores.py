"""Push store factories for the contract suite (the PostgreSQL helper registers "postgres").

Each yields the thread store and the push store on one database, as the app wires them.
``reopen_push_store`` opens a durable kind's database again (SQLite: the file, after the
first store is closed, as a restarted process would; PostgreSQL: a new pool on the schema).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

from pausemesh.core.push import PushStore
from pausemesh.core.threads import ThreadStore
from pausemesh.stores.memory import InMemoryThreadStore
from pausemesh.stores.memory.push import InMemoryPushStore
from pausemesh.stores.sqlite import SqliteDatabase, SqliteThreadStore
from pausemesh.stores.sqlite.push import SqlitePushStore

__all__ = (
    "PUSH_STORE_FACTORIES",
    "PUSH_STORE_REOPENERS",
    "open_push_store",
    "reopen_push_store",
)

PushStoreFactory = Callable[[Path], Awaitable[tuple[ThreadStore, PushStore]]]
PushStoreReopener = Callable[
    [Path, ThreadStore, PushStore], AbstractAsyncContextManager[tuple[ThreadStore, PushStore]]
]


async def _memory(_: Path) -> tuple[ThreadStore, PushStore]:
    threads = InMemoryThreadStore()
    return threads, InMemoryPushStore(threads)


async def _sqlite(tmp_path: Path) -> tuple[ThreadStore, PushStore]:
    database = await SqliteDatabase(tmp_path / "push.db").open()
    return SqliteThreadStore(database, owns_database=True), SqlitePushStore(database)


@asynccontextmanager
async def _reopen_sqlite(
    tmp_path: Path, threads: ThreadStore, _: PushStore
) -> AsyncIterator[tuple[ThreadStore, PushStore]]:
    await threads.close()  # one process owns the file: the first one is gone
    reopened = await _sqlite(tmp_path)
    try:
        yield reopened
    finally:
        await reopened[0].close()


PUSH_STORE_FACTORIES: dict[str, PushStoreFactory] = {"memory": _memory, "sqlite": _sqlite}
# The durable kinds only: the in-memory store does not outlive its object.
PUSH_STORE_REOPENERS: dict[str, PushStoreReopener] = {"sqlite": _reopen_sqlite}


@asynccontextmanager
async def open_push_store(
    kind: str, tmp_path: Path
) -> AsyncIterator[tuple[ThreadStore, PushStore]]:
    threads, push = await PUSH_STORE_FACTORIES[kind](tmp_path)
    try:
        yield threads, push
    finally:
        await threads.close()


def reopen_push_store(
    kind: str, tmp_path: Path, threads: ThreadStore, push: PushStore
) -> AbstractAsyncContextManager[tuple[ThreadStore, PushStore]]:
    """The stores of ``open_push_store(kind, tmp_path)`` opened again on the same data."""
    return PUSH_STORE_REOPENERS[kind](tmp_path, threads, push)
