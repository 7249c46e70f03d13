"""``PauseMeshConfig``: what a host chooses when it registers ``PauseMeshPlugin``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pausemesh.mcp.url_policy import McpProjectionPolicy
from pausemesh.settings import Settings
from pausemesh.stores.storage import Storage
from pausemesh.web.auth import PrincipalResolver

__all__ = ("PauseMeshConfig",)


@dataclass(kw_only=True)
class PauseMeshConfig:
    settings: Settings = field(default_factory=Settings)
    """Store selection, limits and the server key (see ``pausemesh.settings``)."""
    storage: Storage | None = None
    """Stores the host already opened; the plugin then neither opens nor closes them."""
    principal_resolver: PrincipalResolver | None = None
    """Async ``(request) -> principal | Identity | None``; ``None`` or an exception is a 401.
    Without one, ``PAUSEMESH_AUTH_*`` settings may choose the built-in bearer resolver (JWT,
    API keys; ``pausemesh.credentials``); a resolver here and those settings together are
    refused."""
    path: str = "/"
    """Prefix for every PauseMesh route (``/v1/continuations``, ``/healthz`` ...)."""
    agent: Any | None = None
    """The host's AG-UI agent; when set, the AG-UI routes are mounted (pausemesh.agui)."""
    mcp_projection_policy: McpProjectionPolicy | None = None
    """Trusted MCP URL-mode policy; without one, URL elicitation fails closed."""
    health_routes: bool = True
    """Serve ``/healthz`` and ``/readyz`` (a host with its own probes may turn them off)."""
    problem_details_for_app: bool = False
    """Shape the whole app's 404/405/500 as problem bodies (``create_app`` turns it on)."""
    sweeper: bool = True
    """Run the expiry sweeper in the lifespan."""
