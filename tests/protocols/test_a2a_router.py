"""The /a2a router end to end: the official ``a2a-sdk`` client against real ``pausemesh demo`` processes.

Both bindings (JSON-RPC and HTTP+JSON) from the agent card; the follow-up that answers an
input-required task resumes its continuation exactly once, also when it is duplicated, sent
20 times concurrently, sent after a restart or to another replica.
"""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, create_client
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import A2AError, InvalidParamsError
from a2a.utils.proto_utils import validate_proto_required_fields
from google.protobuf.json_format import MessageToDict, ParseDict  # type: ignore[import-untyped]

from pausemesh.demo.flights import BOOKING_DOMAIN
from tests.support.protocol_clients import continuation_status
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

BINDINGS = ["JSONRPC", "HTTP+JSON"]


def _demo(data_dir: Path) -> ServerProcess:
    return ServerProcess(
        ["demo", "--no-browser", "--database-path", str(data_dir / "pausemesh.db")],
        env={"PAUSEMESH_DATA_DIR": str(data_dir)},
    )


@pytest.fixture(name="data_dir", scope="module")
def data_dir_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("a2a-demo")


@pytest.fixture(name="server", scope="module")
def server_fixture(data_dir: Path) -> Iterator[ServerProcess]:
    with _demo(data_dir) as server:
        yield server


def bookings(data_dir: Path, business_key: str) -> int:
    with sqlite3.connect(f"file:{data_dir / 'pausemesh.db'}?mode=ro", uri=True) as db:
        (count,) = db.execute(
            "SELECT count(*) FROM operations WHERE domain = ? AND business_key = ?",
            (BOOKING_DOMAIN, business_key),
        ).fetchone()
    return int(count)


@asynccontextmanager
async def a2a_client(
    server: ServerProcess, binding: str = "JSONRPC", *, streaming: bool = False
) -> AsyncIterator[Client]:
    async with httpx.AsyncClient(timeout=30) as http:
        config = ClientConfig(
            httpx_client=http, streaming=streaming, supported_protocol_bindings=[binding]
        )
        client = await create_client(server.url("/a2a"), client_config=config)
        try:
            yield client
        finally:
            await client.close()


async def send(client: Client, message: Message) -> Task:
    """Send and return the final task (a blocking send yields one response)."""
    task: Task | None = None
    async for response in client.send_message(SendMessageRequest(message=message)):
        if response.HasField("task"):
            task = response.task
    if task is None:
        raise AssertionError("no task in the response")
    return task


def user_text(text: str) -> Message:
    return Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])


def answer(task_id: str, data: Any, message_id: str | None = None) -> Message:
    message: Message = ParseDict(
        {
            "messageId": message_id or str(uuid.uuid4()),
            "role": "ROLE_USER",
            "taskId": task_id,
            "parts": [{"data": data}],
        },
        Message(),
    )
    return message


def continuation_id(task: Task) -> str:
    cid: str = MessageToDict(task)["metadata"]["pausemesh"]["continuationId"]
    return cid


async def ask(server: ServerProcess, binding: str = "JSONRPC") -> Task:
    async with a2a_client(server, binding) as client:
        return await send(client, user_text("Oslo"))


def test_the_agent_card_offers_both_bindings(server: ServerProcess) -> None:
    card = httpx.get(server.url("/a2a/.well-known/agent-card.json"), timeout=10).json()
    bindings = {item["protocolBinding"]: item["url"] for item in card["supportedInterfaces"]}
    assert bindings == {
        "JSONRPC": server.url("/a2a/jsonrpc"),
        "HTTP+JSON": server.url("/a2a/rest"),
    }


async def test_a_generic_client_finds_the_agent_card_from_the_base_url(
    server: ServerProcess,
) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        card = await A2ACardResolver(http, server.base_url).get_agent_card()
        config = ClientConfig(httpx_client=http, streaming=False)
        client = await create_client(server.base_url, client_config=config)
        try:
            task = await send(client, user_text("Porto"))
        finally:
            await client.close()

    assert card.name == "PauseMesh travel assistant"
    assert {item.url for item in card.supported_interfaces} == {
        server.url("/a2a/jsonrpc"),
        server.url("/a2a/rest"),
    }
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED


