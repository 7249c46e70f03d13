"""What every SDK ``MCPServer`` PauseMesh builds shares: its construction without touching the
process's logging, and the principal its 2026-07-28 ``requestState`` is bound to.

Both the ``/mcp`` endpoint (``web/mcp_mount.py``) and the continuity gateway
(``gateway/mcp_compose.py``, over stdio and over HTTP) build their servers with these;
nothing here needs a web framework.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer

from pausemesh.core.principal_handoff import principal_in_scope

__all__ = ("principal_binding", "quietly_build_server")

ServerT = TypeVar("ServerT", bound=MCPServer)


def principal_binding(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The principal a 2026-07-28 ``requestState`` is bound to: the one the mount resolved
    (None over stdio, where no mount resolves a caller)."""
    return principal_in_scope(getattr(ctx.request, "scope", None))


def quietly_build_server(build: Callable[[], ServerT]) -> ServerT:
    """``MCPServer`` calls ``logging.basicConfig``; logging belongs to the process, not to a
    server, so whatever it added to the root logger is taken back."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        return build()
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
