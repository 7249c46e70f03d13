"""The demo's A2A agent: the travel assistant's flight question as an input-required task.

The pauses are ``A2aPauses`` (``pausemesh.a2a.pauses``); this module only decides what to ask
and what to do with the answer.

* A new message (the city it names, matched in the catalogue as the chat matches it, or its
  whole text for a city outside it) asks which flight: the task becomes
  ``TASK_STATE_INPUT_REQUIRED`` with the continuation id in its metadata.
* A follow-up ``SendMessage`` with that task id (already checked against the pause's schema
  by the mount; the flight's code as plain text is an answer too, ``A2aPauses`` reads a
  one-field question's text) resumes the continuation exactly once; the agent books through
  the operation ledger with the continuation id as business key, then completes the task with
  the booking as an artifact. A duplicate, concurrent or cross-replica follow-up finds the continuation
  already resumed and reconciles to the same booking.
* "connect ..." opens an authorization pause instead: ``TASK_STATE_AUTH_REQUIRED`` whose
  status message carries only the sign-in link. The sign-in happens out of band (the demo's
  ``/demo/airline/connect`` callback resumes the continuation); the client then sends the
  narrow control ``{"action": "retry"}`` (or ``"reject"``). Credentials never travel in A2A.
"""

from __future__ import annotations

from typing import Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentSkill, Part
from google.protobuf.json_format import ParseDict  # type: ignore[import-untyped]

from pausemesh.a2a.pauses import A2aAnswer, A2aNotices, A2aPauses
from pausemesh.demo.airline import CONNECT_PATH
from pausemesh.demo.flights import (
    booking_summary,
    destination_name,
    flight_choice_schema,
    flight_question,
)
from pausemesh.demo.mcp_tools import book_once, demo_declarer, demo_ledger
from pausemesh.web.plugin import PauseMeshPlugin

__all__ = ("TravelA2AExecutor", "travel_agent_card")

_DEFAULT_DESTINATION = "Lisbon"
_CONNECT_INTENT = "connect"


def travel_agent_card() -> AgentCard:
    """The card without interfaces (the router adds its JSON-RPC and REST URLs)."""
    return AgentCard(
        name="PauseMesh travel assistant",
        description="Books flights; asks which flight first and waits durably for the answer.",
        version="0.1.0",
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[
            AgentSkill(
                id="connect_airline_account",
                name="Link an airline account",
                description="Send 'connect'; sign in on the linked page (out of band), then"
                ' send {"action": "retry"} (or {"action": "reject"}).',
                tags=["travel", "authorization"],
                examples=["connect my airline account"],
            ),
            AgentSkill(
                id="book_flight",
                name="Book a flight",
                description="Send a destination; answer the flight question with one of"
                ' its flights, as text ("PM101") or as data ({"flight": "PM101"}) for Lisbon.',
                tags=["travel", "human-in-the-loop"],
                examples=["Lisbon", "A flight to Porto next week"],
            ),
        ],
    )


def _origin(context: RequestContext) -> str:
    headers = context.call_context.state.get("headers") or {}
    host = headers.get("host") if isinstance(headers, dict) else None
    return f"http://{host}" if isinstance(host, str) and host else ""


def _parts(*values: dict[str, Any]) -> list[Part]:
    return [ParseDict(value, Part()) for value in values]


class TravelA2AExecutor(AgentExecutor):
    def __init__(self, pausemesh: PauseMeshPlugin) -> None:
        self._pausemesh = pausemesh
        self._pauses = A2aPauses(
            lambda: pausemesh.runtime.service,
            notices=A2aNotices(rejected="The account was not linked."),
        )

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        answer = await self._pauses.follow_up(context, event_queue)
        if answer is None:
            await self._ask(context, event_queue)
            return
        if answer.action != "accept":
            return  # the task was moved on (cancelled, expired, rejected, waiting, or done)
        updater = TaskUpdater(event_queue, str(context.task_id), str(context.context_id))
        if answer.continuation.payload.get("kind") == "authorization":
            await updater.complete(
                updater.new_agent_message(_parts({"text": "Your airline account is linked."}))
            )
            return
        await self._book(updater, answer)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await self._pauses.cancel(context, event_queue)

    async def _ask(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input().strip()
        if text.lower().startswith(_CONNECT_INTENT):
            # An authorization pause: the link is the only thing that travels; the sign-in
            # and its credentials stay between the user, the airline and this server.
            origin = _origin(context)
            await self._pauses.authorize(
                context,
                event_queue,
                message_for=lambda cid: (
                    "Sign in to PauseMesh Air to link your account:"
                    f" {origin}{CONNECT_PATH}?state={cid}"
                ),
                metadata={"intent": "connect"},
            )
            return
        destination = destination_name(text) if text else _DEFAULT_DESTINATION
        await self._pauses.ask(
            context,
            event_queue,
            message=flight_question(destination),
            schema=flight_choice_schema(destination),
            metadata={"destination": destination},
        )

    async def _book(self, updater: TaskUpdater, outcome: A2aAnswer) -> None:
        settled = outcome.continuation
        ledger = demo_ledger(self._pausemesh)
        destination = settled.metadata.get("a2a", {}).get("destination", _DEFAULT_DESTINATION)
        answer = settled.resume_payload
        flight = answer.get("flight") if isinstance(answer, dict) else None
        if not isinstance(flight, str):
            await updater.failed(
                updater.new_agent_message(_parts({"text": "The answer names no flight."}))
            )
            return
        booking = await book_once(
            ledger,
            settled.continuation_id,
            destination,
            flight,
            declare_as=demo_declarer(self._pausemesh),
        )
        await updater.add_artifact(
            _parts({"data": booking}), artifact_id=outcome.artifact_id("booking"), name="booking"
        )
        await updater.complete(
            updater.new_agent_message(_parts({"text": booking_summary(booking)}))
        )
