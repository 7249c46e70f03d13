"""A2A ``ListTasks``: the official ``a2a-sdk`` client against a real ``pausemesh demo`` process.

Each principal (host resolver: ``X-Principal``) lists only its own tasks, most recently updated
first, page by page over both bindings; the context and state filters apply; a page token the
server did not issue is refused as invalid params.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from a2a.client import Client, ClientConfig, create_client
from a2a.types import ListTasksRequest, Task, TaskState
from a2a.utils.errors import InvalidParamsError

from tests.support.protocol_clients import send_for_task, user_message
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

BINDINGS = ["JSONRPC", "HTTP+JSON"]


@pytest.fixture(name="server", scope="module")
def server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data: Path = tmp_path_factory.mktemp("list-tasks")
    server = ServerProcess(
        [
            "demo",
            "--no-browser",
            "--database-path",
            str(data / "pausemesh.db"),
            "--principal-resolver",
            "tests.support.agui:header_principal",
        ],
        env={"PAUSEMESH_DATA_DIR": str(data)},
    )
    with server:
        yield server


@asynccontextmanager
async def a2a_as(
    server: ServerProcess, principal: str, binding: str = "JSONRPC"
) -> AsyncIterator[Client]:
    async with httpx.AsyncClient(headers={"x-principal": principal}, timeout=30) as http:
        config = ClientConfig(
            httpx_client=http, streaming=False, supported_protocol_bindings=[binding]
        )
        client = await create_client(server.url("/a2a"), client_config=config)
        try:
            yield client
        finally:
            await client.close()


async def all_pages(client: Client, request: ListTasksRequest) -> list[list[str]]:
    pages: list[list[str]] = []
    while True:
        response = await client.list_tasks(request)
        pages.append([task.id for task in response.tasks])
        if not response.next_page_token:
            return pages
        request.page_token = response.next_page_token


@pytest.fixture(name="alice_tasks", scope="module")
async def alice_tasks_fixture(server: ServerProcess) -> list[Task]:
    """Five input-required tasks of alice's (oldest first), the last one answered."""
    async with a2a_as(server, "alice") as alice:
        tasks = [await send_for_task(alice, user_message(text=f"City {n}")) for n in range(5)]
        done = await send_for_task(alice, user_message({"flight": "PM101"}, task_id=tasks[-1].id))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    return tasks


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_principal_lists_only_its_own_tasks_page_by_page_newest_first(
    server: ServerProcess, alice_tasks: list[Task], binding: str
) -> None:
    async with a2a_as(server, f"bob-{binding}", binding) as bob:
        bobs = await send_for_task(bob, user_message(text="Rome"))
        bob_pages = await all_pages(bob, ListTasksRequest(page_size=2))
    async with a2a_as(server, "alice", binding) as alice:
        pages = await all_pages(alice, ListTasksRequest(page_size=2))
        first = await alice.list_tasks(ListTasksRequest(page_size=2))

    newest_first = [task.id for task in reversed(alice_tasks)]
    assert pages == [newest_first[0:2], newest_first[2:4], newest_first[4:]]
    assert first.total_size == len(alice_tasks)
    assert [task_id for page in bob_pages for task_id in page] == [bobs.id]


async def test_list_tasks_filters_by_state_and_context(
    server: ServerProcess, alice_tasks: list[Task]
) -> None:
    async with a2a_as(server, "alice") as alice:
        completed = await alice.list_tasks(ListTasksRequest(status=TaskState.TASK_STATE_COMPLETED))
        waiting = await alice.list_tasks(
            ListTasksRequest(status=TaskState.TASK_STATE_INPUT_REQUIRED)
        )
        in_context = await alice.list_tasks(ListTasksRequest(context_id=alice_tasks[1].context_id))

    assert [t.id for t in completed.tasks] == [alice_tasks[-1].id]
    assert {t.id for t in waiting.tasks} == {t.id for t in alice_tasks[:-1]}
    assert [t.id for t in in_context.tasks] == [alice_tasks[1].id]


@pytest.mark.parametrize("token", ["not-a-token", "WyJ4IiwieSJd"], ids=["garbage", "forged"])
async def test_a_page_token_the_server_did_not_issue_is_invalid_params(
    server: ServerProcess, token: str
) -> None:
    async with a2a_as(server, "carol") as carol:
        with pytest.raises(InvalidParamsError):
            await carol.list_tasks(ListTasksRequest(page_token=token))


def test_an_unknown_status_filter_is_invalid_params_naming_the_field_on_json_rpc(
    server: ServerProcess,
) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": "list-1",
        "method": "ListTasks",
        "params": {"status": "INVALID_STATUS"},
    }
    reply = httpx.post(
        server.url("/a2a/jsonrpc"),
        json=body,
        headers={"x-principal": "dave", "a2a-version": "1.0"},
        timeout=10,
    ).json()

    assert reply["id"] == "list-1"
    assert reply["error"]["code"] == -32602
    assert "status" in reply["error"]["message"]
    assert "TASK_STATE_COMPLETED" in reply["error"]["message"]


@pytest.mark.parametrize("value", ["INVALID_STATUS", "99"])
def test_an_unknown_status_filter_is_a_400_naming_the_field_on_rest(
    server: ServerProcess, value: str
) -> None:
    response = httpx.get(
        server.url("/a2a/rest/tasks"),
        params={"status": value},
        headers={"x-principal": "dave", "a2a-version": "1.0"},
        timeout=10,
    )

    assert response.status_code == 400
    assert "status" in response.text
