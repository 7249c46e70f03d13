"""``PostgresDatabase``: the asyncpg pool and schema every PostgreSQL store of an app shares.

The pool is either created by ``PostgresDatabase.connect`` (then the database owns and closes
it: the app lifespan) or passed in by a host (then it is never closed here). Nothing here runs
DDL: ``migrate()`` in ``migrate.py`` does, run by a DDL role; the app only checks the
migration ledger (at start, before the first write, and in readiness).
"""

# ruff: noqa: S608 - the only identifier put into SQL text is the validated, quoted schema name

from __future__ import annotations

import asyncio
import contextlib
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeAlias, TypeVar

import asyncpg
from asyncpg import exceptions as pg_errors

from pausemesh.core.errors import PauseMeshError, StoreError
from pausemesh.observability.telemetry import COMMIT_GROUP_SIZE, COMMIT_SECONDS, observe, span
from pausemesh.stores.migrations import Migration, check_ledger
from pausemesh.stores.postgres.schema import (
    DEFAULT_SCHEMA,
    LEDGER_TABLE,
    POSTGRES_MIGRATIONS,
    expected_tables,
    expected_triggers,
    quote_schema,
)

__all__ = (
    "Conn",
    "PostgresDatabase",
    "SharedDatabaseStore",
    "connect_refusal",
    "map_store_error",
)

T = TypeVar("T")
Conn: TypeAlias = "asyncpg.pool.PoolConnectionProxy[asyncpg.Record]"

_MIGRATION_CODES = frozenset(
    {
        "MIGRATION_REQUIRED",
        "MIGRATION_CHECKSUM_MISMATCH",
        "MIGRATION_VERSION_AHEAD",
        "SCHEMA_INCOMPLETE",
    }
)


_ERROR_CODES: tuple[tuple[tuple[type[BaseException], ...], str, str], ...] = (
    ((pg_errors.UniqueViolationError,), "CORRUPT_STREAM", "stored stream disagrees with its head"),
    (
        (pg_errors.UndefinedTableError, pg_errors.InvalidSchemaNameError),
        "MIGRATION_REQUIRED",
        "PauseMesh tables are missing; run `pausemesh migrate`",
    ),
    (
        (pg_errors.UndefinedFunctionError, pg_errors.UndefinedColumnError),
        "SCHEMA_INCOMPLETE",
        "PauseMesh schema is incomplete",
    ),
    (
        (pg_errors.InsufficientPrivilegeError,),
        "STORE_PERMISSION_DENIED",
        "the database role lacks a PauseMesh runtime grant",
    ),
    ((pg_errors.RaiseError,), "STORE_APPEND_ONLY", "PauseMesh persistence is append-only"),
    ((pg_errors.TransactionRollbackError,), "STORE_BUSY", "PostgreSQL rolled the work back"),
    ((pg_errors.DataError,), "CORRUPT_STREAM", "PostgreSQL rejected a stored value"),
)


def map_store_error(error: BaseException) -> StoreError:
    """Translate a driver error into a ``StoreError`` with a stable code (never a bare 500).

    Messages name the error class at most: driver messages may quote the DSN or values.
    """
    if isinstance(error, StoreError):
        return error
    for kinds, code, message in _ERROR_CODES:
        if isinstance(error, kinds):
            return StoreError(message, code=code)
    # Connection loss, server shutdown or restart, refused connections, timeouts, a closed
    # pool: the database is unavailable right now; callers may retry.
    return StoreError(
        f"PostgreSQL is unavailable ({type(error).__name__})", code="STORE_UNAVAILABLE"
    )


def _server_named(dsn: str) -> str:
    """``host:port/database`` of a DSN, never its user or password (for a start-up message)."""
    try:
        parts = urllib.parse.urlsplit(dsn)
        host, port = parts.hostname, parts.port
    except ValueError:
        return "PAUSEMESH_DATABASE_URL"
    database = parts.path.lstrip("/") or "(the user's database)"
    return f"{host or 'localhost'}:{port or 5432}/{database}"


