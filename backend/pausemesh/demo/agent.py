"""The demo travel agent: deterministic, no model, no network.

- On a user message naming a city of the catalogue (``demo/flights.py``: case, accents and
  punctuation do not matter, "I need a flight to porto next week") it says how many flights
  it found there, names the thread after the trip, then pauses: "Which flight should I
  book?", reason ``input_required``, with a ``responseSchema`` whose required ``flight`` is one
  of that city's flights (a string ``enum``, their labels as ``enumNames``).
- A greeting or a request for help is answered with what it can do; any other message naming
  no city gets "Where to?" and the cities it flies to. Neither pauses.
- When the answer is ``resolved`` it books the flight through the durable operation ledger
  (at most once per question, whatever is replayed or retried) and confirms, naming it. The
  airline cooperates (``demo/reservations.py``): if a crash left the booking's outcome
  unknown, the ledger asks the airline. If the airline cannot answer either, the agent says it
  is checking with the airline (with the operation id) and records the booking as unconfirmed
  in the state; it never says "not booked" for what may have been booked.
- Each answer is first recorded in the conversation as the person's own message (role
  ``user``, id ``answer-…``): the flight chosen, or "No flight, thanks."; a manager's decision
  as ``decision-…`` saying who decided ("Approved by maria: flight PM404"). Message ids carry
  the time they were written (``<kind>-<epoch ms>-<uuid>``), as AG-UI messages have no time.
- When the answer is ``cancelled`` it says it will not book.
- A flight priced above the approval threshold (``PAUSEMESH_DEMO_APPROVAL_THRESHOLD``,
  ``configure_approvals``) is not booked on the traveller's word: the agent pauses again with
  ``approvers=[Approver.role("manager")]``, showing the exact terms; another person, a manager,
  decides it from the approvals inbox (``/v1/approvals``), and that decision continues the
  traveller's thread (the server runs the agent with it): approved → booked, rejected → not
  booked. A manager's own request waits for another manager (four eyes are two people). The
  request is tagged ``booking`` and its destination (``lisbon``) and names the agent
  (``travel-assistant``) for the inbox's filters; if nobody decides it, a reminder goes out
  after 2 minutes and after 5 a director (role ``director``) is asked too (each only when
  before the deadline).

The AG-UI state holds ``bookings``: one entry per real booking, ``[]`` from the first run on
(its first event is that ``STATE_SNAPSHOT``), so a client never finds the key missing.

A client may pass ``forwardedProps.questionTtlSeconds`` (1-86400) to give the question a
shorter deadline, to see expiry without waiting for the server's default, and
``forwardedProps.searchSeconds`` (0-60) to make the flight search take that long, to see a
newer message interrupt a run (double texting), and ``forwardedProps.approvalRemindSeconds``
and ``approvalEscalateSeconds`` (1-86400) to see a manager's approval reminded and escalated
sooner.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any, Final, Literal

import msgspec

from pausemesh.agui import (
    AgentOutput,
    Approver,
    CustomEvent,
    Decision,
    Operations,
    PauseRequest,
    RunContext,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ThreadTitle,
    UserMessage,
)
from pausemesh.core.errors import OutcomeUnknownError, PauseMeshError
from pausemesh.core.operations import operation_id
from pausemesh.demo.flights import (
    BOOKING_DOMAIN,
    DEFAULT_APPROVAL_THRESHOLD,
    City,
    Flight,
    booking_summary,
    city_names,
    city_of,
    find_city,
    flight,
    flight_choice_schema,
    normalize,
)
from pausemesh.demo.reservations import airline

__all__ = (
    "AGENT_NAME",
    "APPROVER_ROLE",
    "ESCALATION_ROLE",
    "QUESTION",
    "UNKNOWN_EVENT",
    "answer_text",
    "approval_request",
    "approval_schema",
    "approval_terms",
    "approval_threshold",
    "book_once",
    "choice_request",
    "configure_approvals",
    "needs_approval",
    "question_ttl",
    "reply_to",
    "say",
    "travel_agent",
)

QUESTION: Final = "Which flight should I book?"
_STANDARD_DESTINATION: Final = "Lisbon"
_GREETINGS: Final = frozenset(
    {"hi", "hello", "hey", "hallo", "hola", "ola", "bonjour", "morning", "evening", "thanks"}
)
_HELP: Final = ("help", "what can you do", "how does this work", "who are you", "what do you do")
APPROVER_ROLE: Final = "manager"
# Who is asked too when no manager decided in time.
ESCALATION_ROLE: Final = "director"
AGENT_NAME: Final = "travel-assistant"
_REMIND_AFTER: Final = 120.0
_ESCALATE_AFTER: Final = 300.0
_APPROVAL: Final = "approval"
_OPERATION: Final = "operation"
UNKNOWN_EVENT: Final = "pausemesh.operation_unknown"
_MAX_TTL = 86_400
_MAX_SEARCH = 60
_threshold: int = DEFAULT_APPROVAL_THRESHOLD
# The server's default deadline (PAUSEMESH_TOKEN_TTL_SECONDS): timers must come before it.
_default_ttl: float = 900.0


def configure_approvals(threshold: int, *, default_ttl: float = 900.0) -> None:
    """Prices above ``threshold`` need a manager's approval; a pause without its own deadline
    has ``default_ttl`` seconds (``pausemesh demo`` sets both)."""
    global _threshold, _default_ttl  # noqa: PLW0603 - one demo per process, set at start-up
    _threshold = threshold
    _default_ttl = default_ttl


def approval_threshold() -> int:
    """The price (EUR) above which a booking waits for a manager."""
    return _threshold


def needs_approval(offer: Flight) -> bool:
    return offer.price > _threshold


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


def _destination(code: str) -> str:
    city = city_of(code)
    return _STANDARD_DESTINATION if city is None else city.name


def approval_terms(offer: Flight, who: str | None) -> str:
    traveller = "" if who is None else f" for {who}"
    return (
        f"Approve booking flight {offer.code} to {_destination(offer.code)}{traveller}:"
        f" departs {offer.departs}, arrives {offer.arrives}, {offer.cabin},"
        f" {offer.price} {offer.currency} (above the {_threshold} {offer.currency} limit)?"
    )


def _message_id(kind: str = "msg") -> str:
    """``<kind>-<epoch ms>-<uuid>``: AG-UI messages carry no time, so the demo's ids do (the
    page shows when each message was written, after a reload and on any device)."""
    return f"{kind}-{time.time_ns() // 1_000_000}-{uuid.uuid4()}"


def say(
    text: str, *, role: Literal["assistant", "user"] = "assistant", kind: str = "msg"
) -> list[AgentOutput]:
    """One message, streamed in a few word-sized deltas (the assistant's, or the answer a
    person gave to a question, recorded in the conversation as theirs)."""
    message_id = _message_id(kind)
    words = text.split(" ")
    deltas = [w if i == 0 else " " + w for i, w in enumerate(words)]
    return [
        TextMessageStartEvent(message_id=message_id, role=role),
        *(TextMessageContentEvent(message_id=message_id, delta=d) for d in deltas),
        TextMessageEndEvent(message_id=message_id),
    ]


def question_ttl(ctx: RunContext) -> float | None:
    props = ctx.forwarded_props
    if not isinstance(props, dict):
        return None
    ttl = props.get("questionTtlSeconds")
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 1 <= ttl <= _MAX_TTL:
        return None
    return float(ttl)


def _search_seconds(ctx: RunContext) -> float:
    props = ctx.forwarded_props
    seconds = props.get("searchSeconds") if isinstance(props, dict) else None
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        return 0.0
    return float(seconds) if 0 < seconds <= _MAX_SEARCH else 0.0


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


async def book_once(operations: Operations | None, business_key: str, code: str) -> dict[str, Any]:
    """Book flight ``code`` at most once per ``business_key`` (in ``BOOKING_DOMAIN``, through the
    operation ledger, the airline looked up after a crash): the record the MCP and A2A
    surfaces book too. Raises ``OutcomeUnknownError`` when the airline cannot tell."""
    desk = airline()
    key = operation_id(BOOKING_DOMAIN, business_key)
    destination = _destination(code)

    async def action() -> dict[str, Any]:
        return await desk.book(key, destination, code)

    if operations is None:
        msg = "the demo agent needs the operation ledger"
        raise RuntimeError(msg)
    outcome = await operations.run_once(
        BOOKING_DOMAIN,
        business_key,
        tool="book_flight",
        arguments={"destination": destination, "flight": code},
        action=action,
        lookup=desk.lookup,
    )
    result: dict[str, Any] = outcome.result
    # An operator's resolution (``pausemesh ops resolve``) records what really happened there.
    resolved = result.get("resolvedResult") if isinstance(result, dict) else None
    return resolved if isinstance(resolved, dict) else result


async def _book(ctx: RunContext, decision: Decision) -> dict[str, Any]:
    """Book the chosen flight once per question (the interrupt), via the operation ledger."""
    return await book_once(ctx.operations, _business_key(ctx, decision), _flight(decision))


def choice_request(ctx: RunContext, city: City) -> PauseRequest:
    """ "Which flight should I book?": one of ``city``'s flights, as buttons."""
    return PauseRequest(
        message=QUESTION,
        reason="input_required",
        response_schema=flight_choice_schema(city.name, approval_above=_threshold),
        expires_in=question_ttl(ctx),
    )


