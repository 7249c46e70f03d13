"""Embedding on PostgreSQL: a host-owned pool stays the host's; replicas need a shared key."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from pausemesh.core import ContinuationService
from pausemesh.stores.postgres import PostgresDatabase, PostgresThreadStore, postgres_storage
from pausemesh.stores.postgres.migrate import migrate
from tests.support.postgres import DATABASE_URL, drop_schema, fresh_schema, require_postgres

pytestmark = pytest.mark.postgres

NOW = datetime.now(UTC)


async def test_a_host_pool_serves_the_stores_and_the_tail_and_is_never_closed_by_them() -> None:
    await require_postgres()
    schema = fresh_schema()
    await migrate(DATABASE_URL, schema=schema)
    host_pool = await asyncpg.create_pool(DATABASE_URL, min_size=1, max_size=4)
    other = await PostgresDatabase.connect(DATABASE_URL, schema=schema, min_size=1, max_size=2)
    try:
        # No DSN: the LISTEN connection is borrowed from the host's pool.
        storage = await postgres_storage(PostgresDatabase(host_pool, schema=schema))
        service = ContinuationService(store=storage.events)
        created = await service.create(payload={"kind": "input", "message": "hi"})
        assert (await service.get(created.continuation.continuation_id)).status == "pending"
        await storage.readiness()

        threads = storage.threads
        assert isinstance(threads, PostgresThreadStore)
        writer = PostgresThreadStore(other)
        await writer.create_or_load("t1", owner=None, now=NOW)
        await writer.acquire_lease(
            "t1", lease_id="L", run_id="r", now=NOW, expires_at=NOW + timedelta(hours=1)
        )
        waiter = asyncio.create_task(
            threads.wait_for_events("t1", after_sequence=0, wait_seconds=30)
        )
        await threads.listener.start()
        await writer.append_events("t1", lease_id="L", run_id="r", events=["{}"])
        async with asyncio.timeout(30):
            assert await waiter

        await storage.close()
        assert not host_pool.is_closing()
        # The borrowed LISTEN connection went back to the host.
        assert host_pool.get_idle_size() == host_pool.get_size()
        assert await host_pool.fetchval("SELECT 1") == 1
    finally:
        await other.close()
        await host_pool.close()
        await drop_schema(schema)


def test_serving_on_postgres_without_a_shared_key_refuses_to_start() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAUSEMESH_")}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pausemesh",
            "serve",
            "--database-url",
            DATABASE_URL,
            "--env-file",
            os.devnull,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "PAUSEMESH_SECRET_KEY" in result.stderr
    assert DATABASE_URL not in result.stderr + result.stdout
