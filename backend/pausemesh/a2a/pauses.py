"""Durable pauses for A2A tasks: what a host's ``AgentExecutor`` calls (``McpPauses``'s twin).

* ``ask`` / ``authorize`` open a pause: a keyed continuation whose correlation id is the A2A
  context, projected with ``to_a2a_interrupted_task`` into a ``TASK_STATE_INPUT_REQUIRED`` (or
  ``TASK_STATE_AUTH_REQUIRED``) task carrying the continuation id in its metadata.
* ``follow_up`` reads a follow-up ``SendMessage`` to that task: an answer resumes the
  continuation exactly once (a duplicate, concurrent or cross-replica follow-up gets the stored
  answer); on an authorization pause, ``{"action": "retry"}`` continues once the host's
  out-of-band callback resumed it and ``{"action": "reject"}`` cancels it. When the pause did
  not end in an answer the task is moved on here (canceled, failed, rejected, or still
  auth-required); on ``accept`` the host acts and completes the task.
* ``cancel`` is ``AgentExecutor.cancel``: the pause is cancelled with its task.
* ``check_follow_up`` runs before the executor (the ``/a2a`` mount calls it): an answer that
  does not fit the pause is the A2A ``InvalidParamsError`` and the task stays interrupted.

Credentials never travel in A2A messages: authorization happens out of band.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from a2a.server.agent_execution import RequestContext
from a2a.server.agent_execution.active_task import INTERRUPTED_TASK_STATES
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Message, Part, Task, TaskState
from a2a.utils.errors import TaskNotFoundError, UnsupportedOperationError
from google.protobuf.json_format import ParseDict  # type: ignore[import-untyped]

from pausemesh.a2a.answers import NO_DATA, checked_answer, control_answer, data_answer
from pausemesh.a2a.store import is_terminal, principal_of_call
from pausemesh.a2a.task import A2ATaskBinding, to_a2a_interrupted_task
from pausemesh.core.canonical import canonical_sha256
from pausemesh.core.errors import (
    ContinuationCancelledError,
    ContinuationExpiredError,
    ContinuationNotFoundError,
    IdempotencyConflictError,
    TokenAlreadyUsedError,
)
from pausemesh.core.ids import uuid7
from pausemesh.core.model import Continuation
from pausemesh.core.resume import Resume, TrustedHost
from pausemesh.core.schema import SchemaValidatorCache
from pausemesh.core.service import ContinuationService

__all__ = ("A2aAnswer", "A2aNotices", "A2aPauses", "continuation_id_of")

A2aAction = Literal["accept", "cancel", "expire", "reject", "wait", "end", "done"]
"""``accept``: answered (or signed in); ``done``: the task was terminal already (nothing to do);
the rest: the task was moved on here."""


@dataclass(frozen=True, slots=True)
class A2aAnswer:
    """What a follow-up did to the task's pause; ``content`` is the answer on ``accept``."""

    continuation: Continuation
    action: A2aAction
    content: Any = None

    def artifact_id(self, name: str) -> str:
        """A stable artifact id for what this pause produced: a racing or replayed follow-up
        that reconciles to the same answer replaces the artifact instead of adding one."""
        return f"{self.continuation.continuation_id}:{name}"


@dataclass(frozen=True, slots=True)
class A2aNotices:
    """The agent's words when a pause ends without an answer (its status message)."""

    cancelled: str = "Cancelled."
    expired: str = "The question expired."
    rejected: str = "The authorization was rejected."
    ended: str = "The sign-in request ended."


def continuation_id_of(task: Task | None) -> str | None:
    """The continuation behind an interrupted task (``metadata.pausemesh.continuationId``)."""
    if task is None or "pausemesh" not in task.metadata:
        return None
    value = task.metadata["pausemesh"]
    # A protobuf Struct: no .get(), only `in` and indexing.
    cid = value["continuationId"] if "continuationId" in value else None  # noqa: SIM401
    return cid if isinstance(cid, str) else None


def _text(updater: TaskUpdater, text: str) -> Message:
    return updater.new_agent_message([ParseDict({"text": text}, Part())])