@pytest.mark.parametrize(
    ("body", "expected_id"),
    [
        ({"jsonrpc": "1.0", "id": 7, "method": "GetTask", "params": {"id": "x"}}, 7),
        ({"jsonrpc": "2.0", "id": "req-1", "params": {}}, "req-1"),
        ({"jsonrpc": "2.0", "id": "req-2", "method": "GetTask", "params": [1]}, "req-2"),
        ({"jsonrpc": "2.0", "id": {"not": "readable"}, "method": "GetTask"}, None),
    ],
    ids=["version-1.0", "no-method", "params-not-an-object", "unreadable-id"],
)
def test_an_invalid_json_rpc_request_echoes_its_readable_id(
    server: ServerProcess, body: dict[str, Any], expected_id: Any
) -> None:
    response = httpx.post(server.url("/a2a/jsonrpc"), json=body, timeout=10)

    reply = response.json()
    assert reply["error"]["code"] == -32600
    assert reply["id"] == expected_id


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_text_answer_to_a_one_field_question_books_once(
    server: ServerProcess, data_dir: Path, binding: str
) -> None:
    task = await ask(server, binding)
    message = user_text("PM202")
    message.task_id = task.id
    async with a2a_client(server, binding) as client:
        done = await send(client, message)

    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert MessageToDict(done.artifacts[0])["parts"][0]["data"]["flight"] == "PM202"
    assert bookings(data_dir, continuation_id(task)) == 1


async def test_a_text_answer_that_fits_no_choice_is_refused_naming_the_choices(
    server: ServerProcess,
) -> None:
    task = await ask(server)
    message = user_text("maybe")
    message.task_id = task.id
    async with a2a_client(server) as client:
        with pytest.raises(InvalidParamsError) as refused:
            await send(client, message)
        still = await client.get_task(GetTaskRequest(id=task.id))

    assert all(code in str(refused.value) for code in ("PM101", "PM202", "PM303"))
    assert still.status.state == TaskState.TASK_STATE_INPUT_REQUIRED


@pytest.mark.parametrize("binding", BINDINGS)
async def test_send_pauses_as_input_required_then_the_follow_up_completes(
    server: ServerProcess, data_dir: Path, binding: str
) -> None:
    task = await ask(server, binding)

    validate_proto_required_fields(task)
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert task.status.message.parts[0].text == "Which flight to Oslo should I book?"
    cid = continuation_id(task)
    assert continuation_status(server, cid) == "pending"

    async with a2a_client(server, binding) as client:
        done = await send(client, answer(task.id, {"flight": "PM303"}))
        fetched = await client.get_task(GetTaskRequest(id=task.id))

    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert MessageToDict(done.artifacts[0])["parts"][0]["data"]["flight"] == "PM303"
    assert fetched.status.state == TaskState.TASK_STATE_COMPLETED
    assert continuation_status(server, cid) == "resumed"
    assert bookings(data_dir, cid) == 1


async def test_streaming_follow_up_completes_too(server: ServerProcess, data_dir: Path) -> None:
    task = await ask(server)
    async with a2a_client(server, "HTTP+JSON", streaming=True) as client:
        message = answer(task.id, {"flight": "PM101"})
        states = [
            response.status_update.status.state
            async for response in client.send_message(SendMessageRequest(message=message))
            if response.HasField("status_update")
        ]
    assert states[-1] == TaskState.TASK_STATE_COMPLETED
    assert bookings(data_dir, continuation_id(task)) == 1


@pytest.mark.parametrize(
    "data",
    [{"flight": "PM999"}, {"flight": 202}, {}, "PM101"],
    ids=["not-offered", "wrong-type", "missing", "not-an-object"],
)
async def test_an_answer_outside_the_schema_is_refused_and_the_task_stays_interrupted(
    server: ServerProcess, data_dir: Path, data: Any
) -> None:
    task = await ask(server)
    cid = continuation_id(task)

    async with a2a_client(server) as client:
        with pytest.raises(InvalidParamsError):
            await send(client, answer(task.id, data))
        still = await client.get_task(GetTaskRequest(id=task.id))
        assert still.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert continuation_status(server, cid) == "pending"
        done = await send(client, answer(task.id, {"flight": "PM202"}))

    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert bookings(data_dir, cid) == 1


