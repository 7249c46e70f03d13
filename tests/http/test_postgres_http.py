"""``pausemesh serve`` on PostgreSQL: two replicas share one schema and one server key."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from pausemesh.stores.postgres.migrate import migrate
from tests.support.postgres import DATABASE_URL, drop_schema, fresh_schema, require_postgres
from tests.support.rest import assert_problem, create, resume
from tests.support.server import ServerProcess

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

_KEY = "replicas-share-this-key-0123456789abcdef"


@pytest.fixture(name="replicas")
async def replicas_fixture() -> AsyncIterator[tuple[ServerProcess, ServerProcess]]:
    await require_postgres()
    schema = fresh_schema("pm_http")
    await migrate(DATABASE_URL, schema=schema)
    args = ["serve", "--database-url", DATABASE_URL, "--database-schema", schema]
    env = {"PAUSEMESH_SECRET_KEY": _KEY}
    first, second = ServerProcess(args, env=env), ServerProcess(args, env=env)
    try:
        await asyncio.to_thread(first.start)
        await asyncio.to_thread(second.start)
        yield first, second
    finally:
        for server in (first, second):
            await asyncio.to_thread(server.close)
        await drop_schema(schema)


async def test_a_pause_created_on_one_replica_resumes_once_across_both(
    replicas: tuple[ServerProcess, ServerProcess],
) -> None:
    first, second = replicas
    async with (
        httpx.AsyncClient(base_url=first.base_url, timeout=30) as a,
        httpx.AsyncClient(base_url=second.base_url, timeout=30) as b,
    ):
        assert (await b.get("/readyz")).status_code == 200
        continuation_id, token = await create(a)
        fetched = await b.get(f"/v1/continuations/{continuation_id}")
        assert fetched.json()["continuation"]["status"] == "pending"

        responses = await asyncio.gather(
            *(resume(a if i % 2 else b, continuation_id, token, key=f"key-{i}") for i in range(20))
        )
        assert sorted(r.status_code for r in responses) == [200] + [409] * 19
        for response in responses:
            if response.status_code == 409:
                assert_problem(response, 409, "TOKEN_ALREADY_USED")
