"""Least privilege on PostgreSQL: the runtime role runs everything and can destroy nothing."""

# ruff: noqa: S608 - SQL text here only interpolates throwaway test schema names

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from pausemesh.core import ContinuationService, ManualClock
from pausemesh.core.errors import StoreError
from pausemesh.core.operations import EXECUTE, RECONCILIATION_ONLY
from pausemesh.core.resume import Resume, TokenHolder
from pausemesh.stores.postgres import (
    PostgresDatabase,
    PostgresEventStore,
    PostgresOperationLedger,
    PostgresThreadStore,
)
from pausemesh.stores.postgres.migrate import RUNTIME_GRANTS, migrate
from tests.support.postgres import (
    DATABASE_URL,
    drop_schema,
    fresh_schema,
    require_postgres,
    role_url,
    runtime_role,
)

pytestmark = pytest.mark.postgres

TABLES = [table for _, table in RUNTIME_GRANTS]


@pytest.fixture(name="runtime")
async def runtime_fixture() -> AsyncIterator[tuple[str, str]]:
    """(schema, runtime DSN): a migrated schema and a login role with only runtime grants."""
    async with runtime_role() as runtime:
        yield runtime


async def test_the_runtime_role_runs_every_lifecycle(runtime: tuple[str, str]) -> None:
    schema, url = runtime
    database = await PostgresDatabase.connect(url, schema=schema, min_size=1, max_size=4)
    try:
        await database.check_readiness()
        clock = ManualClock()
        service = ContinuationService(
            store=PostgresEventStore(database, owns_database=False), clock=clock
        )
        payload = {"kind": "input", "message": "pick a flight"}
        resumed = await service.create(payload=payload)
        state = (
            await service.resume(
                Resume(
                    continuation_id=resumed.continuation.continuation_id,
                    idempotency_key="k1",
                    payload={"flight": "LH123"},
                    by=TokenHolder(resumed.resume_token),
                )
            )
        ).continuation
        assert state.status == "resumed"
        cancelled = await service.create(payload=payload)
        state = await service.cancel(continuation_id=cancelled.continuation.continuation_id)
        assert state.status == "cancelled"
        await service.create(payload=payload, expires_at=clock.now() + timedelta(seconds=5))
        clock.advance(10)
        assert await service.expire_due() == 1

        threads = PostgresThreadStore(database)
        now = datetime.now(UTC)
        record = await threads.create_or_load("t1", owner="alice", now=now)
        await threads.acquire_lease(
            "t1", lease_id="L1", run_id="r1", now=now, expires_at=now + timedelta(minutes=1)
        )
        assert await threads.append_events("t1", lease_id="L1", run_id="r1", events=["{}"]) == [1]
        assert await threads.wait_for_events("t1", after_sequence=0, wait_seconds=1)
        assert [e.sequence for e in await threads.read_events("t1", after_sequence=0)] == [1]
        await threads.save(record, now=now)
        await threads.release_lease("t1", lease_id="L1")

        ledger = PostgresOperationLedger(database)
        begun = await ledger.begin("travel", "booking-1", tool="book", arguments={}, now=now)
        assert begun.decision == EXECUTE
        await ledger.complete(
            begun.record.operation_id, attempt_id=begun.record.attempt_id, result={}, now=now
        )
        again = await ledger.begin("travel", "booking-1", tool="book", arguments={}, now=now)
        assert again.decision == RECONCILIATION_ONLY
        await threads.close()
    finally:
        await database.close()


@pytest.mark.parametrize("table", TABLES)
async def test_the_runtime_role_cannot_delete_truncate_or_alter(
    runtime: tuple[str, str], table: str
) -> None:
    schema, url = runtime
    conn = await asyncpg.connect(url)
    try:
        for statement in (
            f'DELETE FROM "{schema}".{table}',
            f'TRUNCATE "{schema}".{table}',
            f'ALTER TABLE "{schema}".{table} ADD COLUMN x INT',
            f'ALTER TABLE "{schema}".{table} DISABLE TRIGGER USER',
            f'DROP TABLE "{schema}".{table}',
        ):
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute(statement)
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(f'CREATE TABLE "{schema}".intruder (x INT)')
    finally:
        await conn.close()


@pytest.mark.parametrize("table", ["continuation_events", "agui_thread_events"])
async def test_append_only_triggers_reject_update_delete_truncate_even_for_the_owner(
    table: str,
) -> None:
    await require_postgres()
    schema = fresh_schema()
    await migrate(DATABASE_URL, schema=schema)
    admin = await asyncpg.connect(DATABASE_URL)
    try:
        # Row triggers fire only on rows: put one in each log first.
        await admin.execute(
            f"INSERT INTO \"{schema}\".continuation_streams VALUES ('c1', 1, NULL);"
            f"INSERT INTO \"{schema}\".continuation_events VALUES ('c1', 1, '{{}}');"
            f'INSERT INTO "{schema}".agui_threads (thread_id, body_json, version, last_sequence,'
            " created_at, updated_at) VALUES ('t1', '{}', 1, 1, now(), now());"
            f"INSERT INTO \"{schema}\".agui_thread_events VALUES ('t1', 1, 'r1', '{{}}')"
        )
        for statement in (
            f"UPDATE \"{schema}\".{table} SET event_json = '{{}}'",
            f'DELETE FROM "{schema}".{table}',
            f'TRUNCATE "{schema}".{table} CASCADE',
        ):
            with pytest.raises(asyncpg.RaiseError, match="append-only"):
                await admin.execute(statement)
    finally:
        await admin.close()
        await drop_schema(schema)