async def test_a_duplicate_follow_up_books_nothing_more(
    server: ServerProcess, data_dir: Path
) -> None:
    task = await ask(server)
    duplicate = answer(task.id, {"flight": "PM202"}, message_id="same-message")
    async with a2a_client(server) as client:
        first = await send(client, duplicate)
        with pytest.raises(A2AError):
            await send(client, duplicate)  # the task is terminal now
    assert first.status.state == TaskState.TASK_STATE_COMPLETED
    assert bookings(data_dir, continuation_id(task)) == 1


async def test_twenty_concurrent_follow_ups_book_once(
    server: ServerProcess, data_dir: Path
) -> None:
    task = await ask(server)

    async def follow_up() -> Task | BaseException:
        try:
            async with a2a_client(server) as client:
                return await send(client, answer(task.id, {"flight": "PM101"}))
        except A2AError as refused:
            return refused

    outcomes = await asyncio.gather(*(follow_up() for _ in range(20)))

    completed = [o for o in outcomes if isinstance(o, Task)]
    assert completed
    assert all(o.status.state == TaskState.TASK_STATE_COMPLETED for o in completed)
    assert bookings(data_dir, continuation_id(task)) == 1
    async with a2a_client(server) as client:
        final = await client.get_task(GetTaskRequest(id=task.id))
    assert final.status.state == TaskState.TASK_STATE_COMPLETED


async def test_the_follow_up_completes_after_a_restart_and_on_another_replica(
    tmp_path: Path,
) -> None:
    with _demo(tmp_path) as primary:
        task = await ask(primary)
        primary.restart()
        with _demo(tmp_path) as replica:
            async with a2a_client(replica) as client:
                done = await send(client, answer(task.id, {"flight": "PM303"}))
            async with a2a_client(primary) as client:
                seen = await client.get_task(GetTaskRequest(id=task.id))

    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert seen.status.state == TaskState.TASK_STATE_COMPLETED
    assert bookings(tmp_path, continuation_id(task)) == 1


async def test_an_unknown_task_is_not_found(server: ServerProcess) -> None:
    async with a2a_client(server) as client:
        with pytest.raises(A2AError):
            await send(client, answer("no-such-task", {"flight": "PM101"}))


# -- authorization pauses: TASK_STATE_AUTH_REQUIRED, credentials out of band ----------------


async def connect_request(server: ServerProcess) -> tuple[Task, str]:
    async with a2a_client(server) as client:
        task = await send(client, user_text("connect my airline account"))
    text = task.status.message.parts[0].text
    link = text[text.index("http") :]
    return task, link


async def test_an_authorization_pause_is_auth_required_and_continues_after_the_sign_in(
    server: ServerProcess,
) -> None:
    task, link = await connect_request(server)
    assert task.status.state == TaskState.TASK_STATE_AUTH_REQUIRED
    assert link.startswith(server.url("/demo/airline/connect?state="))
    cid = continuation_id(task)

    async with a2a_client(server) as client:
        # Credentials never travel in A2A messages: anything but the narrow control is refused.
        with pytest.raises(InvalidParamsError):
            await send(client, answer(task.id, {"token": "secret"}))
        early = await send(client, answer(task.id, {"action": "retry"}))
        assert early.status.state == TaskState.TASK_STATE_AUTH_REQUIRED
        assert continuation_status(server, cid) == "pending"

        async with httpx.AsyncClient(timeout=10) as browser:  # the out-of-band sign-in
            assert (await browser.get(link)).status_code == 200
        done = await send(client, answer(task.id, {"action": "retry"}))

    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert continuation_status(server, cid) == "resumed"


async def test_rejecting_an_authorization_pause_cancels_it(server: ServerProcess) -> None:
    task, _ = await connect_request(server)
    async with a2a_client(server) as client:
        done = await send(client, answer(task.id, {"action": "reject"}))
    assert done.status.state == TaskState.TASK_STATE_REJECTED
    assert continuation_status(server, continuation_id(task)) == "cancelled"


async def test_cancelling_an_input_required_task_cancels_its_pause(server: ServerProcess) -> None:
    task = await ask(server)
    async with a2a_client(server) as client:
        cancelled = await client.cancel_task(CancelTaskRequest(id=task.id))
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert continuation_status(server, continuation_id(task)) == "cancelled"
