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
- A flight priced above the approval threshold (``PAUSEMESH_DEMO_APPROVAL_THRESHOLD``,
  ``configure_approvals``) is not booked on the traveller's word: the agent pauses again with
  ``approvers=[Approver.role("manager")]``, showing the exact terms; another person, a manager,
  decides it from the approvals inbox (``/v1/approvals``), and that decision continues the
  traveller's thread (the server runs the agent with it): approved → booked, rejected → not
  booked. A manager's own request waits for another manager (four eyes are two people).

The AG-UI state holds ``bookings``: one entry per real booking, ``[]`` from the first run on
(its first event is that ``STATE_SNAPSHOT``), so a client never finds the key missing.

A client may pass ``forwardedProps.questionTtlSeconds`` (1-86400) to give the question a
shorter deadline, to see expiry without waiting for the server's default.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any, Final

import msgspec

from pausemesh.agui import (
    AgentOutput,
    Approver,
    CustomEvent,
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
from pausemesh.demo.flights import (
    BOOKING_DOMAIN,
    DEFAULT_APPROVAL_THRESHOLD,
    FLIGHTS,
    Flight,
    flight,
    flight_choice_schema,
)
from pausemesh.demo.reservations import airline

__all__ = (
    "APPROVER_ROLE",
    "DESTINATION",
    "QUESTION",
    "UNKNOWN_EVENT",
    "approval_schema",
    "configure_approvals",
    "travel_agent",
)

QUESTION: Final = "Which flight should I book?"
DESTINATION: Final = "Lisbon"
APPROVER_ROLE: Final = "manager"
_APPROVAL: Final = "approval"
_OPERATION: Final = "operation"
UNKNOWN_EVENT: Final = "pausemesh.operation_unknown"
_MAX_TTL = 86_400
_threshold: int = DEFAULT_APPROVAL_THRESHOLD


def configure_approvals(threshold: int) -> None:
    """Prices above ``threshold`` need a manager's approval (``pausemesh demo`` sets it)."""
    global _threshold  # noqa: PLW0603 - one demo per process, set once at start-up
    _threshold = threshold


def approval_schema() -> dict[str, Any]:
    """The manager's answer: an enum of codes, with titles (the MCP form subset)."""
    return {
        "type": "object",
        "properties": {
            "decision": {
                "type": "string",
                "title": "Decision",
                "enum": ["approve", "reject"],
                "enumNames": ["Approve", "Reject"],
            }
        },
        "required": ["decision"],
    }


def _terms(offer: Flight, who: str | None) -> str:
    traveller = "" if who is None else f" for {who}"
    return (
        f"Approve booking flight {offer.code} to {DESTINATION}{traveller}:"
        f" departs {offer.departs}, arrives {offer.arrives}, {offer.cabin},"
        f" {offer.price} {offer.currency} (above the {_threshold} {offer.currency} limit)?"
    )


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


def _is_booking(result: dict[str, Any]) -> bool:
    """The airline's booking record (what ``reservations.Airline.book`` returns)."""
    return isinstance(result.get("flight"), str) and isinstance(result.get("confirmation"), str)


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
    # An operator's resolution (``pausemesh ops resolve``) records what really happened there.
    resolved = result.get("resolvedResult") if isinstance(result, dict) else None
    return resolved if isinstance(resolved, dict) else result


def _approval_request(ctx: RunContext, offer: Flight) -> PauseRequest:
    return PauseRequest(
        message=_terms(offer, ctx.principal),
        reason="approval_required",
        response_schema=approval_schema(),
        approvers=(Approver.role(APPROVER_ROLE),),
        metadata={"kind": _APPROVAL, "flight": offer.code},
        expires_in=_question_ttl(ctx),
    )


def _after_checking(decision: Decision) -> str | Decision:
    """The airline's answer came back (or the wait was withdrawn): book under the original
    question's business key, so the ledger returns the recovered outcome, never a new one."""
    code = decision.metadata.get("flight")
    operation = decision.metadata.get("operation")
    question = decision.metadata.get("question")
    if decision.status == "cancelled" or not isinstance(question, str):
        return (
            f"I stopped waiting for the airline about flight {code}; the booking is still"
            f" unconfirmed (operation {operation}), and may yet have been made."
        )
    return msgspec.structs.replace(decision, interrupt_id=question, payload={"flight": code})


def _checking_request(flight_code: str, operation: str, question: str) -> PauseRequest:
    """Wait for the airline's answer about an unknown booking outcome. Nobody in the chat
    answers it: ``demo/operation_watch.py`` decides it once the airline (or an operator)
    knows, as ``Approver.operation(operation)``; the thread then continues by itself."""
    return PauseRequest(
        message=f"Checking with the airline about flight {flight_code} (operation {operation}).",
        reason="operation_unknown",
        response_schema={"type": "object"},
        approvers=(Approver.operation(operation),),
        metadata={
            "kind": _OPERATION,
            "flight": flight_code,
            "operation": operation,
            "question": question,
        },
    )


def _after_approval(decision: Decision) -> str | Decision:
    """A manager's decision: book the flight it names, or say why not."""
    if decision.status == "cancelled":
        return "The approval request was withdrawn; I will not book that flight."
    payload = decision.payload
    code = decision.metadata.get("flight")
    by = f" by {decision.resolved_by}" if decision.resolved_by else ""
    if not isinstance(payload, dict) or payload.get("decision") != "approve":
        return f"The booking of flight {code} was not approved{by}; I have not booked it."
    return msgspec.structs.replace(decision, payload={"flight": code})


def _before_booking(
    ctx: RunContext, decision: Decision, approvals: list[PauseRequest]
) -> str | Decision:
    """What to say instead of booking (a refusal, a request for approval), or the decision
    to book: the traveller's own choice, or a manager's approval of the flight it names."""
    kind = decision.metadata.get("kind")
    if kind == _OPERATION:
        return _after_checking(decision)
    if kind == _APPROVAL:
        return _after_approval(decision)
    if decision.status == "cancelled":
        return "All right, I will not book a flight."
    offer = flight(_flight(decision))
    if offer is not None and offer.price > _threshold:
        approvals.append(_approval_request(ctx, offer))
        return (
            f"Flight {offer.code} costs {offer.price} {offer.currency}, above the"
            f" {_threshold} {offer.currency} limit: I have asked a manager to approve it."
        )
    return decision


async def _reply(
    ctx: RunContext,
    answer: Decision,
    bookings: list[dict[str, Any]],
    unconfirmed: list[dict[str, Any]],
    waits: list[AgentOutput],
) -> str:
    """What the agent says about one answer; books (once) and updates the lists. Pauses and
    events to send after the text go to ``waits``."""
    approvals: list[PauseRequest] = []
    decision = _before_booking(ctx, answer, approvals)
    waits.extend(approvals)
    if isinstance(decision, str):
        return decision
    operation = operation_id(BOOKING_DOMAIN, _business_key(ctx, decision))
    try:
        booking = await _book(ctx, decision)
    except OutcomeUnknownError:
        # Maybe booked, maybe not: say what we know, keep it visible in the state and in the
        # thread log, and wait for the airline; never "not booked".
        entry = {"flight": _flight(decision), "operation": operation}
        if entry not in unconfirmed:
            unconfirmed.append(entry)
        waits.append(CustomEvent(name=UNKNOWN_EVENT, value={"operationId": operation, **entry}))
        waits.append(_checking_request(entry["flight"], operation, decision.interrupt_id))
        return (
            f"Checking with the airline about flight {entry['flight']}: the booking went out"
            f" but its answer did not come back (operation {operation})."
        )
    except PauseMeshError as error:
        return f"I could not confirm the booking ({error.code})."
    unconfirmed[:] = [u for u in unconfirmed if u.get("operation") != operation]
    if not _is_booking(booking):
        # An operator's resolution that records no booking (``pausemesh ops resolve`` with,
        # say, {"booked": false}): the airline has none, so none is listed.
        return (
            f"An operator recorded that flight {_flight(decision)} was not booked"
            f" (operation {operation}); nothing is booked."
        )
    if booking not in bookings:
        bookings.append(booking)
    approved = answer.metadata.get("kind") == _APPROVAL and answer.resolved_by
    by = f" (approved by {answer.resolved_by})" if approved else ""
    return (
        f"Booked flight {booking['flight']} to {DESTINATION}{by},"
        f" confirmation {booking['confirmation']}."
    )


async def travel_agent(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """The demo agent (see the module docstring)."""
    if ctx.decisions:
        bookings = _bookings(ctx.state)
        unconfirmed = _unconfirmed(ctx.state)
        waits: list[AgentOutput] = []
        for decision in ctx.decisions.values():
            for event in _say(await _reply(ctx, decision, bookings, unconfirmed, waits)):
                yield event
        state = dict(ctx.state) if isinstance(ctx.state, dict) else {}
        state["bookings"] = bookings
        if unconfirmed:
            state["unconfirmedBookings"] = unconfirmed
        else:
            state.pop("unconfirmedBookings", None)
        yield StateSnapshotEvent(snapshot=state)
        for output in waits:
            yield output
        return

    if not isinstance(ctx.state, dict) or "bookings" not in ctx.state:
        base = dict(ctx.state) if isinstance(ctx.state, dict) else {}
        yield StateSnapshotEvent(snapshot={**base, "bookings": []})
    last = ctx.messages[-1] if ctx.messages else None
    if not isinstance(last, UserMessage):
        for event in _say("Tell me where you would like to fly, and I will find flights."):
            yield event
        return
    offered = ", ".join(f.label for f in FLIGHTS)
    for event in _say(f"I found {len(FLIGHTS)} flights to {DESTINATION}: {offered}."):
        yield event
    yield PauseRequest(
        message=QUESTION,
        reason="input_required",
        response_schema=flight_choice_schema(),
        expires_in=_question_ttl(ctx),
    )