async def test_a_role_without_the_runtime_grants_gets_a_clear_code(
    runtime: tuple[str, str],
) -> None:
    schema, _ = runtime
    role = f"pm_bare_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(DATABASE_URL)
    try:
        await admin.execute(f'CREATE ROLE "{role}" LOGIN')
        database = await PostgresDatabase.connect(
            role_url(role), schema=schema, min_size=1, max_size=2
        )
        try:
            with pytest.raises(StoreError) as caught:
                await database.check_readiness()
            assert caught.value.code == "STORE_PERMISSION_DENIED"
            service = ContinuationService(store=PostgresEventStore(database, owns_database=False))
            with pytest.raises(StoreError) as caught:
                await service.create(payload={"kind": "input", "message": "hi"})
            assert caught.value.code == "STORE_PERMISSION_DENIED"
        finally:
            await database.close()
    finally:
        await admin.execute(f'DROP ROLE IF EXISTS "{role}"')
        await admin.close()


async def test_the_runtime_role_erases_a_thread_only_through_the_audited_function(
    runtime: tuple[str, str],
) -> None:
    schema, url = runtime
    database = await PostgresDatabase.connect(url, schema=schema, min_size=1, max_size=2)
    conn = await asyncpg.connect(url)
    try:
        await database.check_readiness()
        threads = PostgresThreadStore(database)
        now = datetime.now(UTC)
        for thread_id in ("t1", "t2"):
            await threads.create_or_load(thread_id, owner="alice", now=now)
            await threads.acquire_lease(
                thread_id, lease_id="L", run_id="r", now=now, expires_at=now + timedelta(minutes=1)
            )
            await threads.append_events(thread_id, lease_id="L", run_id="r", events=["{}", "{}"])

        # No DELETE privilege: the runtime role cannot remove a row directly.
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(
                f"DELETE FROM \"{schema}\".agui_thread_events WHERE thread_id = 't1'"
            )
        # Nor write the erasure ledger to unlock another thread.
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(
                f"INSERT INTO \"{schema}\".agui_thread_erasures VALUES ('t2', now())"
            )

        assert await threads.erase("t1", now=now) is True

        assert await threads.get("t1") is None
        counts = await conn.fetchrow(
            f"SELECT (SELECT count(*) FROM \"{schema}\".agui_threads WHERE thread_id = 't1'),"
            f" (SELECT count(*) FROM \"{schema}\".agui_thread_events WHERE thread_id = 't1'),"
            f" (SELECT count(*) FROM \"{schema}\".agui_thread_events WHERE thread_id = 't2'),"
            f" (SELECT erased_at FROM \"{schema}\".agui_thread_erasures WHERE thread_id = 't1')"
        )
        assert counts is not None
        assert tuple(counts[:3]) == (0, 0, 2)
        assert counts[3] == now  # the audit row: which thread, when; nothing of its content
        await threads.close()
    finally:
        await conn.close()
        await database.close()


async def test_the_runtime_role_erases_a_threads_questions_only_through_the_audited_function(
    runtime: tuple[str, str],
) -> None:
    schema, url = runtime
    database = await PostgresDatabase.connect(url, schema=schema, min_size=1, max_size=2)
    conn = await asyncpg.connect(url)
    try:
        events = PostgresEventStore(database, owns_database=False)
        service = ContinuationService(store=events)
        asked = []
        for thread_id in ("t1", "t2"):
            made = await service.create(
                payload={"kind": "input", "message": f"Which flight for {thread_id}?"},
                correlation_id=thread_id,
                owner="alice",
                metadata={"offered": ["PM101"]},
            )
            await service.resume(
                Resume(
                    continuation_id=made.continuation.continuation_id,
                    idempotency_key="k1",
                    payload={"flight": "PM101"},
                    by=TokenHolder(made.resume_token, principal="alice"),
                )
            )
            asked.append(made.continuation.continuation_id)

        # No UPDATE privilege on the log, and no way to unlock a continuation for one.
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(f"UPDATE \"{schema}\".continuation_events SET event_json = '{{}}'")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(
                f'INSERT INTO "{schema}".continuation_erasures VALUES ($1, now())', asked[1]
            )

        assert await events.erase_correlated("t1", owner="alice", now=datetime.now(UTC)) == 1

        rows = await conn.fetch(
            f'SELECT continuation_id, event_json FROM "{schema}".continuation_events'
            " ORDER BY continuation_id, version"
        )
        erased = [r["event_json"] for r in rows if r["continuation_id"] == asked[0]]
        kept = [r["event_json"] for r in rows if r["continuation_id"] == asked[1]]
        assert len(erased) == len(kept) == 2
        assert not any("Which flight" in e or "PM101" in e for e in erased)
        assert "Which flight for t2?" in kept[0]
        assert "PM101" in kept[1]
        audit = await conn.fetch(f'SELECT continuation_id FROM "{schema}".continuation_erasures')
        assert [r[0] for r in audit] == [asked[0]]
        resumed = await service.get(asked[0], principal="alice")
        assert resumed.status == "resumed"
    finally:
        await conn.close()
        await database.close()
