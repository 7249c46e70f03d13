"""The official ``@ag-ui/client`` 1.0.0 ``HttpAgent`` (Node) against a real demo server.

ask → interrupt; reload (a fresh agent restored through ``POST /agui/connect``) → the same
messages and ``pendingInterrupts``; answer → success and one booking; no console warnings
from the client (``[ag-ui]`` enforce/compat warnings would mean we sent something off-spec).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from pausemesh import __version__
from tests.support.agui import needs_node, run_node_harness
from tests.support.server import ServerProcess

pytestmark = needs_node


@pytest.fixture(name="server", scope="module")
def server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    database = tmp_path_factory.mktemp("agui-node") / "demo.db"
    with ServerProcess(["demo", "--no-browser", "--database-path", str(database)]) as server:
        yield server


def _harness(server: ServerProcess, thread_id: str) -> dict[str, Any]:
    return run_node_harness("harness.mjs", server.base_url, thread_id)


def test_official_http_agent_asks_reloads_through_connect_and_answers(
    server: ServerProcess,
) -> None:
    report = _harness(server, "node-thread-1")
    assert report["ok"] is True
    assert report["warnings"] == [], report["warnings"]
    assert not any("[ag-ui]" in w for w in report["warnings"])

    ask = report["ask"]
    assert ask["errors"] == []
    assert ask["types"][0] == "RUN_STARTED"
    assert ask["types"][-1] == "RUN_FINISHED"
    [interrupt] = ask["pendingInterrupts"]
    assert interrupt["message"] == "Which flight should I book?"
    assert interrupt["reason"] == "input_required"

    reload = report["reload"]
    assert reload["types"] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED"]
    assert reload["errors"] == []
    assert reload["pendingInterrupts"] == ask["pendingInterrupts"]
    assert reload["messages"] == ask["messages"]

    answer = report["answer"]
    assert answer["errors"] == []
    assert answer["types"][-1] == "RUN_FINISHED"
    assert answer["pendingInterrupts"] == []
    assert answer["messages"][-1]["role"] == "assistant"
    assert answer["flight"] in answer["messages"][-1]["content"]
    assert [b["flight"] for b in answer["state"]["bookings"]] == [answer["flight"]]

    snapshot = httpx.get(server.url("/agui/threads/node-thread-1"), timeout=30).json()
    assert snapshot["pendingInterrupts"] == []
    assert snapshot["state"] == answer["state"]
    assert snapshot["messages"] == answer["messages"]


def test_a_client_subclass_discovers_the_capabilities_in_the_official_shape(
    server: ServerProcess,
) -> None:
    report = run_node_harness("capabilities.mjs", server.base_url)
    assert report["ok"] is True, report.get("error")

    # Parsed by @ag-ui/core's AgentCapabilitiesSchema with nothing stripped or altered.
    assert report["unchanged"] is True
    # The documented descriptor (docs/agui.md, "Capability discovery") for the demo's agent.
    assert report["capabilities"] == {
        "identity": {"type": "pausemesh", "name": "travel_agent"},
        "transport": {
            "streaming": True,
            "resumable": True,
            "websocket": False,
            "httpBinary": False,
            "pushNotifications": False,
        },
        "state": {"snapshots": True, "deltas": True, "persistentState": True},
        "humanInTheLoop": {"supported": True, "interrupts": True, "approveWithEdits": False},
        "custom": {"pausemesh": {"version": __version__}},
    }
