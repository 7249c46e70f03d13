"""PostgreSQL for tests: one fresh schema per store, dropped on close; registers "postgres".

Importing this module (tests/conftest.py does) adds a "postgres" factory to every contract
suite's factory table, so the same tests run unchanged on PostgreSQL. When the server is
unreachable, those tests skip with the reason, unless ``PAUSEMESH_REQUIRE_POSTGRES=1`` (CI),
where they fail instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from pausemesh.core.operations import OperationLedger
from pausemesh.core.ports import EventStore
from pausemesh.core.push import PushStore
from pausemesh.core.threads import ThreadStore
from pausemesh.stores.postgres import (
    PostgresDatabase,
    PostgresEventStore,
    PostgresOperationLedger,
    PostgresThreadStore,
)
from pausemesh.stores.postgres.migrate import grant_runtime_role, migrate
from pausemesh.stores.postgres.push import PostgresPushStore
from tests.support.operation_ledgers import LEDGER_FACTORIES
from tests.support.push_stores import PUSH_STORE_FACTORIES, PUSH_STORE_REOPENERS
from tests.support.stores import STORE_FACTORIES
from tests.support.thread_stores import THREAD_STORE_FACTORIES

__all__ = (
    "DATABASE_URL",
    "drop_schema",
    "fresh_schema",
    "migrated_database",
    "require_postgres",
    "role_url",
    "runtime_role",
)

DATABASE_URL = os.environ.get(
    "PAUSEMESH_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
_reachable: bool | None = None


async def require_postgres() -> None:
    """Skip (locally) or fail (CI) when the test server cannot be reached."""
    global _reachable  # noqa: PLW0603 - one probe per test session
    if _reachable is None:
        try:
            conn = await asyncpg.connect(DATABASE_URL, timeout=3)
        except (OSError, asyncpg.PostgresError, TimeoutError):
            _reachable = False
        else:
            await conn.close()
            _reachable = True
    if not _reachable:
        reason = "PostgreSQL is unreachable at PAUSEMESH_TEST_DATABASE_URL"
        if os.environ.get("PAUSEMESH_REQUIRE_POSTGRES") == "1":
            pytest.fail(reason + " and PAUSEMESH_REQUIRE_POSTGRES=1")
        pytest.skip(reason)


def fresh_schema(prefix: str = "pm_test") -> str:
    return f"{prefix}_{secrets.token_hex(6)}"


async def drop_schema(schema: str) -> None:
    conn = await asyncpg.connect(DATABASE_URL)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


async def _open_database(schema: str, *, max_size: int = 8) -> PostgresDatabase:
    database = await PostgresDatabase.connect(
        DATABASE_URL, schema=schema, min_size=1, max_size=max_size
    )

    async def drop() -> None:
        # Let the pool go first, so DROP does not wait on our own connections' locks.
        with contextlib.suppress(Exception):
            await asyncio.wait_for(database.pool.close(), timeout=10)
        await drop_schema(schema)

    database.on_close(drop)
    return database


@asynccontextmanager
async def migrated_database(*, max_size: int = 8) -> AsyncIterator[PostgresDatabase]:
    """A migrated throwaway schema and a database on it; both gone afterwards."""
    await require_postgres()
    schema = fresh_schema()
    await migrate(DATABASE_URL, schema=schema)
    database = await _open_database(schema, max_size=max_size)
    try:
        yield database
    finally:
        await database.close()


async def _migrated(schema: str) -> PostgresDatabase:
    await require_postgres()
    await migrate(DATABASE_URL, schema=schema)
    return await _open_database(schema)


async def _event_store(_: Path) -> EventStore:
    return PostgresEventStore(await _migrated(fresh_schema()))


async def _thread_store(_: Path) -> ThreadStore:
    return PostgresThreadStore(await _migrated(fresh_schema()), owns_database=True)


async def _operation_ledger(_: Path) -> OperationLedger:
    return PostgresOperationLedger(await _migrated(fresh_schema()), owns_database=True)


async def _push_store(_: Path) -> tuple[ThreadStore, PushStore]:
    threads = PostgresThreadStore(await _migrated(fresh_schema()), owns_database=True)
    return threads, PostgresPushStore(threads.database, threads)


@asynccontextmanager
async def _reopen_push_store(
    _: Path, __: ThreadStore, push: PushStore
) -> AsyncIterator[tuple[ThreadStore, PushStore]]:
    """A second pool on the first store's schema (which that store drops when it closes)."""
    assert isinstance(push, PostgresPushStore)
    database = await PostgresDatabase.connect(
        DATABASE_URL, schema=push.database.schema, min_size=1, max_size=4
    )
    threads = PostgresThreadStore(database, owns_database=True)
    try:
        yield threads, PostgresPushStore(database, threads)
    finally:
        await threads.close()


STORE_FACTORIES["postgres"] = _event_store
THREAD_STORE_FACTORIES["postgres"] = _thread_store
LEDGER_FACTORIES["postgres"] = _operation_ledger
PUSH_STORE_FACTORIES["postgres"] = _push_store
PUSH_STORE_REOPENERS["postgres"] = _reopen_push_store


def role_url(role: str) -> str:
    """``DATABASE_URL`` logging in as ``role`` (trust auth: no password)."""
    parts = urlsplit(DATABASE_URL)
    netloc = f"{role}@{parts.hostname or '127.0.0.1'}:{parts.port or 5432}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


@asynccontextmanager
async def runtime_role() -> AsyncIterator[tuple[str, str]]:
    """(schema, runtime DSN): a migrated schema and a login role with only the runtime grants;
    both gone afterwards."""
    await require_postgres()
    schema, role = fresh_schema(), f"pm_rt_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(DATABASE_URL)
    try:
        await admin.execute(f'CREATE ROLE "{role}" LOGIN')
        await migrate(DATABASE_URL, schema=schema)
        await grant_runtime_role(admin, role, schema=schema)
        yield schema, role_url(role)
    finally:
        await drop_schema(schema)
        await admin.execute(f'DROP OWNED BY "{role}"')
        await admin.execute(f'DROP ROLE IF EXISTS "{role}"')
        await admin.close()