def approval_request(ctx: RunContext, offer: Flight) -> PauseRequest:
    ttl = question_ttl(ctx)
    remind, escalate = _approval_timers(ctx, _default_ttl if ttl is None else ttl)
    return PauseRequest(
        message=approval_terms(offer, ctx.principal),
        reason="approval_required",
        response_schema=approval_schema(),
        approvers=(Approver.role(APPROVER_ROLE),),
        metadata={"kind": _APPROVAL, "flight": offer.code},
        expires_in=ttl,
        tags=("booking", _destination(offer.code).lower()),
        agent=AGENT_NAME,
        remind_after=remind,
        escalate_after=escalate,
        escalate_to=() if escalate is None else (Approver.role(ESCALATION_ROLE),),
    )


def _approval_timers(ctx: RunContext, ttl: float) -> tuple[float | None, float | None]:
    """Seconds to the reminder and to the escalation, each None unless before the deadline."""
    props = ctx.forwarded_props if isinstance(ctx.forwarded_props, dict) else {}
    chosen: list[float | None] = []
    for key, default in (
        ("approvalRemindSeconds", _REMIND_AFTER),
        ("approvalEscalateSeconds", _ESCALATE_AFTER),
    ):
        value = props.get(key)
        seconds = default
        if (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and 1 <= value <= _MAX_TTL
        ):
            seconds = float(value)
        chosen.append(seconds if seconds < ttl else None)
    return chosen[0], chosen[1]


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
    if offer is not None and needs_approval(offer):
        approvals.append(approval_request(ctx, offer))
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
    return booking_summary(booking, by)


