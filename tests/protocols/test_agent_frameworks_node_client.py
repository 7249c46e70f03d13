"""The official ``@ag-ui/client`` 1.0.0 ``HttpAgent`` (Node) against framework agents served by
``pausemesh serve --agent``: the pydantic-ai and the LangGraph refund examples.

ask → the approval interrupt (pydantic-ai's shape); reload (a fresh agent restored through
``POST /agui/connect``) → the same messages, state and ``pendingInterrupts``; approve → the tool
ran once and the run succeeded; no console warnings from the client.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.agui import needs_node, run_node_harness
from tests.support.server import ServerProcess

pytestmark = [needs_node, pytest.mark.slow]

AGENTS = {
    "pydantic-ai": "examples.pydantic_ai_refund:agent",
    "langgraph": "examples.langgraph_refund:agent",
}


def _harness(server: ServerProcess, thread_id: str, text: str) -> dict[str, Any]:
    return run_node_harness("approval_harness.mjs", server.base_url, thread_id, text)


@pytest.mark.parametrize("framework", sorted(AGENTS))
def test_official_http_agent_asks_reloads_and_approves_a_framework_tool_call(
    framework: str, tmp_path: Path
) -> None:
    args = ["serve", "--agent", AGENTS[framework], "--database-path", str(tmp_path / "a.db")]
    with ServerProcess(args) as server:
        report = _harness(server, f"node-{framework}", "Please refund order A-1001")
        snapshot = httpx.get(server.url(f"/agui/threads/node-{framework}"), timeout=30).json()
    assert report["ok"] is True
    assert report["warnings"] == [], report["warnings"]

    ask = report["ask"]
    assert ask["errors"] == []
    assert ask["types"][0] == "RUN_STARTED"
    assert ask["types"][-1] == "RUN_FINISHED"
    [interrupt] = ask["pendingInterrupts"]
    assert interrupt["reason"] == "tool_call"
    assert interrupt["message"] == (
        'Approve issue_refund({"order_id":"A-1001","amount_cents":2500})?'
    )
    assert ask["state"] == {"refunds": []}

    reload = report["reload"]
    assert reload["types"] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED"]
    assert reload["errors"] == []
    assert reload["pendingInterrupts"] == ask["pendingInterrupts"]
    assert reload["messages"] == ask["messages"]

    answer = report["answer"]
    assert answer["errors"] == []
    assert answer["types"][-1] == "RUN_FINISHED"
    assert "TOOL_CALL_RESULT" in answer["types"]
    assert answer["pendingInterrupts"] == []
    assert answer["messages"][-1]["role"] == "assistant"
    assert answer["messages"][-1]["content"].startswith("Done: refund ")
    [refund] = answer["state"]["refunds"]
    assert refund["orderId"] == "A-1001"
    assert snapshot["state"] == answer["state"]
    assert snapshot["messages"] == answer["messages"]
