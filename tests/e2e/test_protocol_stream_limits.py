"""The tail cap counts MCP and A2A tails too, against a real ``pausemesh demo`` process.

``PAUSEMESH_MAX_TAILS_PER_PRINCIPAL=1`` (and one run slot): while one AG-UI tail is open, the
MCP standalone stream, an A2A JSON-RPC ``SubscribeToTask`` and an A2A REST ``:subscribe`` are
each refused with 429 ``TOO_MANY_STREAMS`` before anything reaches the SDK; requests that open
no stream still pass, and so does a run (runs are counted apart); once the tail closes, a tail
is admitted again.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.agui import run_body
from tests.support.rest import assert_problem
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

SSE = {"accept": "text/event-stream"}
SUBSCRIBE = {"jsonrpc": "2.0", "id": 7, "method": "SubscribeToTask", "params": {"id": "task-1"}}
A2A_JSONRPC = {"content-type": "application/json", "a2a-version": "1.0"}


def _refusals(exposition: str) -> dict[str, float]:
    return {
        sample.labels["code"]: sample.value
        for family in text_string_to_metric_families(exposition)
        if family.name == "pausemesh_rate_limited"
        for sample in family.samples
        if sample.name == "pausemesh_rate_limited_total"
    }


@pytest.fixture(name="server", scope="module")
def server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data: Path = tmp_path_factory.mktemp("protocol-stream-limits")
    env = {
        "PAUSEMESH_MAX_STREAMS_PER_PRINCIPAL": "1",
        "PAUSEMESH_MAX_TAILS_PER_PRINCIPAL": "1",
        "PAUSEMESH_METRICS": "1",
        "PAUSEMESH_DATA_DIR": str(data),
    }
    args = ["demo", "--no-browser", "--database-path", str(data / "pausemesh.db")]
    with ServerProcess(args, env=env) as server:
        yield server


def test_mcp_and_a2a_tails_share_the_principals_tail_cap_and_leave_runs_alone(
    server: ServerProcess,
) -> None:
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        user = [{"id": "u-1", "role": "user", "content": "Book me a flight to Lisbon"}]
        asked = http.post("/agui", json=run_body("t-streams", "r-1", messages=user))
        assert asked.status_code == 200
        with http.stream("GET", "/agui/threads/t-streams/events") as tail:
            assert tail.status_code == 200
            assert_problem(http.get("/mcp", headers=SSE), 429, "TOO_MANY_STREAMS")
            subscribed = http.post("/a2a/jsonrpc", json=SUBSCRIBE, headers=A2A_JSONRPC)
            assert_problem(subscribed, 429, "TOO_MANY_STREAMS")
            rest = http.post("/a2a/rest/tasks/task-1:subscribe", headers=SSE)
            assert_problem(rest, 429, "TOO_MANY_STREAMS")
            # A request that opens no stream is not counted.
            card = http.get("/a2a/.well-known/agent-card.json")
            assert card.status_code == 200
            # Nor is a run held back by the tail: it takes the run slot.
            hello = [{"id": "u-2", "role": "user", "content": "Hello"}]
            run = http.post("/agui", json=run_body("t-streams-2", "r-1", messages=hello))
            assert run.status_code == 200, run.text
        refusals = _refusals(http.get("/metrics").text)
        assert refusals == {"TOO_MANY_STREAMS": 3.0, "RATE_LIMITED": 0.0}
        # The tail closed: its slot is free again (the server notices the disconnect).
        deadline = time.monotonic() + 30
        while True:
            again = http.post("/a2a/jsonrpc", json=SUBSCRIBE, headers=A2A_JSONRPC)
            if again.status_code != 429 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert again.status_code != 429, again.text
