"""A2A push notifications: the official ``a2a-sdk`` client, a real ``pausemesh demo`` process
(SQLite) and a webhook receiver in the test.

A client registers its webhook with the message that opens the task; the receiver is told
when the task needs input and when it completes, each notice signed with a key the server
publishes (JWKS named by the agent card). A receiver that is down gets the notice once it is
back, retried under one id; a server killed while sending sends it again after its restart,
under the same id. A webhook outside the allow policy is refused when it is set, and so is a
URL with whitespace or control characters (nothing stored). 800 deliveries that cannot
succeed (a closed port; rows stored with a CR/LF URL before registration refused it) do not
keep a good webhook from its notice: it is delivered at its first attempt, before any of
them is tried twice.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from a2a.client import Client, ClientConfig, create_client
from a2a.types import (
    AuthenticationInfo,
    ListTaskPushNotificationConfigsRequest,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError

from pausemesh.a2a.store import task_thread_id
from pausemesh.core.push import PushConfigRecord, PushNotice
from pausemesh.stores.sqlite import SqliteDatabase, SqliteThreadStore
from pausemesh.stores.sqlite.push import SqlitePushStore
from tests.support.protocol_clients import send_for_task, user_message
from tests.support.push_receiver import HOLD, Receiver, fetch_jwks, verify
from tests.support.server import ServerProcess, free_port

pytestmark = pytest.mark.slow

FAST_RETRIES = {
    "PAUSEMESH_A2A_PUSH_BACKOFF_SECONDS": "0.2",
    "PAUSEMESH_A2A_PUSH_BACKOFF_MAX_SECONDS": "1",
    "PAUSEMESH_A2A_PUSH_POLL_SECONDS": "0.2",
    "PAUSEMESH_A2A_PUSH_LEASE_SECONDS": "3",
    "PAUSEMESH_A2A_PUSH_TIMEOUT_SECONDS": "2",
    "PAUSEMESH_LOG_LEVEL": "warning",
}
INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
COMPLETED = "TASK_STATE_COMPLETED"


def demo(data: Path, *, allow: str | None = "loopback") -> ServerProcess:
    env = {"PAUSEMESH_DATA_DIR": str(data), **FAST_RETRIES}
    if allow is not None:
        env["PAUSEMESH_A2A_PUSH_ALLOW"] = allow
    return ServerProcess(
        ["demo", "--no-browser", "--database-path", str(data / "pausemesh.db")], env=env
    )


@pytest.fixture(name="receiver")
def receiver_fixture() -> Iterator[Receiver]:
    with Receiver() as receiver:
        yield receiver


@asynccontextmanager
async def a2a(server: ServerProcess) -> AsyncIterator[Client]:
    async with httpx.AsyncClient(timeout=30) as http:
        config = ClientConfig(httpx_client=http, streaming=False)
        client = await create_client(server.url("/a2a"), client_config=config)
        try:
            yield client
        finally:
            await client.close()


async def open_task(client: Client, url: str, token: str = "") -> Task:
    """A new input-required task whose push configuration came with its first message."""
    push = TaskPushNotificationConfig(url=url, token=token)
    request = SendMessageRequest(
        message=user_message(text="Vienna"),
        configuration=SendMessageConfiguration(task_push_notification_config=push),
    )
    async for response in client.send_message(request):
        if response.HasField("task"):
            assert response.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            return response.task
    raise AssertionError


async def test_input_required_and_completion_are_pushed_signed_with_the_published_keys(
    tmp_path: Path, receiver: Receiver
) -> None:
    with demo(tmp_path) as server:
        async with a2a(server) as client:
            task = await open_task(client, receiver.url, token="client-secret")
            asked = receiver.wait_for(1)
            done = await send_for_task(client, user_message({"flight": "PM101"}, task_id=task.id))
            both = receiver.wait_for(2)
        jwks_url, jwks = fetch_jwks(server.url("/a2a/.well-known/agent-card.json"))

    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert [d.state for d in both] == [INPUT_REQUIRED, COMPLETED]
    assert asked[0].task_id == task.id
    assert jwks_url == server.url("/a2a/.well-known/jwks.json")
    for delivery in both:
        claims = verify(delivery, jwks, receiver.url)
        assert claims["task_id"] == task.id
        assert delivery.headers["x-a2a-notification-token"] == "client-secret"
    assert both[0].delivery_id != both[1].delivery_id


async def test_a_forged_or_altered_delivery_fails_verification(
    tmp_path: Path, receiver: Receiver
) -> None:
    with demo(tmp_path) as server:
        async with a2a(server) as client:
            await open_task(client, receiver.url)
            [delivery] = receiver.wait_for(1)
        _, jwks = fetch_jwks(server.url("/a2a/.well-known/agent-card.json"))
    altered = type(delivery)(
        headers=delivery.headers, body=delivery.body.replace(b"INPUT", b"INPVT"), answered=200
    )
    with pytest.raises(AssertionError, match="signed"):
        verify(altered, jwks, receiver.url)
    with pytest.raises(jwt.InvalidAudienceError):
        verify(delivery, jwks, "http://elsewhere.example/hook")


async def test_a_receiver_that_is_down_gets_the_notice_retried_under_one_id(
    tmp_path: Path, receiver: Receiver
) -> None:
    receiver.plan = [503, 503, 503]
    with demo(tmp_path) as server:
        async with a2a(server) as client:
            task = await open_task(client, receiver.url)
            attempts = receiver.wait_for(4)

    assert [a.answered for a in attempts] == [503, 503, 503, 200]
    assert {a.delivery_id for a in attempts} == {attempts[0].delivery_id}
    assert all(a.task_id == task.id and a.state == INPUT_REQUIRED for a in attempts)


async def test_a_server_killed_while_sending_delivers_after_its_restart_under_the_same_id(
    tmp_path: Path, receiver: Receiver
) -> None:
    receiver.plan = [HOLD]
    server = demo(tmp_path)
    with server:
        async with a2a(server) as client:
            task = await open_task(client, receiver.url)
        [held] = receiver.wait_for(1)
        server.kill()  # the notice was sent, never acknowledged: still owed
        receiver.release()
        server.start()
        redelivered = receiver.wait_for(2)

    assert held.answered is None
    assert redelivered[1].answered == 200
    assert redelivered[1].delivery_id == held.delivery_id
    assert redelivered[1].task_id == task.id
    assert redelivered[1].state == INPUT_REQUIRED


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:9/hook", "http://169.254.169.254/latest", "http://10.1.2.3/hook"],
    ids=["loopback", "link-local", "private"],
)
async def test_a_webhook_outside_the_allow_policy_is_refused_when_set(
    tmp_path: Path, url: str
) -> None:
    with demo(tmp_path, allow=None) as server:
        async with a2a(server) as client:
            task = await send_for_task(client, user_message(text="Vienna"))
            with pytest.raises(InvalidParamsError):
                await client.create_task_push_notification_config(
                    TaskPushNotificationConfig(task_id=task.id, url=url)
                )
            with pytest.raises(InvalidParamsError):
                await open_task(client, url)
            allowed = await client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task.id, url="http://93.184.215.14/hook")
            )
    assert allowed.url == "http://93.184.215.14/hook"


CONTROL_URLS = [
    "http://93.184.215.14/\r\nX: 1",
    "http://93.184.215.14/hook\n",
    "http://93.184.215.14/\thook",
    "http://93.184.215.14/ hook",
    "http://93.184.215.14/\x00hook",
    "http://93.184.215.14/\x7fhook",
    "http://93.184.215.14/\x85hook",
    "http://93.184.215.14/\u2028hook",
]
REFUSED = "must not contain whitespace or control characters"


async def test_a_push_url_with_whitespace_or_control_characters_is_refused_and_nothing_stored(
    tmp_path: Path,
) -> None:
    with demo(tmp_path, allow=None) as server:
        async with a2a(server) as client:
            task = await send_for_task(client, user_message(text="Vienna"))
            for url in CONTROL_URLS:
                with pytest.raises(InvalidParamsError, match=REFUSED):
                    await client.create_task_push_notification_config(
                        TaskPushNotificationConfig(task_id=task.id, url=url)
                    )
                with pytest.raises(InvalidParamsError, match=REFUSED):
                    await open_task(client, url)
            listed = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task.id)
            )
        configs = server.url(f"/a2a/rest/tasks/{task.id}/pushNotificationConfigs")
        async with httpx.AsyncClient(headers={"A2A-Version": "1.0"}, timeout=30) as http:
            rest = await http.post(configs, json={"taskId": task.id, "url": CONTROL_URLS[0]})
            rest_listed = await http.get(configs)

    assert list(listed.configs) == []
    assert rest.status_code == 400
    error = rest.json()["error"]
    assert REFUSED in error["message"]
    assert error["details"][0]["metadata"] == {"code": "INVALID_PUSH_URL"}
    assert rest_listed.json().get("configs", []) == []


async def test_a_push_token_or_credentials_that_cannot_be_a_header_is_refused_and_nothing_stored(
    tmp_path: Path, receiver: Receiver
) -> None:
    bad_configs: list[dict[str, Any]] = [
        {"token": "line\r\nX-Injected: 1"},
        {"token": "snow\u2603man"},
        {"authentication": AuthenticationInfo(scheme="Bearer", credentials="a\nb")},
        {"authentication": AuthenticationInfo(scheme="Bea rer\t", credentials="c")},
    ]
    with demo(tmp_path) as server:
        async with a2a(server) as client:
            task = await send_for_task(client, user_message(text="Vienna"))
            for fields in bad_configs:
                config = TaskPushNotificationConfig(task_id=task.id, url=receiver.url, **fields)
                with pytest.raises(InvalidParamsError, match="cannot be sent as an HTTP header"):
                    await client.create_task_push_notification_config(config)
            listed = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task.id)
            )
            # A printable token is still taken as it is.
            await client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task.id, url=receiver.url, token="ok token")
            )
            kept = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task.id)
            )

    assert list(listed.configs) == []
    assert [c.token for c in kept.configs] == ["ok token"]


async def _queue_bad_deliveries(database_path: Path) -> list[str]:
    """800 deliveries that cannot succeed, written straight into the outbox of a fresh
    database (as an older server stored them): 400 to a closed loopback port, 400 with a CR/LF
    URL, over eight tasks. Their task ids."""
    closed = f"http://127.0.0.1:{free_port()}"
    database = await SqliteDatabase(database_path).open()
    threads, push = SqliteThreadStore(database, owns_database=True), SqlitePushStore(database)
    now = datetime.now(UTC)
    tasks = [f"mallory-{n}" for n in range(8)]
    try:
        for task_id in tasks:
            urls = [f"{closed}/hook/{task_id}/{n}" for n in range(50)]
            urls += [f"http://127.0.0.1/\r\nX-Injected: {task_id}-{n}" for n in range(50)]
            for n, url in enumerate(urls):
                config = {"id": f"c{n}", "url": url}
                record = PushConfigRecord(
                    task_id=task_id, config_id=f"c{n}", owner="mallory", config=config
                )
                await push.set_config(record, now=now)
            thread = await threads.create_or_load(task_thread_id(task_id), owner="mallory", now=now)
            notice = PushNotice(event_id=f"{task_id}-e", task_id=task_id, payload={"id": task_id})
            await push.save_task(thread, now=now, notice=notice)
    finally:
        await threads.close()
    return tasks


def _attempts(database_path: Path) -> dict[str, list[int]]:
    """Each task's deliveries' attempt counts, read beside the running server."""
    with sqlite3.connect(f"file:{database_path}?mode=ro", uri=True, timeout=10) as conn:
        rows = conn.execute("SELECT task_id, attempts FROM a2a_push_deliveries").fetchall()
    attempts: dict[str, list[int]] = {}
    for task_id, count in rows:
        attempts.setdefault(task_id, []).append(count)
    return attempts


async def test_800_deliveries_that_cannot_succeed_do_not_keep_a_good_webhook_waiting(
    tmp_path: Path, receiver: Receiver
) -> None:
    database_path = tmp_path / "pausemesh.db"
    bad = await _queue_bad_deliveries(database_path)
    server = demo(tmp_path)
    # A failed attempt is not tried again within the test: a second attempt of any bad
    # delivery can only be one that was never settled.
    server.env["PAUSEMESH_A2A_PUSH_BACKOFF_SECONDS"] = "600"
    server.env["PAUSEMESH_A2A_PUSH_BACKOFF_MAX_SECONDS"] = "600"
    with server:
        async with a2a(server) as client:
            task = await open_task(client, receiver.url)
        deadline = time.monotonic() + 120  # liveness only: the counts below are the test
        while not receiver.requests and time.monotonic() < deadline:
            if max(max(a) for t, a in _attempts(database_path).items() if t in bad) > 1:
                break
            await asyncio.sleep(0.1)
        server.stop()
        log = server.output()
    # Read once the server has stopped: a delivery claimed (its attempt counted) just after
    # a read made while it ran could warn before it stopped.
    attempts = _attempts(database_path)

    assert [(d.task_id, d.answered) for d in receiver.requests] == [(task.id, 200)]
    assert attempts[task.id] == [1]
    assert max(max(attempts[t]) for t in bad) <= 1
    warned = re.findall(r"WARNING.*push delivery ([0-9a-f]{32})", log)
    assert len(warned) == len(set(warned))  # one line per delivery at most
    assert len(warned) <= sum(sum(attempts[t]) for t in bad)
