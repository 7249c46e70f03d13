"""Client-side helpers for the MCP and A2A tests, on the official SDKs."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from a2a.client import Client as A2AClient
from a2a.types import Message, SendMessageRequest, Task
from google.protobuf.json_format import ParseDict  # type: ignore[import-untyped]
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, ElicitResult, InputRequiredResult

from tests.support.server import ServerProcess

__all__ = (
    "continuation_status",
    "flight_answer",
    "never_elicit",
    "send_for_task",
    "tool_round",
    "user_message",
)


async def never_elicit(_context: Any, _params: Any) -> ElicitResult:
    """Declares the elicitation capability; the tests answer each round by hand."""
    raise AssertionError


def flight_answer(flight: str | None) -> dict[str, ElicitResult] | None:
    """The demo ``book_flight`` answer choosing ``flight`` (None: no answer sent)."""
    if flight is None:
        return None
    return {"flight": ElicitResult(action="accept", content={"flight": flight})}


async def tool_round(
    target: Any,
    tool: str,
    arguments: dict[str, Any],
    *,
    state: str | None = None,
    responses: dict[str, ElicitResult] | None = None,
    elicit: bool = True,
) -> CallToolResult | InputRequiredResult:
    """One 2026-07-28 ``tools/call`` round on ``target`` (what ``mcp.Client`` connects to).

    ``elicit=False`` leaves the elicitation capability undeclared. A JSON-RPC error is
    re-raised once the client has closed, outside its task group.
    """
    callback = never_elicit if elicit else None
    error: MCPError | None = None
    async with Client(target, mode="2026-07-28", elicitation_callback=callback) as client:  # type: ignore[arg-type]
        try:
            return await client.session.call_tool(
                tool,
                arguments,
                allow_input_required=True,
                input_responses=responses,  # type: ignore[arg-type]
                request_state=state,
            )
        except MCPError as refused:
            error = refused
    raise error


def user_message(data: Any = None, *, text: str = "", task_id: str = "") -> Message:
    """An A2A user message with one data part (or one text part), optionally for a task."""
    body: dict[str, Any] = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER"}
    body["parts"] = [{"data": data}] if data is not None else [{"text": text}]
    if task_id:
        body["taskId"] = task_id
    message: Message = ParseDict(body, Message())
    return message


async def send_for_task(client: A2AClient, message: Message) -> Task:
    """Send ``message`` and return the task the server answers with."""
    async for response in client.send_message(SendMessageRequest(message=message)):
        if response.HasField("task"):
            return response.task
    raise AssertionError


def continuation_status(server: ServerProcess, continuation_id: str) -> str:
    """The continuation's status, read over the server's REST API."""
    response = httpx.get(server.url(f"/v1/continuations/{continuation_id}"), timeout=10)
    response.raise_for_status()
    status: str = response.json()["continuation"]["status"]
    return status
