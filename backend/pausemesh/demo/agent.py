"""The demo travel agent: deterministic, no model, no network.

- On a user message it streams a short reply, then pauses: "Which flight should I book?",
  reason ``input_required``, with a ``responseSchema`` whose required ``flight`` is one of the
  offered flights (a string ``enum``).
- When the answer is ``resolved`` it books the flight through the durable operation ledger
  (at most once per question, whatever is replayed or retried) and confirms, naming it. The
  airline cooperates (``demo/reservations.py``): if a crash left the booking's outcome
  unknown, the ledger asks the airline. If the airline cannot answer either, the agent says it
  is checking with the airline (with the operation id) and records the booking as unconfirmed
  in the state; it never says "not booked" for what may have been booked.
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
from pausemesh.core.errors import OutcomeUnknownError, PauseMeshError
from pausemesh.core.operations import operation_id
from pausemesh.demo.flights import BOOKING_DOMAIN, FLIGHT_NUMBERS, flight_choice_schema
from pausemesh.demo.reservations import airline

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


def _unconfirmed(state: Any) -> list[dict[str, Any]]:
    """Bookings whose outcome is unknown (sent, no answer), each with its operation id."""
    if isinstance(state, dict) and isinstance(state.get("unconfirmedBookings"), list):
        return [b for b in state["unconfirmedBookings"] if isinstance(b, dict)]
    return []


def _bookings(state: Any) -> list[dict[str, Any]]:
    if isinstance(state, dict) and isinstance(state.get("bookings"), list):
        return [b for b in state["bookings"] if isinstance(b, dict)]
    return []


def _flight(decision: Decision) -> str:
    payload = decision.payload
    flight = payload.get("flight") if isinstance(payload, dict) else None
    if not isinstance(flight, str):
        msg = "the answer names no flight"
        raise TypeError(msg)
    return flight


def _business_key(ctx: RunContext, decision: Decision) -> str:
    return f"{ctx.thread_id}:{decision.interrupt_id}"


async def _book(ctx: RunContext, decision: Decision) -> dict[str, Any]:
    """Book the chosen flight once per question (the interrupt), via the operation ledger."""
    flight = _flight(decision)
    desk = airline()
    key = operation_id(BOOKING_DOMAIN, _business_key(ctx, decision))

    async def action() -> dict[str, Any]:
        return await desk.book(key, DESTINATION, flight)

    if ctx.operations is None:
        msg = "the demo agent needs the operation ledger"
        raise RuntimeError(msg)
    outcome = await ctx.operations.run_once(
        BOOKING_DOMAIN,
        _business_key(ctx, decision),
        tool="book_flight",
        arguments={"destination": DESTINATION, "flight": flight},
        action=action,
        lookup=desk.lookup,
    )
    result: dict[str, Any] = outcome.result
    return result


async def _reply(
    ctx: RunContext,
    decision: Decision,
    bookings: list[dict[str, Any]],
    unconfirmed: list[dict[str, Any]],
) -> str:
    """What the agent says about one answer; books (once) and updates the two lists."""
    if decision.status == "cancelled":
        return "All right, I will not book a flight."
    try:
        booking = await _book(ctx, decision)
    except OutcomeUnknownError:
        # Maybe booked, maybe not: say what we know, and keep it visible in the state.
        operation = operation_id(BOOKING_DOMAIN, _business_key(ctx, decision))
        entry = {"flight": _flight(decision), "operation": operation}
        if entry not in unconfirmed:
            unconfirmed.append(entry)
        return (
            f"Checking with the airline about flight {entry['flight']}: the booking went out"
            f" but its answer did not come back (operation {operation})."
        )
    except PauseMeshError as error:
        return f"I could not confirm the booking ({error.code})."
    if booking not in bookings:
        bookings.append(booking)
    return (
        f"Booked flight {booking['flight']} to {DESTINATION},"
        f" confirmation {booking['confirmation']}."
    )


async def travel_agent(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """The demo agent (see the module docstring)."""
    if ctx.decisions:
        bookings = _bookings(ctx.state)
        unconfirmed = _unconfirmed(ctx.state)
        for decision in ctx.decisions.values():
            for event in _say(await _reply(ctx, decision, bookings, unconfirmed)):
                yield event
        state = dict(ctx.state) if isinstance(ctx.state, dict) else {}
        state["bookings"] = bookings
        if unconfirmed:
            state["unconfirmedBookings"] = unconfirmed
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