def connect_refusal(dsn: str, error: BaseException) -> StoreError:
    """A connect that failed, in words: why, and what to do (``STORE_UNAVAILABLE``). The
    message names no host (it may travel further than the start-up); which server and
    database (never the credentials) is in ``details["server"]``, for the command line."""
    if isinstance(error, pg_errors.InvalidCatalogNameError):
        why = "the database does not exist; create the database or check PAUSEMESH_DATABASE_URL"
    elif isinstance(error, pg_errors.InvalidAuthorizationSpecificationError):
        why = "the role or its password was refused; check PAUSEMESH_DATABASE_URL"
    elif isinstance(error, (OSError, asyncio.TimeoutError)):
        why = (
            f"the server cannot be reached ({type(error).__name__}); start PostgreSQL or check"
            " PAUSEMESH_DATABASE_URL"
        )
    else:
        return map_store_error(error)
    return StoreError(
        f"cannot connect to PostgreSQL: {why}", code="STORE_UNAVAILABLE", server=_server_named(dsn)
    )


def _connection_lost(error: BaseException) -> bool:
    return isinstance(
        error,
        (
            pg_errors.PostgresConnectionError,
            pg_errors.OperatorInterventionError,
            pg_errors.InterfaceError,
            ConnectionError,
        ),
    )


async def _keep_session(_: asyncpg.Connection) -> None:
    """Pool ``reset`` hook: our connections keep no session state, so skip the reset query."""


async def pending_migrations(conn: Any, q: str, migrations: Sequence[Migration]) -> list[Migration]:
    """``check_ledger`` over the ledger table of the quoted schema ``q``."""
    rows = await conn.fetch(f"SELECT version, name, checksum FROM {q}.{LEDGER_TABLE}")
    return check_ledger({r[0]: (r[1], r[2]) for r in rows}, migrations)