class A2aPauses:
    """Opens, settles and cancels the continuations behind interrupted A2A tasks."""

    def __init__(
        self,
        service: Callable[[], ContinuationService],
        *,
        notices: A2aNotices | None = None,
    ) -> None:
        # A getter: the service opens in the app's lifespan, after the executor is built.
        self._service = service
        self._notices = notices or A2aNotices()
        self._validators = SchemaValidatorCache()

    # -- opening a pause ------------------------------------------------------------------

    async def ask(
        self,
        context: RequestContext,
        event_queue: EventQueue,
        *,
        message: str,
        schema: dict[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        expires_in: timedelta | None = None,
    ) -> Continuation:
        """Ask ``message`` (answers must fit ``schema``); the task becomes input-required."""
        payload: dict[str, Any] = {"kind": "input", "message": message}
        if schema is not None:
            payload["responseSchema"] = schema
        return await self._pause(
            context,
            event_queue,
            payload,
            continuation_id=uuid7(),
            metadata=metadata,
            expires_in=expires_in,
        )

    async def authorize(
        self,
        context: RequestContext,
        event_queue: EventQueue,
        *,
        message_for: Callable[[str], str],
        metadata: Mapping[str, Any] | None = None,
        expires_in: timedelta | None = None,
    ) -> Continuation:
        """An auth-required task whose status message is ``message_for(continuation_id)``.

        The message carries the sign-in link (naming the pause, e.g. as OAuth ``state``); the
        host's callback resumes the pause (``service.resume`` by a ``TrustedHost``) and the
        client then sends ``{"action": "retry"}``.
        """
        cid = uuid7()
        payload: dict[str, Any] = {"kind": "authorization", "message": message_for(cid)}
        return await self._pause(
            context,
            event_queue,
            payload,
            continuation_id=cid,
            metadata=metadata,
            expires_in=expires_in,
        )

    async def _pause(
        self,
        context: RequestContext,
        event_queue: EventQueue,
        payload: dict[str, Any],
        *,
        continuation_id: str,
        metadata: Mapping[str, Any] | None,
        expires_in: timedelta | None,
    ) -> Continuation:
        service = self._service()
        task_id, context_id = str(context.task_id), str(context.context_id)
        expires_at = service.deadline_in(expires_in) if expires_in is not None else None
        created = await service.create(
            payload=payload,
            continuation_id=continuation_id,
            correlation_id=context_id,
            expires_at=expires_at,
            metadata={"a2a": {"taskId": task_id, **(metadata or {})}},
            owner=principal_of_call(context.call_context),
            keyed=True,
        )
        binding = A2ATaskBinding(task_id=task_id, context_id=context_id)
        projected = to_a2a_interrupted_task(created.continuation, binding)["task"]
        task: Task = ParseDict(projected, Task())
        if context.message is not None:
            task.history.append(context.message)
        await event_queue.enqueue_event(task)
        return created.continuation

    # -- a follow-up ------------------------------------------------------------------------

    async def check_follow_up(self, task: Task, message: Message, principal: str | None) -> None:
        """Refuse (``InvalidParamsError``) a follow-up that does not fit the task's open pause.

        A terminal task is ``UnsupportedOperationError`` (A2A: messages to terminal tasks);
        another principal's pause is ``TaskNotFoundError``; a task without an open pause is
        left to the executor.
        """
        if is_terminal(task):
            state = TaskState.Name(task.status.state)
            raise UnsupportedOperationError(message=f"Task {task.id} is in terminal state: {state}")
        if task.status.state not in INTERRUPTED_TASK_STATES:
            return
        cid = continuation_id_of(task)
        if cid is None:
            return
        try:
            continuation = await self._service().get(cid, principal=principal)
        except ContinuationNotFoundError:
            raise TaskNotFoundError from None
        if continuation.is_pending:
            checked_answer(continuation, message, self._validators)

    async def follow_up(self, context: RequestContext, event_queue: EventQueue) -> A2aAnswer | None:
        """Settle the task's pause from this follow-up; None if the task has no pause."""
        task = context.current_task
        cid = continuation_id_of(task)
        if task is None or cid is None:
            return None
        principal = principal_of_call(context.call_context)
        if is_terminal(task):
            # A follow-up queued behind the one that finished the task: nothing to do.
            return A2aAnswer(await self._service().get(cid, principal=principal), "done")
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        service = self._service()
        if task.status.state == TaskState.TASK_STATE_AUTH_REQUIRED:
            answer = control_answer(context.message)
            return await self._authorization_control(updater, task, cid, answer, principal)
        answer = data_answer(context.message)
        if answer is NO_DATA:
            # A text answer is read against the question (a one-field question takes text).
            continuation = await service.get(cid, principal=principal)
            answer = checked_answer(continuation, context.message, self._validators)
        command = Resume(
            continuation_id=cid,
            idempotency_key="a2a:" + canonical_sha256(["a2a-answer-v1", cid, answer]),
            payload=answer,
            by=TrustedHost(principal),
        )
        try:
            settled = (await service.resume(command)).continuation
        except (TokenAlreadyUsedError, IdempotencyConflictError):
            # Answered already (a duplicate, a racing follow-up or another replica won): the
            # stored answer counts, so every racer reconciles to the same outcome; the task
            # store keeps the task's first terminal write.
            settled = await service.get(cid, principal=principal)
        except ContinuationCancelledError:
            await updater.cancel(_text(updater, self._notices.cancelled))
            return A2aAnswer(await service.get(cid, principal=principal), "cancel")
        except ContinuationExpiredError:
            await updater.failed(_text(updater, self._notices.expired))
            return A2aAnswer(await service.get(cid, principal=principal), "expire")
        return A2aAnswer(settled, "accept", settled.resume_payload)

    async def _authorization_control(
        self, updater: TaskUpdater, task: Task, cid: str, answer: Any, principal: str | None
    ) -> A2aAnswer:
        """``reject`` cancels the pause; ``retry`` continues once the callback resumed it."""
        service = self._service()
        continuation = await service.get(cid, principal=principal)
        action = answer.get("action") if isinstance(answer, dict) else None
        if continuation.status == "resumed":
            return A2aAnswer(continuation, "accept", continuation.resume_payload)
        if continuation.status == "pending" and action == "reject":
            cancelled = await service.cancel(
                continuation_id=cid, reason="a2a:reject", principal=principal
            )
            await updater.reject(_text(updater, self._notices.rejected))
            return A2aAnswer(cancelled, "reject")
        if continuation.status == "pending":
            # Not signed in yet: still waiting, with the same explanation and link.
            await updater.requires_auth(task.status.message)
            return A2aAnswer(continuation, "wait")
        await updater.failed(_text(updater, self._notices.ended))
        return A2aAnswer(continuation, "end")

    # -- cancelling the task ----------------------------------------------------------------

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """``AgentExecutor.cancel``: cancel the task's open pause, then the task."""
        task = context.current_task
        cid = continuation_id_of(task)
        if task is not None and cid is not None:
            service = self._service()
            principal = principal_of_call(context.call_context)
            continuation = await service.get(cid, principal=principal)
            if continuation.is_pending:
                await service.cancel(
                    continuation_id=cid, reason="a2a:cancelled", principal=principal
                )
        await TaskUpdater(event_queue, str(context.task_id), str(context.context_id)).cancel()
