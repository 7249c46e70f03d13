"""``create_app``: the standalone PauseMesh Litestar app (what ``pausemesh serve`` runs)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from litestar import Litestar
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin
from litestar.plugins import PluginProtocol

from pausemesh import __version__
from pausemesh.mcp.url_policy import McpProjectionPolicy
from pausemesh.settings import Settings
from pausemesh.stores.storage import Storage
from pausemesh.web.auth import PrincipalResolver
from pausemesh.web.config import PauseMeshConfig
from pausemesh.web.plugin import PauseMeshPlugin

__all__ = ("create_app",)


def create_app(
    settings: Settings | None = None,
    *,
    agent: Any | None = None,
    principal_resolver: PrincipalResolver | None = None,
    storage: Storage | None = None,
    mcp_projection_policy: McpProjectionPolicy | None = None,
    plugins: Sequence[PluginProtocol] = (),
    debug: bool = False,
) -> Litestar:
    """The whole app: continuation API, probes, OpenAPI at ``/schema/openapi.json``.

    Every error, including an unknown route, is an ``application/problem+json`` body.
    """
    config = PauseMeshConfig(
        settings=settings or Settings(),
        storage=storage,
        principal_resolver=principal_resolver,
        agent=agent,
        mcp_projection_policy=mcp_projection_policy,
        problem_details_for_app=True,
    )
    return Litestar(
        plugins=[PauseMeshPlugin(config), *plugins],
        openapi_config=OpenAPIConfig(
            title="PauseMesh",
            version=__version__,
            description="Durable pauses for AI agents, resumed exactly once.",
            path="/schema",
            render_plugins=[JsonRenderPlugin()],
        ),
        # Logging belongs to the process (the CLI or the host), not to a library's app.
        logging_config=None,
        debug=debug,
    )
