"""The demo's A2A agent: the travel assistant's flight question as an input-required task.

* A new message (its text is the destination) opens a durable pause: a keyed continuation
  whose correlation id is the A2A context, projected with ``to_a2a_interrupted_task`` into a
  ``TASK_STATE_INPUT_REQUIRED`` task carrying the continuation id in its metadata.
* A follow-up ``SendMessage`` with that task id (already checked against the pause's schema
  by the router) resumes the continuation exactly once and books through the operation
  ledger with the continuation id as business key, then completes the task with the booking
  as an artifact. A duplicate, concurrent or cross-replica follow-up finds the continuation
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
from a2a.types import AgentCapabilities, AgentCard, AgentSkill, Part, Task, TaskState
from google.protobuf.json_format import ParseDict  # type: ignore[import-untyped]

from pausemesh.a2a.answers import answer_of
from pausemesh.a2a.store import principal_of_call
from pausemesh.a2a.task import A2ATaskBinding, to_a2a_interrupted_task
from pausemesh.core.canonical import canonical_sha256
from pausemesh.core.errors import (
    ContinuationCancelledError,
    ContinuationExpiredError,
    IdempotencyConflictError,
    TokenAlreadyUsedError,
)
from pausemesh.core.ids import uuid7
from pausemesh.core.model import Continuation
from pausemesh.demo.airline import CONNECT_PATH
from pausemesh.demo.flights import flight_choice_schema, flight_question
from pausemesh.demo.mcp_tools import book_once, booking_summary, demo_ledger
from pausemesh.web.a2a_mount import continuation_id_of
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
                description="Send a destination; answer the flight question with"
                ' {"flight": "PM101" | "PM202" | "PM303"}.',
                tags=["travel", "human-in-the-loop"],
                examples=["Lisbon"],
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

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        cid = continuation_id_of(task)
        if task is None or cid is None:
            await self._ask(context, event_queue)
        else:
            await self._answer(context, event_queue, task, cid)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        cid = continuation_id_of(task)
        if task is not None and cid is not None:
            service = self._pausemesh.runtime.service
            principal = principal_of_call(context.call_context)
            continuation = await service.get(cid, principal=principal)
            if continuation.is_pending:
                await service.cancel(
                    continuation_id=cid, reason="a2a:cancelled", principal=principal
                )
        await TaskUpdater(event_queue, str(context.task_id), str(context.context_id)).cancel()

    async def _ask(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = str(context.task_id), str(context.context_id)
        text = context.get_user_input().strip()
        principal = principal_of_call(context.call_context)
        cid = uuid7()
        if text.lower().startswith(_CONNECT_INTENT):
            # An authorization pause: the link is the only thing that travels; the sign-in
            # and its credentials stay between the user, the airline and this server.
            payload: dict[str, Any] = {
                "kind": "authorization",
                "message": "Sign in to PauseMesh Air to link your account:"
                f" {_origin(context)}{CONNECT_PATH}?state={cid}",
            }
            metadata: dict[str, Any] = {"a2a": {"taskId": task_id, "intent": "connect"}}
        else:
            destination = text or _DEFAULT_DESTINATION
            payload = {
                "kind": "input",
                "message": flight_question(destination),
                "responseSchema": flight_choice_schema(),
            }
            metadata = {"a2a": {"taskId": task_id, "destination": destination}}
        created = await self._pausemesh.runtime.service.create(
            payload=payload,
            continuation_id=cid,
            correlation_id=context_id,
            metadata=metadata,
            owner=principal,
            keyed=True,
        )
        binding = A2ATaskBinding(task_id=task_id, context_id=context_id)
        projected = to_a2a_interrupted_task(created.continuation, binding)["task"]
        task: Task = ParseDict(projected, Task())
        if context.message is not None:
            task.history.append(context.message)
        await event_queue.enqueue_event(task)

    async def _answer(
        self, context: RequestContext, event_queue: EventQueue, task: Task, cid: str
    ) -> None:
        service = self._pausemesh.runtime.service
        principal = principal_of_call(context.call_context)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        answer = answer_of(context.message)
        if task.status.state == TaskState.TASK_STATE_AUTH_REQUIRED:
            await self._authorization_control(updater, task, cid, answer, principal)
            return
        try:
            settled = await service.resume_trusted(
                continuation_id=cid,
                idempotency_key="a2a:" + canonical_sha256(["a2a-answer-v1", cid, answer]),
                payload=answer,
                principal=principal,
                resolved_by=principal,
            )
        except (TokenAlreadyUsedError, IdempotencyConflictError):
            # Answered already (a duplicate or another replica won): the stored answer counts.
            settled = await service.get(cid, principal=principal)
        except ContinuationCancelledError:
            await updater.cancel(updater.new_agent_message(_parts({"text": "Cancelled."})))
            return
        except ContinuationExpiredError:
            await updater.failed(
                updater.new_agent_message(_parts({"text": "The question expired."}))
            )
            return
        await self._book(updater, settled)

    async def _authorization_control(
        self, updater: TaskUpdater, task: Task, cid: str, answer: Any, principal: str | None
    ) -> None:
        """``reject`` cancels the pause; ``retry`` continues once the callback resumed it."""
        service = self._pausemesh.runtime.service
        continuation = await service.get(cid, principal=principal)
        action = answer.get("action") if isinstance(answer, dict) else None
        if continuation.status == "resumed":
            await updater.complete(
                updater.new_agent_message(_parts({"text": "Your airline account is linked."}))
            )
        elif continuation.status == "pending" and action == "reject":
            await service.cancel(continuation_id=cid, reason="a2a:reject", principal=principal)
            await updater.reject(
                updater.new_agent_message(_parts({"text": "The account was not linked."}))
            )
        elif continuation.status == "pending":
            # Not signed in yet: still waiting, with the same explanation and link.
            await updater.requires_auth(task.status.message)
        else:
            await updater.failed(
                updater.new_agent_message(_parts({"text": "The sign-in request ended."}))
            )

    async def _book(self, updater: TaskUpdater, settled: Continuation) -> None:
        ledger = demo_ledger(self._pausemesh)
        destination = settled.metadata.get("a2a", {}).get("destination", _DEFAULT_DESTINATION)
        answer = settled.resume_payload
        flight = answer.get("flight") if isinstance(answer, dict) else None
        if not isinstance(flight, str):
            await updater.failed(
                updater.new_agent_message(_parts({"text": "The answer names no flight."}))
            )
            return
        booking = await book_once(ledger, settled.continuation_id, destination, flight)
        await updater.add_artifact(_parts({"data": booking}), name="booking")
        await updater.complete(
            updater.new_agent_message(_parts({"text": booking_summary(booking)}))
        )
