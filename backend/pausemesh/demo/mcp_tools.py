"""The demo's MCP tool ``book_flight``: asks which flight (a durable pause), then books once.

The question is the same flat form the AG-UI demo asks (``flight_choice_schema``: the flights
to the destination named, matched in the catalogue as the chat matches it); the booking
goes through the operation ledger keyed by the pause's continuation id, so however many times
a client retries, replays or races the answer, the airline books once (and an unknown outcome
is looked up at the airline, ``demo/reservations.py``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ContentBlock, InputRequiredResult, TextContent

from pausemesh.core.errors import OutcomeUnknownError
from pausemesh.core.operations import OperationLedger, operation_id, run_once
from pausemesh.core.webhooks import WebhookRoutes
from pausemesh.demo.flights import (
    BOOKING_DOMAIN,
    booking_summary,
    destination_name,
    flight_choice_schema,
    flight_question,
)
from pausemesh.demo.reservations import airline
from pausemesh.mcp.pauses import McpPauses
from pausemesh.web.plugin import PauseMeshPlugin

__all__ = ("book_once", "demo_declarer", "demo_ledger", "register_book_flight")

# How long a concurrent duplicate waits for the winner's booking to be recorded.
_IN_FLIGHT_POLLS = 200
_IN_FLIGHT_POLL_SECONDS = 0.05


async def book_once(
    ledger: OperationLedger,
    business_key: str,
    destination: str,
    flight: str,
    *,
    declare_as: tuple[WebhookRoutes | None, str] = (None, "run_once"),
) -> dict[str, Any]:
    """Book through the ledger; a duplicate racing the first attempt waits for its outcome.
    ``declare_as``: the webhook routes and the name an unknown outcome is declared with
    (``run_once``; ``demo_declarer`` gives this process's)."""

    desk = airline()
    key = operation_id(BOOKING_DOMAIN, business_key)

    async def action() -> dict[str, Any]:
        return await desk.book(key, destination, flight)

    arguments = {"destination": destination, "flight": flight}
    for _ in range(_IN_FLIGHT_POLLS):
        try:
            outcome = await run_once(
                ledger,
                BOOKING_DOMAIN,
                business_key,
                "book_flight",
                arguments,
                action,
                lookup=desk.lookup,
                webhooks=declare_as[0],
                declared_by=declare_as[1],
            )
        except OutcomeUnknownError:
            # Another request holds the attempt right now (or crashed holding it: then this
            # gives up below and the operation stays OUTCOME_UNKNOWN for a human to settle).
            await asyncio.sleep(_IN_FLIGHT_POLL_SECONDS)
            continue
        result: dict[str, Any] = outcome.result
        return result
    raise OutcomeUnknownError(business_key)


def demo_declarer(pausemesh: PauseMeshPlugin) -> tuple[WebhookRoutes | None, str]:
    """``book_once``'s ``declare_as`` for this process: the server's webhook routes (an unknown
    outcome sends ``operation.outcome_unknown``) and its lease holder's name."""
    runtime = pausemesh.runtime
    return runtime.service.webhooks, runtime.instance.holder


def demo_ledger(pausemesh: PauseMeshPlugin) -> OperationLedger:
    """The operation ledger the demo books through (the demo runs with one)."""
    ledger = pausemesh.runtime.storage.operations
    if ledger is None:
        msg = "the demo needs the operation ledger"
        raise RuntimeError(msg)
    return ledger


def _text(text: str) -> list[ContentBlock]:
    return [TextContent(type="text", text=text)]


def register_book_flight(server: MCPServer, pauses: McpPauses, pausemesh: PauseMeshPlugin) -> None:
    """An ``McpToolRegistrar`` for ``McpPlugin``."""
    pauses.allow_tasks("book_flight")  # its pause is a question: a 2025-11-25 task can carry it

    @server.tool(
        name="book_flight",
        description="Book a flight to a destination; asks the user which flight first.",
    )
    async def book_flight(
        destination: str, ctx: Context[Any, Any]
    ) -> CallToolResult | InputRequiredResult:
        city = destination_name(destination)
        answer = await pauses.ask(
            ctx,
            tool="book_flight",
            arguments={"destination": destination},
            message=flight_question(city),
            schema=flight_choice_schema(city),
            key="flight",
        )
        if isinstance(answer, InputRequiredResult):
            return answer
        if answer.action != "accept" or answer.content is None:
            return CallToolResult(
                content=_text("No flight was booked."),
                structured_content={"booked": False, "action": answer.action},
            )
        booking = await book_once(
            demo_ledger(pausemesh),
            answer.continuation.continuation_id,
            city,
            answer.content["flight"],
            declare_as=demo_declarer(pausemesh),
        )
        return CallToolResult(
            content=_text(booking_summary(booking)),
            structured_content={"booked": True, **booking},
        )