def reply_to(text: str) -> City | str:
    """What the agent makes of a user's message: the city to offer flights to, or what to say
    (what it can do, for a greeting or a question; "Where to?" otherwise)."""
    city = find_city(text)
    if city is not None:
        return city
    words = normalize(text)
    greeting = bool(_GREETINGS & set(words.split())) or words in {"good morning", "thank you"}
    if greeting or not words or any(h in words for h in _HELP):
        return (
            f"Hello! I book flights to {city_names()}. Tell me where you would like to go"
            " (for example \u201ca flight to Porto next week\u201d), pick one of the flights I"
            f" find, and I book it; a fare above {_threshold} EUR waits for a manager's approval."
        )
    return f"Where to? I can book flights to {city_names()}."


def answer_text(decision: Decision) -> tuple[str, str] | None:
    """The answer as the person gave it, for the transcript: (``answer`` or ``decision``, text).
    A traveller's choice reads as the flight they picked; a manager's decision says who decided;
    the airline's answer about an unknown outcome is nobody's message (None)."""
    kind = decision.metadata.get("kind")
    if kind == _OPERATION:
        return None
    if kind == _APPROVAL:
        who = decision.resolved_by or "a manager"
        if decision.status == "cancelled":
            return None
        payload = decision.payload
        approved = isinstance(payload, dict) and payload.get("decision") == "approve"
        verdict = "Approved" if approved else "Rejected"
        return "decision", f"{verdict} by {who}: flight {decision.metadata.get('flight')}"
    if decision.status == "cancelled":
        return "answer", "No flight, thanks."
    payload = decision.payload
    code = payload.get("flight") if isinstance(payload, dict) else None
    offer = flight(code) if isinstance(code, str) else None
    if offer is None:
        return None
    return "answer", f"{offer.label} to {_destination(offer.code)}"


async def _continue(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """A run with answers: each answer as the person's message, then what came of it."""
    bookings = _bookings(ctx.state)
    unconfirmed = _unconfirmed(ctx.state)
    waits: list[AgentOutput] = []
    for decision in ctx.decisions.values():
        given = answer_text(decision)
        events = [] if given is None else say(given[1], role="user", kind=given[0])
        events += say(await _reply(ctx, decision, bookings, unconfirmed, waits))
        for event in events:
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


async def _offer(ctx: RunContext, text: str) -> AsyncIterator[AgentOutput]:
    """A user's message: flights to the city it names and the question, or a plain answer."""
    understood = reply_to(text)
    if isinstance(understood, str):
        for event in say(understood):
            yield event
        return
    city = understood
    # Once there is a trip, the list shows it by destination (the UI adds the date).
    yield ThreadTitle(f"Flight to {city.name}")
    searching = _search_seconds(ctx)
    if searching:
        # A slow search on request; a newer message may interrupt the run meanwhile (what it
        # said so far stays, marked as stopped).
        for event in say(f"Searching flights to {city.name}\u2026"):
            yield event
        await asyncio.sleep(searching)
    # The flights themselves are the question's choices (listed once, as buttons).
    for event in say(f"I found {len(city.flights)} flights to {city.name}."):
        yield event
    yield choice_request(ctx, city)


async def travel_agent(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """The demo agent (see the module docstring)."""
    if ctx.decisions:
        async for output in _continue(ctx):
            yield output
        return
    if not isinstance(ctx.state, dict) or "bookings" not in ctx.state:
        base = dict(ctx.state) if isinstance(ctx.state, dict) else {}
        yield StateSnapshotEvent(snapshot={**base, "bookings": []})
    last = ctx.messages[-1] if ctx.messages else None
    if not isinstance(last, UserMessage):
        for event in say("Tell me where you would like to fly, and I will find flights."):
            yield event
        return
    async for output in _offer(ctx, last.content if isinstance(last.content, str) else ""):
        yield output
