"""The gateway's MCP server (official SDK ``MCPServer``): one tool per job plus inspection.

The agent sees each job under its name with the pinned input schema, closed; plus
``continuity_status`` and ``continuity_why``. Every result carries the gateway's answer as
``structuredContent`` and as JSON text; anything but ``RESPONSE_RETAINED`` /
``RECONCILIATION_ONLY`` is an ``isError`` result (never a JSON-RPC error: the agent reads
the status). A tool the gateway does not list is the protocol's -32602, as on ``/mcp``. The same server runs over stdio (``pausemesh gateway --stdio``) and over
streamable HTTP inside the Litestar app (``web/gateway_mount.py``), which supplies the
caller's principal and the human approval of ``require_approval`` jobs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import msgspec
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.stdio import stdio_server
from mcp_types import CallToolResult, InputRequiredResult, TextContent, Tool, ToolAnnotations

from pausemesh.gateway.dispatcher import Approver, Gateway, Pending
from pausemesh.gateway.results import SUCCESS_STATUSES
from pausemesh.gateway.stdio_pipes import loop_stdio
from pausemesh.mcp.sdk_server import unknown_name

__all__ = ("GatewayServer", "PrincipalOf", "RolesOf", "tool_result")

PrincipalOf = Callable[[Context[Any, Any]], "str | None"]
RolesOf = Callable[[Context[Any, Any]], "frozenset[str]"]
ApproverFor = Callable[[Context[Any, Any]], Approver]

_INSPECT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"job": {"type": "string", "description": "the job to inspect"}},
    "required": ["job"],
    # The key arguments of a templated job come alongside ``job``; the gateway checks them.
    "additionalProperties": {"type": ["string", "integer"]},
}
_READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)


def tool_result(body: dict[str, Any]) -> CallToolResult:
    text = msgspec.json.encode(body).decode()
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=body,
        is_error=body.get("status") not in SUCCESS_STATUSES,
    )


class GatewayServer(MCPServer):
    """``MCPServer`` whose tools are the gateway's jobs (not Python functions)."""

    gateway: Gateway
    principal_of: PrincipalOf
    roles_of: RolesOf
    approver_for: ApproverFor | None

    @classmethod
    def build(
        cls,
        gateway: Gateway,
        *,
        principal_of: PrincipalOf = lambda _ctx: None,
        roles_of: RolesOf = lambda _ctx: frozenset(),
        approver_for: ApproverFor | None = None,
        **options: Any,
    ) -> GatewayServer:
        server = cls(
            "pausemesh-gateway",
            instructions=(
                "Each tool runs one operator-approved job at most once per business key."
                " Read `status` in every result; OUTCOME_UNKNOWN is never retried."
            ),
            **options,
        )
        server.gateway = gateway
        server.principal_of = principal_of
        server.roles_of = roles_of
        server.approver_for = approver_for
        return server

    async def list_tools(self) -> list[Tool]:
        inspect = [
            Tool(
                name=name,
                description=description,
                input_schema=_INSPECT_SCHEMA,
                annotations=_READ_ONLY,
            )
            for name, description in (
                ("continuity_status", "Digests, flags and timestamps of a job's operation."),
                (
                    "continuity_why",
                    "Why a job's operation is where it is, and what may happen next.",
                ),
            )
        ]
        return [*self.gateway.job_tools(), *inspect]

    def _tool_input_schema(self, name: str) -> dict[str, Any] | None:
        if name in {"continuity_status", "continuity_why"}:
            return _INSPECT_SCHEMA
        return self.gateway.input_schema(name)

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        context: Context[Any, Any] | None = None,
    ) -> CallToolResult | InputRequiredResult:
        if name not in {tool.name for tool in await self.list_tools()}:
            raise unknown_name("tool", name)
        principal = self.principal_of(context) if context is not None else None
        # The identity provider's roles count too (beside the config's [access.principals]).
        roles = self.roles_of(context) if context is not None else frozenset[str]()
        if name == "continuity_status":
            return tool_result(await self.gateway.status(arguments, principal, roles))
        if name == "continuity_why":
            return tool_result(await self.gateway.why(arguments, principal, roles))
        approver = (
            self.approver_for(context)
            if self.approver_for is not None and context is not None
            else None
        )
        answer = await self.gateway.run(name, arguments, principal, approver=approver, roles=roles)
        if isinstance(answer, Pending):
            pending: CallToolResult | InputRequiredResult = answer.value
            return pending
        return tool_result(answer)

    async def run_stdio_async(self) -> None:
        """Serve over stdin/stdout on the event loop's own pipes (no thread per message)."""
        async with loop_stdio() as pipes:
            streams = stdio_server() if pipes is None else stdio_server(*cast("Any", pipes))
            async with streams as (read_stream, write_stream):
                await self._lowlevel_server.run(
                    read_stream,
                    write_stream,
                    self._lowlevel_server.create_initialization_options(),
                )
