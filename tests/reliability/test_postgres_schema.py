"""PostgreSQL migrations, readiness and corruption detection, on the real server."""

# ruff: noqa: S608 - SQL text here only interpolates throwaway test schema names

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import pytest

from pausemesh.core import ContinuationService
from pausemesh.core.errors import InvalidInputError, StoreError
from pausemesh.core.model import ContinuationCancelled
from pausemesh.stores.postgres import PostgresDatabase, PostgresEventStore, open_postgres_store
from pausemesh.stores.postgres.migrate import migrate
from pausemesh.stores.postgres.schema import LEDGER_TABLE, POSTGRES_MIGRATIONS
from pausemesh.stores.postgres.storage import open_postgres_storage
from tests.support.postgres import (
    DATABASE_URL,
    drop_schema,
    fresh_schema,
    migrated_database,
    require_postgres,
)

pytestmark = pytest.mark.postgres


@pytest.fixture(name="schema")
async def schema_fixture() -> AsyncIterator[str]:
    await require_postgres()
    schema = fresh_schema()
    try:
        yield schema
    finally:
        await drop_schema(schema)


@pytest.fixture(name="admin")
async def admin_fixture() -> AsyncIterator[asyncpg.Connection]:
    await require_postgres()
    conn = await asyncpg.connect(DATABASE_URL)
    try:
        yield conn
    finally:
        await conn.close()


async def _tamper(admin: asyncpg.Connection, sql: str, *args: object) -> None:
    """Write past the append-only triggers and foreign keys, as a broken tool or person would."""
    async with admin.transaction():
        await admin.execute("SET LOCAL session_replication_role = replica")
        await admin.execute(sql, *args)


async def test_concurrent_migrations_apply_once_and_the_others_see_it_applied(
    schema: str,
) -> None:
    reports = await asyncio.gather(*(migrate(DATABASE_URL, schema=schema) for _ in range(8)))
    applied = [r.applied for r in reports if r.applied]
    assert applied == [tuple(m.version for m in POSTGRES_MIGRATIONS)]
    assert sum(1 for r in reports if not r.applied) == 7


