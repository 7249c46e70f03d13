"""``migrate()``: the one place PauseMesh runs DDL on PostgreSQL (``pausemesh migrate``).

Run by a DDL-capable migration role, once per deploy, never on app start. Every migrator takes
``pg_advisory_xact_lock`` first, so concurrent runs serialize: one applies, the others find the
ledger complete. A ledger that is ahead of this code, or holds an altered migration, is refused.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import asyncpg

from pausemesh.core.errors import PauseMeshError
from pausemesh.stores.migrations import Migration
from pausemesh.stores.postgres.database import connect_refusal, map_store_error, pending_migrations
from pausemesh.stores.postgres.schema import (
    DEFAULT_SCHEMA,
    LEDGER_DDL,
    LEDGER_TABLE,
    MIGRATION_LOCK_KEY,
    POSTGRES_MIGRATIONS,
    quote_schema,
    render,
)

__all__ = (
    "RUNTIME_FUNCTIONS",
    "RUNTIME_GRANTS",
    "MigrationReport",
    "grant_runtime_role",
    "migrate",
    "runtime_grant_sql",
)

T = TypeVar("T")


class MigrationReport:
    """What one ``migrate`` run did: the versions it applied (empty: already up to date)."""

    __slots__ = ("applied", "schema")

    def __init__(self, schema: str, applied: Sequence[int]) -> None:
        self.schema = schema
        self.applied = tuple(applied)

    def __repr__(self) -> str:
        return f"MigrationReport(schema={self.schema!r}, applied={self.applied!r})"


async def _on_connection(
    target: str | asyncpg.Connection, op: Callable[[asyncpg.Connection], Awaitable[T]]
) -> T:
    """Run ``op`` on ``target``, a DSN (connected and closed here) or an open connection."""
    conn: Any = target
    if isinstance(target, str):
        try:
            conn = await asyncpg.connect(target)
        except Exception as error:  # noqa: BLE001 - every driver failure becomes a StoreError
            raise connect_refusal(target, error) from None
    try:
        return await op(conn)
    except PauseMeshError:
        raise
    except Exception as error:  # noqa: BLE001 - every driver failure becomes a StoreError
        raise map_store_error(error) from None
    finally:
        if isinstance(target, str):
            with contextlib.suppress(Exception):
                await conn.close()


async def _migrate_on(
    conn: asyncpg.Connection, schema: str, migrations: Sequence[Migration]
) -> list[int]:
    q = quote_schema(schema)
    async with conn.transaction(isolation="read_committed"):
        await conn.execute("SELECT pg_advisory_xact_lock($1, $2)", *MIGRATION_LOCK_KEY)
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {q}")
        await conn.execute(render(LEDGER_DDL, schema))
        pending = await pending_migrations(conn, q, migrations)
        for migration in pending:
            for statement in migration.statements:
                await conn.execute(render(statement, schema))
            await conn.execute(
                f"INSERT INTO {q}.{LEDGER_TABLE} (version, name, checksum) VALUES ($1, $2, $3)",  # noqa: S608 - validated schema name
                migration.version,
                migration.name,
                migration.checksum,
            )
        if await pending_migrations(conn, q, migrations):
            msg = "migration ledger is incomplete after migrating"
            raise RuntimeError(msg)
    return [m.version for m in pending]


async def migrate(
    target: str | asyncpg.Connection,
    *,
    schema: str = DEFAULT_SCHEMA,
    migrations: Sequence[Migration] = POSTGRES_MIGRATIONS,
) -> MigrationReport:
    """Bring ``schema`` up to date; ``target`` is a DSN or an open connection (not closed here).

    Raises ``StoreError`` (MIGRATION_VERSION_AHEAD, MIGRATION_CHECKSUM_MISMATCH,
    STORE_UNAVAILABLE, ...) and changes nothing when it refuses.
    """
    quote_schema(schema)  # refuse a bad name before connecting
    applied = await _on_connection(target, lambda conn: _migrate_on(conn, schema, migrations))
    return MigrationReport(schema, applied)


# The runtime role's whole world: no DDL, no DELETE, no TRUNCATE anywhere. Heads, thread
# records and operations take UPDATE (the CAS, leases, outcomes); logs only INSERT.
RUNTIME_GRANTS: tuple[tuple[str, str], ...] = (
    ("SELECT", LEDGER_TABLE),
    ("SELECT, INSERT, UPDATE", "continuation_streams"),
    ("SELECT, INSERT", "continuation_events"),
    ("SELECT, INSERT, UPDATE", "agui_threads"),
    ("SELECT, INSERT", "agui_thread_events"),
    ("SELECT, INSERT, UPDATE", "operations"),
    ("SELECT, INSERT, UPDATE", "gateway_workers"),
    ("SELECT, INSERT", "gateway_dispatches"),
    ("SELECT, INSERT", "operation_resolutions"),
    ("SELECT, INSERT", "operation_recoveries"),
    ("SELECT, INSERT", "operation_unknowns"),
    ("SELECT", "agui_thread_erasures"),
    ("SELECT, INSERT, UPDATE", "rate_limits"),
    ("SELECT, INSERT, UPDATE", "a2a_push_configs"),
    ("SELECT, INSERT, UPDATE", "a2a_push_deliveries"),
    ("SELECT, INSERT", "continuation_approvers"),
    ("SELECT", "continuation_erasures"),
    ("SELECT, INSERT, UPDATE", "agui_thread_queue"),
    ("SELECT, INSERT, UPDATE", "agui_thread_messages"),
    ("SELECT, INSERT", "agui_thread_removed_messages"),
    ("SELECT, INSERT, UPDATE", "agui_thread_state"),
)
# Erasure goes only through these SECURITY DEFINER functions (migrations ``thread_lifecycle``
# and ``continuation_erasure``).
RUNTIME_FUNCTIONS: tuple[str, ...] = (
    "pausemesh_erase_thread(TEXT, TIMESTAMPTZ)",
    "pausemesh_erase_continuations(TEXT, TEXT, TIMESTAMPTZ)",
)


def _quote_role(role: str) -> str:
    if not isinstance(role, str) or not role or len(role) > 63 or "\x00" in role:
        msg = "role must be a name of 1 to 63 characters"
        raise ValueError(msg)
    return '"' + role.replace('"', '""') + '"'


def runtime_grant_sql(role: str, schema: str = DEFAULT_SCHEMA) -> list[str]:
    """The GRANT statements for a runtime role (run them as the schema's owner)."""
    q, r = quote_schema(schema), _quote_role(role)
    return [
        f"GRANT USAGE ON SCHEMA {q} TO {r}",
        *(f"GRANT {privileges} ON {q}.{table} TO {r}" for privileges, table in RUNTIME_GRANTS),
        *(f"GRANT EXECUTE ON FUNCTION {q}.{function} TO {r}" for function in RUNTIME_FUNCTIONS),
    ]


async def grant_runtime_role(
    target: str | asyncpg.Connection, role: str, *, schema: str = DEFAULT_SCHEMA
) -> None:
    """Grant ``role`` exactly the runtime privileges on a migrated ``schema`` (one transaction)."""
    statements = runtime_grant_sql(role, schema)

    async def op(conn: asyncpg.Connection) -> None:
        async with conn.transaction():
            for statement in statements:
                await conn.execute(statement)

    await _on_connection(target, op)
