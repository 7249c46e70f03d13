"""MCP and A2A pauses across two ``pausemesh demo`` replicas on one PostgreSQL database.

The question is asked on one replica and answered on the other (and replayed back on the
first, and raced over both); the booking happens once. Replicas share the server key, as
PostgreSQL deployments must.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import GetTaskRequest, Message, Task, TaskState
from a2a.utils.errors import A2AError
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
from mcp_types import CallToolResult, InputRequiredResult

from pausemesh.demo.flights import BOOKING_DOMAIN
from pausemesh.stores.postgres.migrate import migrate
from tests.support.a2a_races import assert_one_outcome, final_task, race_follow_ups
from tests.support.mcp_state import continuation_of
from tests.support.postgres import DATABASE_URL, drop_schema, fresh_schema, require_postgres
from tests.support.protocol_clients import flight_answer, send_for_task, tool_round, user_message
from tests.support.server import ServerProcess

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


class Replicas:
    def __init__(self, schema: str) -> None:
        self.schema = schema
        env = {
            "PAUSEMESH_DATABASE_SCHEMA": schema,
            "PAUSEMESH_SECRET_KEY": secrets.token_urlsafe(48),
            "PAUSEMESH_LOG_LEVEL": "warning",
        }
        args = ["demo", "--no-browser", "--database-url", DATABASE_URL]
        self.servers = [ServerProcess(args, env=env) for _ in range(2)]

    async def bookings(self, business_key: str) -> int:
        conn = await asyncpg.connect(DATABASE_URL)
        try:
            count: int = await conn.fetchval(
                f'SELECT count(*) FROM "{self.schema}".operations'  # noqa: S608 - test schema name
                " WHERE domain = $1 AND business_key = $2",
                BOOKING_DOMAIN,
                business_key,
            )
        finally:
            await conn.close()
        return count


@asynccontextmanager
async def running_replicas(prefix: str) -> AsyncIterator[Replicas]:
    """Two demo replicas on a fresh migrated schema (named ``prefix_…``), gone afterwards."""
    await require_postgres()
    schema = fresh_schema(prefix)
    await migrate(DATABASE_URL, schema=schema)
    replicas = Replicas(schema)
    try:
        await asyncio.gather(*(asyncio.to_thread(s.start) for s in replicas.servers))
        yield replicas
    finally:
        await asyncio.gather(*(asyncio.to_thread(s.close) for s in replicas.servers))
        await drop_schema(schema)


@pytest.fixture(name="replicas", scope="module")
async def replicas_fixture() -> AsyncIterator[Replicas]:
    async with running_replicas("pm_protocols") as replicas:
        yield replicas


async def mcp_round(
    server: ServerProcess, state: str | None = None, flight: str | None = None
) -> CallToolResult | InputRequiredResult:
    return await tool_round(
        server.url("/mcp"),
        "book_flight",
        {"destination": "Vienna"},
        state=state,
        responses=flight_answer(flight),
    )


async def test_an_mcp_pause_asked_on_one_replica_is_answered_on_the_other(
    replicas: Replicas,
) -> None:
    first_server, second_server = replicas.servers
    first = await mcp_round(first_server)
    assert isinstance(first, InputRequiredResult)
    assert first.request_state is not None

    done = await mcp_round(second_server, first.request_state, "PM303")
    replay = await mcp_round(first_server, first.request_state, "PM303")

    assert isinstance(done, CallToolResult)
    assert isinstance(replay, CallToolResult)
    assert done.structured_content is not None
    assert done.structured_content["booked"] is True
    assert replay.structured_content == done.structured_content
    assert await replicas.bookings(continuation_of(first.request_state)) == 1


async def a2a_send(server: ServerProcess, message: Message) -> Task | A2AError:
    async with httpx.AsyncClient(timeout=60) as http:
        client = await create_client(
            server.url("/a2a"), client_config=ClientConfig(httpx_client=http, streaming=False)
        )
        try:
            return await send_for_task(client, message)
        except A2AError as refused:
            return refused
        finally:
            await client.close()


async def test_a2a_follow_ups_racing_over_both_replicas_book_once(replicas: Replicas) -> None:
    first_server, second_server = replicas.servers
    task = await a2a_send(first_server, user_message(text="Vienna"))
    assert isinstance(task, Task)
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    cid = task.metadata["pausemesh"]["continuationId"]

    outcomes = await asyncio.gather(
        *(
            a2a_send(server, user_message(data={"flight": "PM202"}, task_id=task.id))
            for server in [first_server, second_server] * 5
        )
    )

    completed = [o for o in outcomes if isinstance(o, Task)]
    assert completed
    assert all(o.status.state == TaskState.TASK_STATE_COMPLETED for o in completed)
    assert await replicas.bookings(cid) == 1
    async with httpx.AsyncClient(timeout=60) as http:
        client = await create_client(
            second_server.url("/a2a"),
            client_config=ClientConfig(httpx_client=http, streaming=False),
        )
        final = await client.get_task(GetTaskRequest(id=task.id))
        await client.close()
    assert final.status.state == TaskState.TASK_STATE_COMPLETED


async def test_twenty_a2a_follow_ups_over_both_replicas_and_every_binding_make_one_completion(
    replicas: Replicas,
) -> None:
    first_server, second_server = replicas.servers
    task = await a2a_send(first_server, user_message(text="Vienna"))
    assert isinstance(task, Task)
    cid = task.metadata["pausemesh"]["continuationId"]

    racers = await race_follow_ups(replicas.servers, task.id)

    final = await final_task(second_server, task.id)
    assert_one_outcome(final, racers)
    assert MessageToDict(await final_task(first_server, task.id)) == MessageToDict(final)
    assert await replicas.bookings(cid) == 1


async def test_a_generic_a2a_client_answers_in_text_on_the_other_replica_and_books_once(
    replicas: Replicas,
) -> None:
    first_server, second_server = replicas.servers
    async with httpx.AsyncClient(timeout=60) as http:
        # Found from the base URL (the root agent card), as a generic client does.
        client = await create_client(
            second_server.base_url, client_config=ClientConfig(httpx_client=http, streaming=False)
        )
        try:
            task = await a2a_send(first_server, user_message(text="Vienna"))
            assert isinstance(task, Task)
            cid = task.metadata["pausemesh"]["continuationId"]
            with pytest.raises(A2AError):
                await send_for_task(client, user_message(text="maybe", task_id=task.id))
            done = await send_for_task(client, user_message(text="PM202", task_id=task.id))
        finally:
            await client.close()

    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert MessageToDict(done.artifacts[0])["parts"][0]["data"]["flight"] == "PM202"
    assert await replicas.bookings(cid) == 1
