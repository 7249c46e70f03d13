"""AG-UI capability discovery: what this server really supports for the agent it serves.

The answer has the shape of ``@ag-ui/core``'s ``AgentCapabilities`` (every category optional;
an omitted field means "not declared", not "unsupported"). The protocol declares
``AbstractAgent.getCapabilities()`` but no HTTP route for it; PauseMesh serves it at
``GET /agui/capabilities`` (docs/agui.md, "Capability discovery").

What is declared, and why it is true of every agent PauseMesh serves:

* ``humanInTheLoop``: the run host speaks the interrupt protocol for any agent (a run ends
  with ``RUN_FINISHED`` carrying the interrupt outcome; the answers come back in
  ``RunAgentInput.resume``, one resume for the whole cohort). ``approveWithEdits`` and
  ``approvals`` only where the integration's tool approval takes ``editedArgs`` (an agent
  says so with ``accepts_edited_args = True``: the pydantic-ai integration does).
* ``transport``: SSE streaming; resumable (a dropped stream is resumed from its last thread
  sequence with ``Last-Event-ID`` on ``/agui/threads/{id}/events``); no WebSocket, no binary
  protocol, no push notifications.
* ``state``: ``STATE_SNAPSHOT`` (on connect, before an interrupt, at the end of a run),
  ``STATE_DELTA`` forwarded and applied to the thread's state, and the state kept across the
  runs of a thread.
* ``identity``: the agent's ``name``, ``version`` and ``description`` where it declares them
  (attributes of the agent, or of the pydantic-ai agent or LangGraph graph it adapts; a plain
  function is named by its ``__name__``), and ``type``: the framework (``framework``).
"""

from __future__ import annotations

from typing import Any

__all__ = ("agent_capabilities",)

_WRAPPED = ("agent", "graph")
"""Where an integration keeps the framework's own object (pydantic-ai, LangGraph)."""


def _declared(agent: object, attribute: str) -> str | None:
    """``attribute`` of the agent, else of the object it adapts (a non-empty string only)."""
    for holder in (agent, *(getattr(agent, name, None) for name in _WRAPPED)):
        value = getattr(holder, attribute, None) if holder is not None else None
        if isinstance(value, str) and value:
            return value
    return None


def _identity(agent: object) -> dict[str, Any]:
    name = _declared(agent, "name") or getattr(agent, "__name__", None)
    identity: dict[str, Any] = {"type": _declared(agent, "framework") or "pausemesh"}
    if isinstance(name, str) and name:
        identity["name"] = name
    for field in ("version", "description"):
        value = _declared(agent, field)
        if value is not None:
            identity[field] = value
    return identity


def agent_capabilities(agent: object, *, server_version: str) -> dict[str, Any]:
    """The ``AgentCapabilities`` of ``agent`` as this server serves it (camelCase JSON)."""
    edits = getattr(agent, "accepts_edited_args", False) is True
    human: dict[str, Any] = {"supported": True, "interrupts": True, "approveWithEdits": edits}
    if edits:
        human["approvals"] = True
    return {
        "identity": _identity(agent),
        "transport": {
            "streaming": True,
            "resumable": True,
            "websocket": False,
            "httpBinary": False,
            "pushNotifications": False,
        },
        "state": {"snapshots": True, "deltas": True, "persistentState": True},
        "humanInTheLoop": human,
        "custom": {"pausemesh": {"version": server_version}},
    }
