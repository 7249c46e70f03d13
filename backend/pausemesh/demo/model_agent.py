"""The demo's travel agent driven by a language model: ``PAUSEMESH_EXAMPLE_MODEL`` set.

``pausemesh demo`` serves the rule-based agent (``demo/agent.py``) unless the setting names a
pydantic-ai model (``openai:gpt-4o-mini``, ``anthropic:...``, or ``test`` for pydantic-ai's
``TestModel``); then this module's pydantic-ai ``Agent`` answers, served through the
pydantic-ai integration (``pausemesh.integrations.pydantic_ai``), with the rule-based agent's
tools and the same pauses, so the page, the manager's inbox and the bookings read the same:

- ``search_flights(destination)``: a city of the catalogue (matched as the rule-based agent
  matches it) asks the traveller "Which flight should I book?" with that city's flights as
  choices (``choice_request``, a pydantic-ai deferred *question*); the traveller's pick is the
  tool's result (the flight's code, times, price, and whether it needs a manager). A city
  outside the catalogue returns the cities it flies to.
- ``book_flight(flight)``: books a flight the traveller chose in this run's answer (never one
  the model made up). A fare above the approval threshold first asks a manager
  (``approval_request``, a pydantic-ai approval); a rejection reaches the model as the tool's
  denial. The booking goes through ``book_once``: the operation ledger in the demo's booking
  domain, keyed by the thread and the question the traveller answered, so the airline books
  once per question whatever is replayed, retried or re-run, and the record (flight, times,
  cabin, price, confirmation) is the one MCP and A2A bookings have. It joins the state's
  ``bookings`` (a ``STATE_DELTA`` sent with the tool's result).

Each answer is recorded as the person's message first (``answer_text``), as the rule-based
agent does. Only this module imports pydantic-ai: the demo without the setting never loads it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final

import msgspec
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai import ApprovalRequired, CallDeferred, ToolReturn
from pydantic_ai import RunContext as ToolContext
from pydantic_ai.exceptions import UserError
from pydantic_ai.models import Model, infer_model

from pausemesh.agui import (
    AgentOutput,
    Decision,
    Operations,
    PauseRequest,
    RunContext,
    StateDeltaEvent,
    ThreadTitle,
)
from pausemesh.core.errors import AgentLoadError
from pausemesh.demo.agent import (
    answer_text,
    approval_request,
    approval_threshold,
    book_once,
    choice_request,
    needs_approval,
    say,
)
from pausemesh.demo.flights import booking_summary, city_names, city_of, find_city, flight
from pausemesh.integrations.pydantic_ai import DEFAULT_HISTORY_MESSAGES, PydanticAIAgent

__all__ = ("DOMAIN", "ModelTravelAgent", "build_travel_agent", "instructions", "model_from")

DOMAIN: Final = "demo.model-tool-approvals"
"""The ledger domain of the tool calls a manager approved (the booking itself is in
``BOOKING_DOMAIN``, like every demo booking)."""

_META: Final = "pydanticAi"  # where the integration keeps its part of a pause's metadata
_CHOICE: Final = "choice"
_APPROVAL: Final = "approval"
_SETTING: Final = "PAUSEMESH_EXAMPLE_MODEL"


def instructions() -> str:
    """The system prompt: what the assistant can do and how its tools are meant to be used."""
    threshold = approval_threshold()
    return (
        "You are the travel assistant of the PauseMesh demo. You book flights from the"
        f" traveller's home airport to {city_names()}, and nothing else. When the traveller"
        " names a destination, call search_flights with it: the traveller is shown that"
        " city's flights (times, price, cabin) and picks one, and the tool returns their"
        " choice. Then call book_flight with the chosen flight's code; never book a flight"
        " the traveller did not pick. A fare above"
        f" {threshold} EUR needs a manager's approval: book_flight asks a manager, and the"
        " flight is booked only if they approve. Confirm a booking only when book_flight"
        " says it is booked, quoting its confirmation; say so plainly when it is not. When"
        " the traveller names no destination, ask where they would like to go and name the"
        " cities. To a greeting or a request for help, say what you can do in two sentences."
    )


@dataclasses.dataclass(frozen=True, slots=True)
class _Trip:
    """A run's dependencies: where to book, and what the people answered in this run."""

    operations: Operations | None
    thread_id: str
    # A chosen flight's code → the question it answered (the booking's business key).
    chosen: Mapping[str, str]
    # A flight's code → the manager who approved it.
    approved_by: Mapping[str, str]
    booked: tuple[str, ...]


