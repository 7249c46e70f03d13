"""The demo's secondary protocol surfaces: ``/mcp`` (tool ``book_flight``) and ``/a2a``.

Both reach the same durable pause as the AG-UI travel agent: the same flight question, the
same continuation core and the same once-only booking through the operation ledger.
"""

from __future__ import annotations

from typing import Any

from pausemesh.demo.a2a_agent import TravelA2AExecutor, travel_agent_card
from pausemesh.demo.airline import airline_url_policy, register_airline_connect
from pausemesh.demo.mcp_tools import register_book_flight
from pausemesh.web.a2a_mount import A2APlugin
from pausemesh.web.mcp_mount import McpPlugin

__all__ = ("demo_protocol_plugins",)


def demo_protocol_plugins() -> list[Any]:
    """Plugins to add next to ``PauseMeshPlugin`` (``create_app(..., plugins=...)``)."""
    return [
        McpPlugin(register_book_flight, register_airline_connect, policy=airline_url_policy()),
        A2APlugin(TravelA2AExecutor, travel_agent_card()),
    ]
