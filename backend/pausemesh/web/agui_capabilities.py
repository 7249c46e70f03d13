"""``GET /agui/capabilities``: AG-UI capability discovery for the agent this app serves.

``@ag-ui/client`` declares ``AbstractAgent.getCapabilities()`` but defines no HTTP route for
it; this is PauseMesh's (docs/agui.md, "Capability discovery"). The body has the shape of
``@ag-ui/core``'s ``AgentCapabilities`` (``pausemesh.agui.capabilities``). It describes the
agent, not a caller's data, so it is public like the A2A agent card.
"""

from __future__ import annotations

from typing import Any

from litestar import Response, get
from litestar.handlers import HTTPRouteHandler

from pausemesh import __version__
from pausemesh.agui.capabilities import agent_capabilities

__all__ = ("capabilities_route",)


def capabilities_route(agent: object) -> HTTPRouteHandler:
    """The route answering what the server supports for ``agent`` (the served agent)."""
    body = agent_capabilities(agent, server_version=__version__)

    @get(
        "/agui/capabilities",
        summary="What the server supports for its agent (AG-UI AgentCapabilities)",
        tags=["AG-UI"],
    )
    async def agui_capabilities() -> Response[dict[str, Any]]:
        return Response(body, headers={"cache-control": "no-cache"})

    return agui_capabilities
