"""The official ``@ag-ui/client`` ``HttpAgent`` (Node) on a thread longer than a snapshot's page
(issue 42): the paused run's ``MESSAGES_SNAPSHOT`` and ``POST /agui/connect`` both carry the
newest ``PAUSEMESH_SNAPSHOT_MESSAGES`` messages (the client, which replaces its messages with a
snapshot, then holds that page), the open question survives, the client answers it from
there, and the server's pages (``GET /agui/threads/{id}/messages``) still hold the whole
conversation, newest first."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.agui import needs_node, run_node_harness
from tests.support.server import ServerProcess

pytestmark = needs_node

PAGE = 1


@pytest.fixture(name="server", scope="module")
def server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    database = tmp_path_factory.mktemp("agui-node-paged") / "demo.db"
    env = {"PAUSEMESH_SNAPSHOT_MESSAGES": str(PAGE)}
    command = ["demo", "--no-browser", "--database-path", str(database)]
    with ServerProcess(command, env=env) as server:
        yield server


def _harness(server: ServerProcess, thread_id: str) -> dict[str, Any]:
    return run_node_harness("harness.mjs", server.base_url, thread_id)


def test_the_official_client_reloads_the_newest_page_and_answers_from_it(
    server: ServerProcess,
) -> None:
    report = _harness(server, "node-paged-1")
    assert report["ok"] is True
    assert report["warnings"] == [], report["warnings"]

    ask = report["ask"]
    assert ask["errors"] == []
    assert ask["types"][-3:] == ["MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED"]
    # The pause's snapshot is the newest page: the official client holds that, no more.
    assert len(ask["messages"]) == PAGE
    assert len(ask["pendingInterrupts"]) == 1
    reload = report["reload"]
    assert reload["types"] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED"]
    assert reload["errors"] == []
    assert reload["messages"] == ask["messages"]
    assert reload["pendingInterrupts"] == ask["pendingInterrupts"]

    answer = report["answer"]
    assert answer["errors"] == []
    assert answer["types"][-1] == "RUN_FINISHED"
    assert answer["pendingInterrupts"] == []
    assert [b["flight"] for b in answer["state"]["bookings"]] == [answer["flight"]]

    # The server kept the whole conversation: paged back, it is what the client saw, in order.
    seen: list[dict[str, Any]] = []
    cursor: str | None = ""
    while cursor is not None:
        query = f"?before={cursor}&limit=2" if cursor else "?limit=2"
        page = httpx.get(server.url(f"/agui/threads/node-paged-1/messages{query}"), timeout=30)
        assert page.status_code == 200, page.text
        seen += page.json()["messages"]
        cursor = page.json()["nextCursor"]
    history = list(reversed(seen))
    asked = history.index(ask["messages"][-1]) + 1
    # More than the page was said before the pause: the user's message opens the thread.
    assert asked > PAGE
    assert history[0]["id"] == "user-node-paged-1"
    assert history[asked - PAGE : asked] == ask["messages"]
    assert history[asked:] == answer["messages"][PAGE:]