def _trip(ctx: RunContext) -> _Trip:
    chosen: dict[str, str] = {}
    approved_by: dict[str, str] = {}
    for decision in ctx.decisions.values():
        if decision.status != "resolved":
            continue
        kind = decision.metadata.get("kind")
        code = decision.metadata.get("flight")
        question = decision.metadata.get("question")
        if kind == _CHOICE and isinstance(decision.payload, dict):
            picked = decision.payload.get("flight")
            if isinstance(picked, str):
                chosen[picked] = decision.interrupt_id
        elif kind == _APPROVAL and isinstance(code, str) and isinstance(question, str):
            chosen[code] = question
            if decision.resolved_by:
                approved_by[code] = decision.resolved_by
    state = ctx.state if isinstance(ctx.state, dict) else {}
    bookings = state.get("bookings") if isinstance(state.get("bookings"), list) else []
    booked = tuple(
        b["confirmation"]
        for b in bookings or ()
        if isinstance(b, dict) and isinstance(b.get("confirmation"), str)
    )
    return _Trip(ctx.operations, ctx.thread_id, chosen, approved_by, booked)


def _flight_details(code: str) -> dict[str, Any]:
    """What the model learns about the traveller's pick."""
    offer = flight(code)
    if offer is None:
        return {"flight": code}
    city = city_of(code)
    details: dict[str, Any] = {"flight": offer.code, **offer.as_json()}
    details.pop("code", None)
    if city is not None:
        details["destination"] = city.name
    details["needsManagerApproval"] = needs_approval(offer)
    return details


def build_travel_agent(model: Model | str) -> PydanticAgent[_Trip, str]:
    """The pydantic-ai agent with the demo's two tools (see the module docstring)."""
    travel = PydanticAgent(model, deps_type=_Trip, instructions=instructions())

    @travel.tool
    async def search_flights(ctx: ToolContext[_Trip], destination: str) -> str:
        """Show the traveller the flights to ``destination`` and return the one they pick
        (or that they picked none)."""
        del ctx  # the question is asked by the run, not here
        city = find_city(destination)
        if city is None:
            return f"No flights to {destination!r}. The destinations are {city_names()}."
        raise CallDeferred(metadata={"destination": city.name}, kind="question")

    @travel.tool
    async def book_flight(ctx: ToolContext[_Trip], flight_code: str) -> ToolReturn | str:
        """Book the flight the traveller picked from search_flights, by its code (PM101)."""
        code = flight_code.strip().upper()
        offer = flight(code)
        question = ctx.deps.chosen.get(code)
        if offer is None or question is None:
            return (
                f"Not booked: the traveller has not picked flight {flight_code} just now."
                " Call search_flights for their destination and book the flight they pick."
            )
        if needs_approval(offer) and not ctx.tool_call_approved:
            # The run ends here with a question to a manager; their approval runs this again.
            raise ApprovalRequired(metadata={"flight": code, "question": question})
        booking = await book_once(ctx.deps.operations, f"{ctx.deps.thread_id}:{question}", code)
        by = ctx.deps.approved_by.get(code)
        said = booking_summary(booking, f" (approved by {by})" if by else "")
        confirmation = booking.get("confirmation")
        if confirmation in ctx.deps.booked:
            return said
        # The booking joins the state with the result; a replayed result replays it too.
        added = StateDeltaEvent(delta=[{"op": "add", "path": "/bookings/-", "value": booking}])
        return ToolReturn(return_value=said, metadata=[added])

    return travel


