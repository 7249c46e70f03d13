"""The gateway composed with MCP pauses: its server with a person's approval and sealed state.

``mcp_approver`` asks a person through the existing MCP pause machinery (``McpPauses``):
2026-07-28 clients get ``input_required`` with sealed request state, older clients a live
``elicitation/create``; both are backed by one durable continuation, so an approval
survives a gateway restart. ``build_gateway_server`` is the one server both transports run:
``pausemesh gateway --stdio`` directly, and the Litestar mount (``web/gateway_mount.py``)
over streamable HTTP. Nothing here imports a web framework, so the stdio gateway loads none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import Context
from mcp.server.request_state import RequestStateSecurity
from mcp_types import InputRequiredResult

from pausemesh.core.canonical import canonical_json
from pausemesh.core.service import ContinuationService
from pausemesh.core.tokens import KeyedTokenIssuer
from pausemesh.gateway.config import Job
from pausemesh.gateway.dispatcher import Approver, Gateway, Pending
from pausemesh.gateway.server import GatewayServer
from pausemesh.mcp.pauses import McpPauses, principal_of, roles_of
from pausemesh.mcp.sdk_server import principal_binding, quietly_build_server
from pausemesh.mcp.state import KeyedRequestStateCodec

__all__ = ("APPROVAL_SCHEMA", "build_gateway_server", "mcp_approver")

_ENVELOPE_TTL_SECONDS = 366 * 24 * 3600.0
_AUDIENCE = "pausemesh-gateway"

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "title": "Approve this call"}},
    "required": ["approve"],
}


def _question(job: Job, operation_id: str, arguments: dict[str, Any]) -> str:
    return (
        f"Approve {job.name}: tool {job.tool} on upstream {job.upstream}, once, with arguments"
        f" {canonical_json(arguments)} (operation {operation_id})?"
    )


def mcp_approver(pauses: McpPauses) -> Callable[[Context[Any, Any]], Approver]:
    """For each request, an approver that pauses the call until a person answers."""

    def approver_for(ctx: Context[Any, Any]) -> Approver:
        async def approve(job: Job, operation_id: str, arguments: dict[str, Any]) -> bool | Pending:
            answer = await pauses.ask(
                ctx,
                tool=job.name,
                arguments=arguments,
                message=_question(job, operation_id, arguments),
                schema=APPROVAL_SCHEMA,
                key="approval",
            )
            if isinstance(answer, InputRequiredResult):
                return Pending(answer)
            return answer.action == "accept" and (answer.content or {}).get("approve") is True

        return approve

    return approver_for


def build_gateway_server(
    gateway: Gateway,
    service: Callable[[], ContinuationService],
) -> GatewayServer:
    """The gateway's MCP server with approvals and 2026-07-28 request state sealed by the
    PauseMesh server key (any restart or replica accepts a retry)."""

    def issuer() -> KeyedTokenIssuer:
        keyed = service().keyed_issuer
        if keyed is None:
            msg = "the gateway's approvals need the server key (keyed tokens)"
            raise RuntimeError(msg)
        return keyed

    pauses = McpPauses(service)
    return quietly_build_server(
        lambda: GatewayServer.build(
            gateway,
            principal_of=principal_of,
            roles_of=roles_of,
            approver_for=mcp_approver(pauses),
            request_state_security=RequestStateSecurity(
                codec=KeyedRequestStateCodec(issuer),
                ttl=_ENVELOPE_TTL_SECONDS,
                bind_principal=principal_binding,
                audience=_AUDIENCE,
            ),
        )
    )
