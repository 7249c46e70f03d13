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
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, GetPromptResult, InputRequiredResult

from pausemesh.core.principal_handoff import principal_in_scope

__all__ = ("StrictNames", "principal_binding", "quietly_build_server", "unknown_name")

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


def unknown_name(kind: str, name: str) -> MCPError:
    """The protocol's answer to a call naming a tool or prompt the server does not list:
    invalid params (-32602) with the name, a client's mistake (no ERROR log)."""
    return MCPError(code=INVALID_PARAMS, message=f"Unknown {kind}: {name}", data={"name": name})


class StrictNames(MCPServer[Any]):
    """``MCPServer`` that answers a call naming no tool or prompt it has with the protocol's
    invalid params (-32602, the MCP spec's "Unknown tool"): the SDK answers an unknown tool
    with an ``isError`` result, and an unknown prompt on the 2026-07-28 path with -32603 and an
    ERROR traceback in the log. (An unknown resource is -32602 in the SDK already.)"""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        if name not in {tool.name for tool in await self.list_tools()}:
            raise unknown_name("tool", name)
        return await super().call_tool(name, arguments, context)

    async def get_prompt(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        context: Context[Any, Any] | None = None,
    ) -> GetPromptResult | InputRequiredResult:
        if name not in {prompt.name for prompt in await self.list_prompts()}:
            raise unknown_name("prompt", name)
        return await super().get_prompt(name, arguments, context)
