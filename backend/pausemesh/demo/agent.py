"""The demo travel agent: deterministic, no model, no network.

- On a user message it streams a short reply, then pauses: "Which flight should I book?",
  reason ``input_required``, with a ``responseSchema`` whose required ``flight`` is one of the
  offered flights (a string ``enum``).
- When the answer is ``resolved`` it books the flight through the durable operation ledger
  (at most once per question, whatever is replayed or retried) and confirms, naming it.
- When the answer is ``cancelled`` it says it will not book.

The AG-UI state holds ``bookings``: one entry per real booking.

A client may pass ``forwardedProps.questionTtlSeconds`` (1-86400) to give the question a
shorter deadline, to see expiry without waiting for the server's default.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any, Final

from pausemesh.agui import (
    AgentOutput,
    Decision,
    PauseRequest,
    RunContext,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    UserMessage,
)
from pausemesh.core.errors import PauseMeshError
from pausemesh.demo.flights import (
    BOOKING_DOMAIN,
    FLIGHT_NUMBERS,
    confirm_booking,
    flight_choice_schema,
)

__all__ = ("DESTINATION", "QUESTION", "travel_agent")

QUESTION: Final = "Which flight should I book?"
DESTINATION: Final = "Lisbon"
_MAX_TTL = 86_400


def _say(text: str) -> list[AgentOutput]:
    """One assistant message, streamed in a few word-sized deltas."""
    message_id = f"msg-{uuid.uuid4()}"
    words = text.split(" ")
    deltas = [w if i == 0 else " " + w for i, w in enumerate(words)]
    return [
        TextMessageStartEvent(message_id=message_id, role="assistant"),
        *(TextMessageContentEvent(message_id=message_id, delta=d) for d in deltas),
        TextMessageEndEvent(message_id=message_id),
    ]


def _question_ttl(ctx: RunContext) -> float | None:
    props = ctx.forwarded_props
    if not isinstance(props, dict):
        return None
    ttl = props.get("questionTtlSeconds")
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 1 <= ttl <= _MAX_TTL:
        return None
    return float(ttl)


def _bookings(state: Any) -> list[dict[str, Any]]:
    if isinstance(state, dict) and isinstance(state.get("bookings"), list):
        return [b for b in state["bookings"] if isinstance(b, dict)]
    return []


async def _book(ctx: RunContext, decision: Decision) -> dict[str, Any]:
    """Book the chosen flight once per question (the interrupt), via the operation ledger."""
    payload = decision.payload
    flight = payload.get("flight") if isinstance(payload, dict) else None
    if not isinstance(flight, str):
        msg = "the answer names no flight"
        raise TypeError(msg)

    async def action() -> dict[str, Any]:
        return await confirm_booking(DESTINATION, flight)

    if ctx.operations is None:
        msg = "the demo agent needs the operation ledger"
        raise RuntimeError(msg)
    outcome = await ctx.operations.run_once(
        BOOKING_DOMAIN,
        f"{ctx.thread_id}:{decision.interrupt_id}",
        tool="book_flight",
        arguments={"destination": DESTINATION, "flight": flight},
        action=action,
    )
    result: dict[str, Any] = outcome.result
    return result


async def travel_agent(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """The demo agent (see the module docstring)."""
    if ctx.decisions:
        bookings = _bookings(ctx.state)
        for decision in ctx.decisions.values():
            if decision.status == "cancelled":
                for event in _say("All right, I will not book a flight."):
                    yield event
                continue
            try:
                booking = await _book(ctx, decision)
            except PauseMeshError as error:
                for event in _say(f"I could not confirm the booking ({error.code})."):
                    yield event
                continue
            if booking not in bookings:
                bookings.append(booking)
            text = (
                f"Booked flight {booking['flight']} to {DESTINATION},"
                f" confirmation {booking['confirmation']}."
            )
            for event in _say(text):
                yield event
        state = dict(ctx.state) if isinstance(ctx.state, dict) else {}
        state["bookings"] = bookings
        yield StateSnapshotEvent(snapshot=state)
        return

    last = ctx.messages[-1] if ctx.messages else None
    if not isinstance(last, UserMessage):
        for event in _say("Tell me where you would like to fly, and I will find flights."):
            yield event
        return
    offered = ", ".join(FLIGHT_NUMBERS)
    for event in _say(f"I found {len(FLIGHT_NUMBERS)} flights to {DESTINATION}: {offered}."):
        yield event
    yield PauseRequest(
        message=QUESTION,
        reason="input_required",
        response_schema=flight_choice_schema(),
        expires_in=_question_ttl(ctx),
    )