def _for_the_model(decision: Decision) -> Decision:
    """A person's answer to one of the demo's pauses, as the integration's answer shape: the
    chosen flight's details as the search's result; a manager's verdict as an approval."""
    if decision.status != "resolved":
        return decision
    kind = decision.metadata.get("kind")
    payload = decision.payload if isinstance(decision.payload, dict) else {}
    if kind == _CHOICE and isinstance(payload.get("flight"), str):
        return msgspec.structs.replace(decision, payload=_flight_details(payload["flight"]))
    if kind == _APPROVAL:
        if payload.get("decision") == "approve":
            return msgspec.structs.replace(decision, payload={"approved": True})
        who = decision.resolved_by or "the manager"
        reason = f"Not approved by {who}; the flight is not booked."
        return msgspec.structs.replace(decision, payload={"approved": False, "reason": reason})
    return decision


def _demo_pause(ctx: RunContext, pause: PauseRequest) -> list[AgentOutput]:
    """The integration's pause as the demo asks it: the flight question, or the manager's
    approval; the integration's metadata (the run's history) kept beside the demo's."""
    metadata = pause.metadata or {}
    found = metadata.get(_META)
    mine: dict[str, Any] = found if isinstance(found, dict) else {}
    kept = mine.get("metadata")
    details: dict[str, Any] = kept if isinstance(kept, dict) else {}
    city = find_city(details.get("destination") or "") if mine.get("kind") == "external" else None
    if city is not None:
        choice = choice_request(ctx, city)
        return [
            ThreadTitle(f"Flight to {city.name}"),
            msgspec.structs.replace(
                choice,
                tool_call_id=pause.tool_call_id,
                metadata={**metadata, "kind": _CHOICE, "destination": city.name},
            ),
        ]
    offer = flight(details.get("flight") or "") if mine.get("kind") == "approval" else None
    if offer is not None:
        approval = approval_request(ctx, offer)
        return [
            msgspec.structs.replace(
                approval,
                tool_call_id=pause.tool_call_id,
                metadata={**metadata, **(approval.metadata or {}), "question": details["question"]},
            )
        ]
    return [pause]


class ModelTravelAgent:
    """The demo's agent on a pydantic-ai model (see the module docstring); a new user turn
    gives the model the thread's newest ``history_messages`` (``PydanticAIAgent``'s)."""

    framework = "pydantic-ai"
    # Like the integration: the thread's history is read only for a new user turn.
    pausemesh_lazy_history = True

    def __init__(
        self, model: Model | str, *, history_messages: int | None = DEFAULT_HISTORY_MESSAGES
    ) -> None:
        self.agent = build_travel_agent(model)
        self._inner = PydanticAIAgent(
            self.agent,
            deps=_trip,
            initial_state={"bookings": []},
            domain=DOMAIN,
            history_messages=history_messages,
        )

    async def __call__(self, ctx: RunContext) -> AsyncIterator[AgentOutput]:
        for decision in ctx.decisions.values():
            given = answer_text(decision)
            if given is not None:
                for event in say(given[1], role="user", kind=given[0]):
                    yield event
        answers = {key: _for_the_model(d) for key, d in ctx.decisions.items()}
        async for output in self._inner(dataclasses.replace(ctx, decisions=answers)):
            if isinstance(output, PauseRequest):
                for shaped in _demo_pause(ctx, output):
                    yield shaped
            else:
                yield output


def model_from(name: str) -> Model:
    """The pydantic-ai model ``name`` names (``test``: ``TestModel``), or ``AgentLoadError``
    saying why not in one line: an unknown model, its provider's package or key missing."""
    try:
        return infer_model(name.strip())
    except (UserError, ImportError, ValueError) as error:
        said = str(error)
        if said.startswith("Unknown model"):
            said = "pydantic-ai knows no such model (e.g. openai:gpt-4o-mini, or test)"
        raise AgentLoadError(f"{_SETTING}={name!r}: {said}") from None
