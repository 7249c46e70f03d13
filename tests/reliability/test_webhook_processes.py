"""Event webhooks from real ``pausemesh demo`` processes: SQLite, and two PostgreSQL replicas.

The demo's A2A agent asks a question (a pause: ``pause.created``) and the follow-up answers it
(``pause.decided``). A local HTTP receiver takes the webhooks of ``PAUSEMESH_WEBHOOKS_FILE``
and checks each with the ``standardwebhooks`` package's verifier. On PostgreSQL both replicas
run the outbox's webhook dispatcher: every event reaches the receiver once, whichever replica
made it; a delivery on the wire when the replicas are SIGKILLed is sent again after a restart
with the same ``webhook-id``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import SendMessageRequest, Task, TaskState
from standardwebhooks.webhooks import Webhook

from pausemesh.stores.postgres.migrate import migrate
from tests.support.postgres import DATABASE_URL, drop_schema, fresh_schema, require_postgres
from tests.support.protocol_clients import send_for_task, user_message
from tests.support.push_receiver import HOLD, Delivery, Receiver
from tests.support.server import ServerProcess

pytestmark = [pytest.mark.slow]

SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
ENV = {
    "PAUSEMESH_A2A_PUSH_ALLOW": "loopback",
    "PAUSEMESH_A2A_PUSH_BACKOFF_SECONDS": "0.2",
    "PAUSEMESH_A2A_PUSH_BACKOFF_MAX_SECONDS": "1",
    "PAUSEMESH_A2A_PUSH_POLL_SECONDS": "0.1",
    "PAUSEMESH_A2A_PUSH_LEASE_SECONDS": "3",
    "PAUSEMESH_A2A_PUSH_TIMEOUT_SECONDS": "2",
    "PAUSEMESH_LOG_LEVEL": "warning",
}


@pytest.fixture(name="receiver", scope="module")
def receiver_fixture() -> Iterator[Receiver]:
    with Receiver() as receiver:
        yield receiver


def webhooks_env(folder: Path, receiver: Receiver) -> dict[str, str]:
    path = folder / "webhooks.json"
    hook = {
        "id": "ops",
        "url": receiver.url,
        "events": ["pause.created", "pause.decided"],
        "secrets": [SECRET],
    }
    path.write_text(json.dumps({"webhooks": [hook]}))
    return {
        **ENV,
        "PAUSEMESH_WEBHOOKS_FILE": str(path),
        "PAUSEMESH_SECRET_KEY": secrets.token_urlsafe(48),
    }


@pytest.fixture(name="sqlite_server", scope="module")
def sqlite_server_fixture(
    tmp_path_factory: pytest.TempPathFactory, receiver: Receiver
) -> Iterator[ServerProcess]:
    folder = tmp_path_factory.mktemp("webhooks-sqlite")
    env = {**webhooks_env(folder, receiver), "PAUSEMESH_DEMO_AIRLINE_PATH": str(folder / "a.db")}
    args = ["demo", "--no-browser", "--database-path", str(folder / "demo.db")]
    with ServerProcess(args, env=env) as server:
        yield server


@pytest.fixture(name="replicas", scope="module")
async def replicas_fixture(
    tmp_path_factory: pytest.TempPathFactory, receiver: Receiver
) -> AsyncIterator[list[ServerProcess]]:
    await require_postgres()
    schema = fresh_schema("pm_hooks")
    await migrate(DATABASE_URL, schema=schema)
    env = {
        **webhooks_env(tmp_path_factory.mktemp("webhooks-pg"), receiver),
        "PAUSEMESH_DATABASE_SCHEMA": schema,
    }
    args = ["demo", "--no-browser", "--database-url", DATABASE_URL]
    servers = [ServerProcess(args, env=env) for _ in range(2)]
    try:
        await asyncio.gather(*(asyncio.to_thread(s.start) for s in servers))
        yield servers
    finally:
        await asyncio.gather(*(asyncio.to_thread(s.close) for s in servers))
        await drop_schema(schema)


async def a2a_send(server: ServerProcess, request: SendMessageRequest) -> Task:
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


async def ask(server: ServerProcess) -> Task:
    return await a2a_send(server, SendMessageRequest(message=user_message(text="Vienna")))


async def answer(server: ServerProcess, task: Task) -> Task:
    async with httpx.AsyncClient(timeout=60) as http:
        config = ClientConfig(httpx_client=http, streaming=False)
        client = await create_client(server.url("/a2a"), client_config=config)
        try:
            return await send_for_task(client, user_message({"flight": "PM101"}, task_id=task.id))
        finally:
            await client.close()


def body(delivery: Delivery) -> dict[str, Any]:
    verified: dict[str, Any] = Webhook(SECRET).verify(delivery.body, delivery.headers)
    return verified


def of_task(task: Task) -> Any:
    return lambda d: (
        json.loads(d.body)["data"]["threadId"] == task.context_id or (task.id in d.body.decode())
    )


async def test_sqlite_a_pause_sends_signed_created_then_decided(
    sqlite_server: ServerProcess, receiver: Receiver
) -> None:
    task = await ask(sqlite_server)
    [created] = await asyncio.to_thread(receiver.wait_for, 1, where=of_task(task))
    done = await answer(sqlite_server, task)
    decided = (await asyncio.to_thread(receiver.wait_for, 2, where=of_task(task)))[1]

    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    first, second = body(created), body(decided)
    assert first["type"] == "pause.created"
    assert first["data"]["message"]
    assert first["data"]["status"] == "pending"
    assert second["type"] == "pause.decided"
    assert second["data"]["pauseId"] == first["data"]["pauseId"]
    assert second["data"]["decision"]["answer"] == {"flight": "PM101"}
    assert created.headers["webhook-id"] != decided.headers["webhook-id"]


@pytest.mark.postgres
async def test_two_replicas_deliver_every_event_once(
    replicas: list[ServerProcess], receiver: Receiver
) -> None:
    first, second = replicas
    tasks = await asyncio.gather(*(ask(s) for s in [first, second] * 4))
    done = await asyncio.gather(
        *(answer(second if n % 2 == 0 else first, t) for n, t in enumerate(tasks))
    )

    contexts = {task.context_id for task in tasks}

    def ours(delivery: Delivery) -> bool:
        return json.loads(delivery.body)["data"]["threadId"] in contexts

    await asyncio.to_thread(receiver.wait_for, 2 * len(tasks), where=ours)
    # Every event queued was delivered: the outbox holds nothing due (no duplicate can follow).
    assert {t.status.state for t in done} == {TaskState.TASK_STATE_COMPLETED}
    received = [d for d in receiver.requests if ours(d)]
    assert len(received) == 2 * len(tasks)
    assert len({d.headers["webhook-id"] for d in received}) == len(received)
    assert (
        sorted(body(d)["type"] for d in received) == ["pause.created"] * 8 + ["pause.decided"] * 8
    )


@pytest.mark.postgres
async def test_a_webhook_on_the_wire_when_the_replicas_are_killed_is_sent_again_with_its_id(
    replicas: list[ServerProcess], receiver: Receiver
) -> None:
    first, second = replicas
    receiver.plan = [HOLD]
    task = await ask(first)
    [held] = await asyncio.to_thread(receiver.wait_for, 1, where=of_task(task))
    await asyncio.gather(asyncio.to_thread(first.kill), asyncio.to_thread(second.kill))
    receiver.release()
    await asyncio.to_thread(second.start)

    again = await asyncio.to_thread(receiver.wait_for, 2, where=of_task(task))

    assert held.answered is None
    assert again[1].answered == 200
    assert again[1].headers["webhook-id"] == held.headers["webhook-id"]
    assert body(again[1]) == body(held)
