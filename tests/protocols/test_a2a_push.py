"""A2A push notifications: the official ``a2a-sdk`` client, a real ``pausemesh demo`` process
(SQLite) and a webhook receiver in the test.

A client registers its webhook with the message that opens the task; the receiver is told
when the task needs input and when it completes, each notice signed with a key the server
publishes (JWKS named by the agent card). A receiver that is down gets the notice once it is
back, retried under one id; a server killed while sending sends it again after its restart,
under the same id. A webhook outside the allow policy is refused when it is set.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import jwt
import pytest
from a2a.client import Client, ClientConfig, create_client
from a2a.types import (
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError

from tests.support.protocol_clients import send_for_task, user_message
from tests.support.push_receiver import HOLD, Receiver, fetch_jwks, verify
from tests.support.server import ServerProcess

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
