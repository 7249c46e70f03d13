"""A2A push notifications across two ``pausemesh demo`` replicas on one PostgreSQL database.

Both replicas run a dispatcher over the one outbox: every notice reaches the receiver once,
whichever replica queued it and whichever claimed it. Replicas killed while a notice was on
the wire send it again after a restart, under the same id.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import (
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)

from pausemesh.stores.postgres.migrate import migrate
from tests.support.postgres import DATABASE_URL, drop_schema, fresh_schema, require_postgres
from tests.support.protocol_clients import send_for_task, user_message
from tests.support.push_receiver import HOLD, Receiver, fetch_jwks, verify
from tests.support.server import ServerProcess

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ENV = {
    "PAUSEMESH_A2A_PUSH_ALLOW": "loopback",
    "PAUSEMESH_A2A_PUSH_BACKOFF_SECONDS": "0.2",
    "PAUSEMESH_A2A_PUSH_BACKOFF_MAX_SECONDS": "1",
    "PAUSEMESH_A2A_PUSH_POLL_SECONDS": "0.1",
    "PAUSEMESH_A2A_PUSH_LEASE_SECONDS": "3",
    "PAUSEMESH_A2A_PUSH_TIMEOUT_SECONDS": "2",
    "PAUSEMESH_LOG_LEVEL": "warning",
}


@pytest.fixture(name="receiver")
def receiver_fixture() -> Iterator[Receiver]:
    with Receiver() as receiver:
        yield receiver


@pytest.fixture(name="replicas")
async def replicas_fixture() -> AsyncIterator[list[ServerProcess]]:
    await require_postgres()
    schema = fresh_schema("pm_push")
    await migrate(DATABASE_URL, schema=schema)
    env = {
        **ENV,
        "PAUSEMESH_DATABASE_SCHEMA": schema,
        "PAUSEMESH_SECRET_KEY": secrets.token_urlsafe(48),
    }
    args = ["demo", "--no-browser", "--database-url", DATABASE_URL]
    servers = [ServerProcess(args, env=env) for _ in range(2)]
    try:
        await asyncio.gather(*(asyncio.to_thread(s.start) for s in servers))
        yield servers
    finally:
        await asyncio.gather(*(asyncio.to_thread(s.close) for s in servers))
        await drop_schema(schema)


async def send(server: ServerProcess, request: SendMessageRequest) -> Task:
    async with httpx.AsyncClient(timeout=60) as http:
        config = ClientConfig(httpx_client=http, streaming=False)
        client = await create_client(server.url("/a2a"), client_config=config)
        try:
            async for response in client.send_message(request):
                if response.HasField("task"):
                    return response.task
        finally:
            await client.close()
    raise AssertionError


def opening(url: str) -> SendMessageRequest:
    push = TaskPushNotificationConfig(url=url)
    return SendMessageRequest(
        message=user_message(text="Vienna"),
        configuration=SendMessageConfiguration(task_push_notification_config=push),
    )


async def answered(server: ServerProcess, task: Task) -> Task:
    async with httpx.AsyncClient(timeout=60) as http:
        config = ClientConfig(httpx_client=http, streaming=False)
        client = await create_client(server.url("/a2a"), client_config=config)
        try:
            return await send_for_task(client, user_message({"flight": "PM101"}, task_id=task.id))
        finally:
            await client.close()


async def test_two_replicas_deliver_every_notice_once(
    replicas: list[ServerProcess], receiver: Receiver
) -> None:
    first, second = replicas
    tasks = await asyncio.gather(*(send(s, opening(receiver.url)) for s in [first, second] * 4))
    done = await asyncio.gather(
        *(answered(second if n % 2 == 0 else first, t) for n, t in enumerate(tasks))
    )
    await asyncio.to_thread(receiver.wait_for, 2 * len(tasks))
    await asyncio.sleep(2)  # room for a duplicate to show up, were there one
    _, jwks = fetch_jwks(first.url("/a2a/.well-known/agent-card.json"))

    assert {t.status.state for t in done} == {TaskState.TASK_STATE_COMPLETED}
    received = receiver.requests
    assert len(received) == 2 * len(tasks)
    assert len({r.delivery_id for r in received}) == len(received)
    for task in tasks:
        states = sorted(r.state for r in received if r.task_id == task.id)
        assert states == ["TASK_STATE_COMPLETED", "TASK_STATE_INPUT_REQUIRED"]
    for delivery in received:
        verify(delivery, jwks, receiver.url)  # either replica's signature: one shared key


async def test_a_notice_on_the_wire_when_both_replicas_die_is_sent_after_a_restart(
    replicas: list[ServerProcess], receiver: Receiver
) -> None:
    first, second = replicas
    receiver.plan = [HOLD]
    task = await send(first, opening(receiver.url))
    [held] = await asyncio.to_thread(receiver.wait_for, 1)
    await asyncio.gather(asyncio.to_thread(first.kill), asyncio.to_thread(second.kill))
    receiver.release()
    await asyncio.to_thread(second.start)

    redelivered = await asyncio.to_thread(receiver.wait_for, 2)

    assert held.answered is None
    assert redelivered[1].answered == 200
    assert (redelivered[1].delivery_id, redelivered[1].task_id) == (held.delivery_id, task.id)