async def test_concurrent_pausemesh_migrate_processes_apply_once(schema: str) -> None:
    command = [sys.executable, "-m", "pausemesh", "migrate", "--schema", schema]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAUSEMESH_")}
    env["PAUSEMESH_DATABASE_URL"] = DATABASE_URL
    processes = [
        await asyncio.create_subprocess_exec(
            *command, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        for _ in range(4)
    ]
    outputs = [await p.communicate() for p in processes]
    assert [p.returncode for p in processes] == [0] * 4, outputs
    lines = [out.decode() for out, _ in outputs]
    assert sum("applied migration(s) 1, 2, 3" in line for line in lines) == 1, lines
    assert sum("already up to date" in line for line in lines) == 3, lines
    assert all(DATABASE_URL not in out.decode() + err.decode() for out, err in outputs)


async def test_migrate_again_is_a_no_op(schema: str) -> None:
    await migrate(DATABASE_URL, schema=schema)
    assert (await migrate(DATABASE_URL, schema=schema)).applied == ()


async def test_the_app_refuses_an_unmigrated_schema(schema: str) -> None:
    with pytest.raises(StoreError) as caught:
        await open_postgres_store(DATABASE_URL, schema=schema)
    assert caught.value.code == "MIGRATION_REQUIRED"


async def test_writes_are_refused_against_an_unmigrated_schema(schema: str) -> None:
    database = await PostgresDatabase.connect(DATABASE_URL, schema=schema, min_size=1, max_size=2)
    try:
        service = ContinuationService(store=PostgresEventStore(database, owns_database=False))
        with pytest.raises(StoreError) as caught:
            await service.create(payload={"kind": "input", "message": "hi"})
        assert caught.value.code == "MIGRATION_REQUIRED"
        with pytest.raises(StoreError) as caught:
            await database.check_readiness()
        assert caught.value.code == "MIGRATION_REQUIRED"
    finally:
        await database.close()


async def test_a_ledger_ahead_of_the_code_is_refused_by_migrate_and_readiness(
    schema: str, admin: asyncpg.Connection
) -> None:
    await migrate(DATABASE_URL, schema=schema)
    await admin.execute(
        f'INSERT INTO "{schema}".{LEDGER_TABLE} (version, name, checksum) VALUES (99, $1, $2)',
        "from_the_future",
        "0" * 64,
    )
    with pytest.raises(StoreError) as caught:
        await migrate(DATABASE_URL, schema=schema)
    assert caught.value.code == "MIGRATION_VERSION_AHEAD"
    database = await PostgresDatabase.connect(DATABASE_URL, schema=schema, min_size=1, max_size=2)
    try:
        with pytest.raises(StoreError) as caught:
            await database.check_readiness()
        assert caught.value.code == "MIGRATION_VERSION_AHEAD"
    finally:
        await database.close()


async def test_an_altered_migration_is_refused_by_migrate_and_readiness(
    schema: str, admin: asyncpg.Connection
) -> None:
    await migrate(DATABASE_URL, schema=schema)
    await _tamper(
        admin, f'UPDATE "{schema}".{LEDGER_TABLE} SET checksum = $1 WHERE version = 1', "a" * 64
    )
    with pytest.raises(StoreError) as caught:
        await migrate(DATABASE_URL, schema=schema)
    assert caught.value.code == "MIGRATION_CHECKSUM_MISMATCH"
    with pytest.raises(StoreError) as caught:
        await open_postgres_store(DATABASE_URL, schema=schema)
    assert caught.value.code == "MIGRATION_CHECKSUM_MISMATCH"


async def test_the_migration_ledger_is_append_only(schema: str, admin: asyncpg.Connection) -> None:
    await migrate(DATABASE_URL, schema=schema)
    for statement in (
        f"UPDATE \"{schema}\".{LEDGER_TABLE} SET name = 'x'",
        f'DELETE FROM "{schema}".{LEDGER_TABLE}',
        f'TRUNCATE "{schema}".{LEDGER_TABLE}',
    ):
        with pytest.raises(asyncpg.RaiseError):
            await admin.execute(statement)


async def test_readiness_reports_a_missing_or_disabled_trigger(
    schema: str, admin: asyncpg.Connection
) -> None:
    await migrate(DATABASE_URL, schema=schema)
    store = await open_postgres_store(DATABASE_URL, schema=schema)
    try:
        await store.check_readiness()
        await admin.execute(
            f'ALTER TABLE "{schema}".continuation_events'
            " DISABLE TRIGGER pausemesh_continuation_events_no_mutation"
        )
        with pytest.raises(StoreError) as caught:
            await store.check_readiness()
        assert caught.value.code == "SCHEMA_INCOMPLETE"
    finally:
        await store.close()


async def test_an_unsafe_schema_name_is_refused_before_connecting() -> None:
    for bad in ('x"; DROP TABLE y; --', "1abc", "", "a" * 64, "sch-ema"):
        with pytest.raises(InvalidInputError):
            await migrate("postgresql://nobody@invalid.invalid/none", schema=bad)
        with pytest.raises(InvalidInputError):
            await PostgresDatabase.connect("postgresql://nobody@invalid.invalid/none", schema=bad)


async def test_an_unreachable_server_is_store_unavailable_not_a_crash() -> None:
    with pytest.raises(StoreError) as caught:
        await PostgresDatabase.connect(
            "postgresql://postgres@127.0.0.1:1/test", connect_timeout=2, min_size=1
        )
    assert caught.value.code == "STORE_UNAVAILABLE"
    assert "127.0.0.1" not in caught.value.message


async def _created_stream(database: PostgresDatabase) -> tuple[PostgresEventStore, str]:
    store = PostgresEventStore(database, owns_database=False)
    service = ContinuationService(store=store)
    created = await service.create(payload={"kind": "input", "message": "pick one"})
    return store, created.continuation.continuation_id


@pytest.mark.parametrize(
    ("tampering", "code"),
    [
        pytest.param(
            'UPDATE {s}.continuation_events SET event_json = \'{{"type": "nonsense"}}\''
            " WHERE continuation_id = $1",
            "CORRUPT_STREAM",
            id="undecodable-event",
        ),
        pytest.param(
            "UPDATE {s}.continuation_events SET event_json ="
            " replace(event_json, $1, 'someone-else') WHERE continuation_id = $1",
            "CORRUPT_STREAM",
            id="foreign-id",
        ),
        pytest.param(
            "UPDATE {s}.continuation_events SET version = 2 WHERE continuation_id = $1",
            "CORRUPT_STREAM",
            id="gap",
        ),
        pytest.param(
            "UPDATE {s}.continuation_streams SET version = 2 WHERE continuation_id = $1",
            "CORRUPT_STREAM",
            id="head-ahead-of-events",
        ),
        pytest.param(
            "UPDATE {s}.continuation_streams SET version = 40 WHERE continuation_id = $1",
            "STREAM_TOO_LARGE",
            id="head-beyond-the-cap",
        ),
    ],
)
async def test_load_detects_corruption(
    admin: asyncpg.Connection, tampering: str, code: str
) -> None:
    async with migrated_database() as database:
        store, continuation_id = await _created_stream(database)
        await _tamper(admin, tampering.format(s=database.q), continuation_id)
        with pytest.raises(StoreError) as caught:
            await store.load(continuation_id)
        assert caught.value.code == code


async def test_an_append_onto_a_head_that_lags_its_events_is_corrupt_not_a_crash(
    admin: asyncpg.Connection,
) -> None:
    async with migrated_database() as database:
        store, continuation_id = await _created_stream(database)
        # Version 2 exists, but the head still says 1: the next append collides with it.
        await _tamper(
            admin,
            f"INSERT INTO {database.q}.continuation_events"
            " SELECT continuation_id, 2, event_json FROM"
            f" {database.q}.continuation_events WHERE continuation_id = $1",
            continuation_id,
        )
        cancelled = ContinuationCancelled(
            schema_version=1,
            continuation_id=continuation_id,
            version=2,
            occurred_at=datetime.now(UTC),
        )
        with pytest.raises(StoreError) as caught:
            await store.append(continuation_id, 1, [cancelled])
        assert caught.value.code == "CORRUPT_STREAM"
        with pytest.raises(StoreError) as caught:
            await store.load(continuation_id)
        assert caught.value.code == "CORRUPT_STREAM"


async def test_migration_14_keeps_a_claimed_resend_as_number_one_and_stays_append_only(
    schema: str, admin: asyncpg.Connection
) -> None:
    await migrate(
        DATABASE_URL, schema=schema, migrations=[m for m in POSTGRES_MIGRATIONS if m.version < 14]
    )
    now = datetime(2026, 1, 1, tzinfo=UTC)
    await admin.execute(
        f'INSERT INTO "{schema}".operations (operation_id, domain, business_key, tool,'
        " arguments_json, terms_hash, attempt_id, attempted_at)"
        " VALUES ('op:x', 'travel', 'k', 'book', '{}', 't', 'a1', $1)",
        now,
    )
    await admin.execute(
        f'INSERT INTO "{schema}".operation_recoveries (operation_id, step, recorded_at)'
        " VALUES ('op:x', 'RESENT', $1)",
        now,
    )
    await migrate(DATABASE_URL, schema=schema)
    storage = await open_postgres_storage(DATABASE_URL, schema=schema)
    try:
        ledger = storage.operations
        assert ledger is not None
        assert [(r.step, r.number) for r in await ledger.recoveries("op:x")] == [("RESENT", 1)]
        assert not await ledger.claim_resend("op:x", attempt_id="a1", number=1, now=now)
        assert await ledger.claim_resend("op:x", attempt_id="a1", number=2, now=now)
    finally:
        await storage.close()
    for statement in ("UPDATE {} SET number = 5", "DELETE FROM {}"):
        with pytest.raises(asyncpg.RaiseError):
            await admin.execute(statement.format(f'"{schema}".operation_recoveries'))
