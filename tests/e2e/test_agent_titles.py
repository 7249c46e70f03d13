"""An agent names its thread (``ThreadTitle``), over HTTP against a real ``pausemesh serve``
process on SQLite: the title shows in ``GET /agui/threads``; it replaces the one taken from
the first user message, never the owner's (``PATCH``); an invalid one ends the run."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.agui import RunResult, post_run, run_body
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

_RESOLVER = "tests.support.agui:header_principal"


@pytest.fixture(name="alice", scope="module")
def alice_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    data: Path = tmp_path_factory.mktemp("agent-titles")
    args = ["serve", "--agent", "tests.support.titling_agent:agent"]
    args += ["--database-path", str(data / "pausemesh.db"), "--principal-resolver", _RESOLVER]
    with (
        ServerProcess(args, env={"PAUSEMESH_DATA_DIR": str(data)}) as server,
        httpx.Client(
            base_url=server.base_url, timeout=30, headers={"X-Principal": "alice"}
        ) as client,
    ):
        yield client


def _say(client: httpx.Client, thread_id: str, text: str) -> RunResult:
    message = {"id": f"user-{uuid.uuid4()}", "role": "user", "content": text}
    return post_run(client, run_body(thread_id, f"run-{uuid.uuid4()}", messages=[message]))


def _title(client: httpx.Client, thread_id: str) -> Any:
    response = client.get("/agui/threads", params={"limit": 100})
    assert response.status_code == 200, response.text
    [listed] = [t for t in response.json()["threads"] if t["threadId"] == thread_id]
    return listed["title"]


def test_an_agent_title_replaces_the_one_from_the_first_message(alice: httpx.Client) -> None:
    thread_id = f"thread-{uuid.uuid4()}"
    assert _say(alice, thread_id, "hello there").last["type"] == "RUN_FINISHED"
    assert _title(alice, thread_id) == "hello there"

    assert _say(alice, thread_id, "name:   Trip to  Lisbon ").last["type"] == "RUN_FINISHED"
    assert _title(alice, thread_id) == "Trip to Lisbon"

    # A later run that does not name the thread keeps the agent's title.
    assert _say(alice, thread_id, "and a hotel").last["type"] == "RUN_FINISHED"
    assert _title(alice, thread_id) == "Trip to Lisbon"


def test_an_agent_title_on_the_first_run_is_the_title(alice: httpx.Client) -> None:
    thread_id = f"thread-{uuid.uuid4()}"
    _say(alice, thread_id, "name: Weekend in Porto")
    assert _title(alice, thread_id) == "Weekend in Porto"


def test_the_owners_title_is_never_replaced_by_the_agent(alice: httpx.Client) -> None:
    thread_id = f"thread-{uuid.uuid4()}"
    _say(alice, thread_id, "name: From the agent")
    renamed = alice.patch(f"/agui/threads/{thread_id}", json={"title": "Mine"})
    assert renamed.status_code == 200, renamed.text

    assert _say(alice, thread_id, "name: The agent again").last["type"] == "RUN_FINISHED"

    assert _title(alice, thread_id) == "Mine"
    snapshot = alice.get(f"/agui/threads/{thread_id}")
    assert snapshot.status_code == 200, snapshot.text
    assert snapshot.json()["title"] == "Mine"


def test_an_invalid_agent_title_ends_the_run_and_changes_nothing(alice: httpx.Client) -> None:
    thread_id = f"thread-{uuid.uuid4()}"
    _say(alice, thread_id, "hello")

    blank = _say(alice, thread_id, "name:    ")
    too_long = _say(alice, thread_id, "name: " + "x" * 201)

    for result in (blank, too_long):
        assert result.last["type"] == "RUN_ERROR"
        assert result.last["code"] == "AGENT_PROTOCOL_ERROR"
        assert "invalid title" in result.last["message"]
    assert _title(alice, thread_id) == "hello"


def test_a_run_that_fails_after_naming_the_thread_does_not_rename_it(
    alice: httpx.Client,
) -> None:
    thread_id = f"thread-{uuid.uuid4()}"
    _say(alice, thread_id, "hello")

    failed = _say(alice, thread_id, "name and fail: Never saved")

    assert failed.last["type"] == "RUN_ERROR"
    assert failed.last["code"] == "TITLING_FAILED"
    assert _title(alice, thread_id) == "hello"