class PostgresDatabase:
    """A pool plus a schema: what every PostgreSQL store of one app shares."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        *,
        schema: str = DEFAULT_SCHEMA,
        owns_pool: bool = False,
        dsn: str | None = None,
        migrations: Sequence[Migration] = POSTGRES_MIGRATIONS,
    ) -> None:
        self.q = quote_schema(schema)
        self.schema = schema
        self.pool = pool
        self.dsn = dsn  # for the dedicated LISTEN connection; never logged
        self.migrations = tuple(migrations)
        self._owns_pool = owns_pool
        self._schema_verified = False
        self._closed = False
        self._on_close: list[Callable[[], Awaitable[None]]] = []

    @classmethod
    async def connect(
        cls,
        dsn: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        min_size: int = 2,
        max_size: int = 16,
        command_timeout: float = 10.0,
        connect_timeout: float = 5.0,
    ) -> PostgresDatabase:
        """Create an owned pool (the app lifespan closes it through ``close``)."""
        quote_schema(schema)  # reject a bad name before connecting anywhere
        try:
            pool = await asyncpg.create_pool(
                dsn,
                min_size=min_size,
                max_size=max_size,
                command_timeout=command_timeout,
                timeout=connect_timeout,
                reset=_keep_session,
                server_settings={"application_name": "pausemesh"},
            )
        except Exception as error:  # noqa: BLE001 - every driver failure becomes a StoreError
            raise connect_refusal(dsn, error) from None
        return cls(pool, schema=schema, owns_pool=True, dsn=dsn)

    def on_close(self, callback: Callable[[], Awaitable[None]]) -> None:
        """Run ``callback`` before the pool closes (e.g. to stop a listener)."""
        self._on_close.append(callback)

    def require_open(self) -> None:
        if self._closed:
            msg = "PostgreSQL store is closed"
            raise StoreError(msg, code="STORE_UNAVAILABLE")

    async def run(self, op: Callable[[Conn], Awaitable[T]], *, read: bool = False) -> T:
        """Run ``op`` on one pooled connection, mapping driver errors to ``StoreError``.

        A read whose connection turned out dead (the server restarted) is retried once on a
        fresh connection; a write is not, since it may have committed: the caller's retry
        (same idempotency key) finds out.
        """
        self.require_open()
        if read:
            return await self._run(op, attempts=2)
        # A write is one statement or one explicit transaction: one commit (no grouping here).
        started = time.perf_counter()
        with span("store.commit", store="postgres", group_size=1):
            try:
                return await self._run(op, attempts=1)
            finally:
                observe(COMMIT_SECONDS, time.perf_counter() - started, "postgres")
                observe(COMMIT_GROUP_SIZE, 1, "postgres")

    async def _run(self, op: Callable[[Conn], Awaitable[T]], *, attempts: int) -> T:
        for attempt in range(attempts):
            try:
                async with self.pool.acquire() as conn:
                    return await op(conn)
            except PauseMeshError:
                raise
            except Exception as error:  # noqa: BLE001 - every driver failure becomes a StoreError
                if attempt + 1 < attempts and _connection_lost(error):
                    continue
                raise map_store_error(error) from None
        raise AssertionError("unreachable")  # pragma: no cover

    async def fetchrow(self, sql: str, *args: Any, read: bool = False) -> Any:
        """One row (or ``None``) of ``sql`` through ``run``."""

        async def op(conn: Conn) -> Any:
            return await conn.fetchrow(sql, *args)

        return await self.run(op, read=read)

    async def ensure_schema(self) -> None:
        """Refuse writes until the ledger matches this code exactly (checked once, then cached)."""
        if not self._schema_verified:
            await self.check_migrations()

    async def check_migrations(self) -> None:
        async def op(conn: Conn) -> None:
            # A missing schema or ledger is MIGRATION_REQUIRED, a missing grant
            # STORE_PERMISSION_DENIED (map_store_error tells them apart).
            missing = await pending_migrations(conn, self.q, self.migrations)
            if missing:
                msg = f"PauseMesh schema needs migration {missing[0].version}; run `pausemesh migrate`"
                raise StoreError(msg, code="MIGRATION_REQUIRED")

        try:
            await self.run(op, read=True)
        except StoreError as error:
            if error.code in _MIGRATION_CODES:
                self._schema_verified = False
            raise
        self._schema_verified = True

    async def check_readiness(self) -> None:
        """Ledger exact, tables and append-only triggers present, runtime role can read.

        Raises ``StoreError`` with MIGRATION_REQUIRED, MIGRATION_CHECKSUM_MISMATCH,
        MIGRATION_VERSION_AHEAD, SCHEMA_INCOMPLETE or STORE_UNAVAILABLE. It does not attest
        function bodies or every constraint: keep the migration and runtime roles apart.
        """
        await self.check_migrations()
        tables = expected_tables(self.migrations)
        triggers = expected_triggers(self.migrations)

        async def op(conn: Conn) -> None:
            rows = await conn.fetch(
                """
                SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = $1 AND c.relkind = 'r'
                """,
                self.schema,
            )
            found_tables = {r[0] for r in rows}
            rows = await conn.fetch(
                """
                SELECT c.relname, t.tgname
                FROM pg_trigger t
                JOIN pg_class c ON c.oid = t.tgrelid
                JOIN pg_namespace n ON n.oid = c.relnamespace
                JOIN pg_proc p ON p.oid = t.tgfoid
                WHERE n.nspname = $1 AND NOT t.tgisinternal AND t.tgenabled IN ('O', 'A')
                  AND p.proname IN ('pausemesh_reject_mutation',
                                    'pausemesh_reject_unerased_delete',
                                    'pausemesh_reject_unerased_update')
                  AND p.pronamespace = n.oid
                  AND p.pronargs = 0
                """,
                self.schema,
            )
            found_triggers = {(r[0], r[1]) for r in rows}
            if not tables <= found_tables or not triggers <= found_triggers:
                msg = "PauseMesh tables or append-only triggers are missing or disabled"
                raise StoreError(msg, code="SCHEMA_INCOMPLETE")
            # Zero-row reads prove the runtime role may read every table it needs.
            probes = ", ".join(
                f"(SELECT 1 FROM {self.q}.{table} WHERE FALSE)" for table in sorted(tables)
            )
            await conn.fetchval(f"SELECT {probes}")

        await self.run(op, read=True)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for callback in self._on_close:
            with contextlib.suppress(Exception):
                await callback()
        if self._owns_pool:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.pool.close(), timeout=10)


class SharedDatabaseStore:
    """What a store on a possibly shared ``PostgresDatabase`` does about readiness and close."""

    def __init__(
        self,
        database: PostgresDatabase,
        *,
        owns_database: bool = False,
        readiness_checked_elsewhere: bool = False,
    ) -> None:
        self.database = database
        self._owns_database = owns_database
        # True when the event store on the same database already checks every table, so
        # one /readyz probe runs the catalog queries once, not once per store.
        self._readiness_elsewhere = readiness_checked_elsewhere

    async def check_readiness(self) -> None:
        if self._readiness_elsewhere:
            self.database.require_open()
            return
        await self.database.check_readiness()

    async def close(self) -> None:
        if self._owns_database:
            await self.database.close()
