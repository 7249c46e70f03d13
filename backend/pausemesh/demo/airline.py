"""The demo's authorization pause: ``connect_airline_account`` over MCP URL mode.

The tool sends the user to the (pretend) airline's consent page, ``/demo/airline/connect``;
that page stands for the third party's sign-in plus its redirect back to us, so opening it is
the trusted out-of-band callback: it checks the user opening it is the pause's owner and
resumes the continuation (no credential ever passes through the MCP client). A live
2025-11-25 client then gets ``notifications/elicitation/complete``; a 2026-07-28 client's
retry finds the pause resumed.

The host policy attests only links to that page, with nothing but the pause id in ``state``.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import parse_qsl, urlsplit

from litestar import Request, Response, get
from litestar.handlers import HTTPRouteHandler
from litestar.params import QueryParameter
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ContentBlock, InputRequiredResult, TextContent

from pausemesh.core.errors import PauseMeshError
from pausemesh.core.model import Continuation
from pausemesh.mcp.elicitation import McpProjectionPolicy
from pausemesh.mcp.pauses import McpPauses
from pausemesh.web.auth import resolve_principal
from pausemesh.web.plugin import PauseMeshPlugin

__all__ = ("CONNECT_PATH", "airline_url_policy", "register_airline_connect")

CONNECT_PATH = "/demo/airline/connect"


def _is_connect_link(url: str) -> bool:
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    return parts.path == CONNECT_PATH and [key for key, _ in query] == ["state"]


def airline_url_policy() -> McpProjectionPolicy:
    """The demo runs on loopback HTTP; the validator vouches only for the connect page."""
    return McpProjectionPolicy(
        allow_insecure_loopback_http=True, validate_authorization_url=_is_connect_link
    )


def _text(text: str) -> list[ContentBlock]:
    return [TextContent(type="text", text=text)]


def register_airline_connect(
    server: MCPServer, pauses: McpPauses, pausemesh: PauseMeshPlugin
) -> list[HTTPRouteHandler]:
    """An ``McpToolRegistrar``: the tool plus its trusted callback route."""

    @server.tool(
        name="connect_airline_account",
        description="Link the user's airline account; the user signs in on the airline's page.",
    )
    async def connect_airline_account(
        ctx: Context[Any, Any],
    ) -> CallToolResult | InputRequiredResult:
        request = ctx.request_context.request
        origin = f"{request.url.scheme}://{request.url.netloc}" if request is not None else ""

        def url_for(continuation: Continuation) -> str:
            return f"{origin}{CONNECT_PATH}?state={continuation.continuation_id}"

        answer = await pauses.authorize(
            ctx,
            tool="connect_airline_account",
            arguments={},
            message="Sign in to PauseMesh Air to link your account.",
            url_for=url_for,
        )
        if isinstance(answer, InputRequiredResult):
            return answer
        if answer.action != "accept":
            return CallToolResult(
                content=_text("The airline account was not linked."),
                structured_content={"connected": False, "action": answer.action},
            )
        return CallToolResult(
            content=_text("Your airline account is linked."),
            structured_content={"connected": True, **(answer.content or {})},
        )

    @get(CONNECT_PATH, include_in_schema=False)
    async def airline_connect(
        request: Request[Any, Any, Any],
        # `state` is the query key (an OAuth habit); Litestar reserves the name as a kwarg.
        pause: Annotated[str, QueryParameter(name="state", min_length=1, max_length=200)],
    ) -> Response[str]:
        try:
            principal = await resolve_principal(pausemesh.config.principal_resolver, request)
            await pauses.complete_authorization(
                pause, result={"airline": "PauseMesh Air"}, principal=principal
            )
        except PauseMeshError as error:
            return Response(f"This link cannot be used: {error.code}", status_code=409)
        except Exception:  # noqa: BLE001 - an unusable link is the visitor's problem, not a 500
            return Response("This link cannot be used.", status_code=409)
        return Response("Airline account linked. You can close this tab.")

    return [airline_connect]
