"""AG-UI capability discovery answers what the server supports for the agent it serves.

``pausemesh.agui.capabilities.agent_capabilities`` over the agents PauseMesh adapts: a
pydantic-ai agent (its tool approvals take ``editedArgs``) and a plain agent function (none);
the identity comes from what the agent declares. The route and the official shape are checked
end to end in ``tests/protocols/test_agui_node_client.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

from pausemesh.agui.agent import AgentOutput, RunContext
from pausemesh.agui.capabilities import agent_capabilities
from pausemesh.integrations.agents import as_agent


def test_a_pydantic_ai_agent_declares_approve_with_edits_and_its_name() -> None:
    served = as_agent(Agent(TestModel(), name="refund-desk"))

    capabilities = agent_capabilities(served, server_version="9.9.9")

    assert capabilities["identity"] == {"type": "pydantic-ai", "name": "refund-desk"}
    assert capabilities["humanInTheLoop"] == {
        "supported": True,
        "interrupts": True,
        "approveWithEdits": True,
        "approvals": True,
    }


def test_a_plain_agent_is_named_by_what_it_declares_and_takes_no_edits() -> None:
    async def refunds(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        return
        yield

    declared: Any = refunds
    declared.version = "1.2.0"
    declared.description = "Refunds after a person approves them"

    capabilities = agent_capabilities(as_agent(declared), server_version="9.9.9")

    assert capabilities["identity"] == {
        "type": "pausemesh",
        "name": "refunds",
        "version": "1.2.0",
        "description": "Refunds after a person approves them",
    }
    assert capabilities["humanInTheLoop"]["approveWithEdits"] is False
    assert capabilities["state"] == {"snapshots": True, "deltas": True, "persistentState": True}
    assert capabilities["transport"]["resumable"] is True
    assert capabilities["custom"] == {"pausemesh": {"version": "9.9.9"}}
