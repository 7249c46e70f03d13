"""The AG-UI run host (DESIGN §4.2-4.4): runs the host's agent on a durable thread.

One run, once its input has been validated by the route:

1. take the thread's run lease (a concurrent run gets ``RUN_ERROR`` ``THREAD_BUSY``);
2. if the thread has an open interrupt cohort, validate the whole-batch ``resume`` against its
   receipt and execute each command exactly once through the ``ContinuationService`` (keyed
   token re-derived server-side); a replay of the last closed cohort is validated the same way
   and answered from the record without running the agent again;
3. ``RUN_STARTED``, then the agent's events, each appended to the thread log (getting its
   sequence, the SSE ``id``) *before* it is sent;
4. close what the agent left open; if it paused, create one continuation per pause, store the
   cohort (receipt + interrupts) in the thread record, and only then send ``MESSAGES_SNAPSHOT``,
   ``STATE_SNAPSHOT`` and the interrupting ``RUN_FINISHED``.

Every failure after the response started is a ``RUN_ERROR`` with a code; nothing raises out
of the frame generators except cancellation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncGenerator, Sequence
from datetime import datetime, timedelta
from typing import Any, Final

import anyio
import msgspec
from msgspec import UNSET

from pausemesh.agui.agent import Agent, Decision, Operations, PauseRequest, RunContext
from pausemesh.agui.cohort import (
    INVALID_INPUT,
    REPLAY_CONFLICT,
    RESUME_EXPIRED,
    AguiRunError,
    CancelCommand,
    CohortReceipt,
    ResumePlan,
    issue_interrupts,
    parse_pause_payload,
    pause_payload,
    receipt_from_json,
    receipt_to_json,
    validate_resume,
)
from pausemesh.agui.events import (
    KEEPALIVE_FRAME,
    PROTOCOL_VERSION,
    Event,
    Interrupt,
    Message,
    MessagesSnapshotEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
    ToolMessage,
    encode_event,
    encode_frame,
)
from pausemesh.agui.input import RunAgentInput
from pausemesh.agui.transcript import Transcript
from pausemesh.core.errors import (
    ContinuationCancelledError,
    ContinuationExpiredError,
    IdempotencyConflictError,
    InvalidTransitionError,
    PauseMeshError,
    ThreadNotFoundError,
    TokenAlreadyUsedError,
    VersionConflictError,
)
from pausemesh.core.model import Continuation
from pausemesh.core.operations import OperationLedger
from pausemesh.core.ports import Clock
from pausemesh.core.schema import SchemaValidatorCache
from pausemesh.core.service import ContinuationService
from pausemesh.core.threads import DEFAULT_LEASE_SECONDS, ThreadRecord, ThreadStore

__all__ = ("RunHost", "thread_snapshot")

_log = logging.getLogger("pausemesh.agui")

_MESSAGES: Final = msgspec.json.Decoder(list[Message])
_INTERRUPTS: Final = msgspec.json.Decoder(list[Interrupt])
_TAIL_PAGE = 500
_CONFLICTS = (
    TokenAlreadyUsedError,
    IdempotencyConflictError,
    InvalidTransitionError,
    ContinuationCancelledError,
    VersionConflictError,
)
_FRAME_EVENTS = (RunStartedEvent, RunFinishedEvent)


class _Done:
    pass


class _Failed:
    def __init__(self, error: Exception) -> None:
        self.error = error


_DONE: Final = _Done()


class _Stop(Exception):  # noqa: N818 - control flow inside one run
    """End the run with this RUN_ERROR."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.event = RunErrorEvent(message=message, code=code)


def _to_messages(data: list[Any]) -> list[Message]:
    return _MESSAGES.decode(msgspec.json.encode(data))


def _cohort_interrupts(cohort: Any) -> list[Interrupt]:
    return _INTERRUPTS.decode(msgspec.json.encode(cohort["interrupts"]))


def _open_interrupts(record: ThreadRecord) -> list[Interrupt]:
    return [] if record.open_receipt is None else _cohort_interrupts(record.open_receipt)


def _restored(
    thread_id: str, run_id: str, messages: list[Message], state: Any, interrupts: list[Interrupt]
) -> list[Event]:
    """A run that only restores the thread: RUN_STARTED, both snapshots, RUN_FINISHED (with
    the open interrupts, if any)."""
    return [
        RunStartedEvent(thread_id=thread_id, run_id=run_id, protocol_version=PROTOCOL_VERSION),
        MessagesSnapshotEvent(messages=messages),
        StateSnapshotEvent(snapshot=state),
        RunFinishedEvent(
            thread_id=thread_id,
            run_id=run_id,
            outcome=RunFinishedInterruptOutcome(interrupts=interrupts) if interrupts else UNSET,
        ),
    ]


def _cohort_ids(cohort: Any) -> set[str]:
    if not isinstance(cohort, dict):
        return set()
    return {i["continuationId"] for i in cohort["receipt"]["interrupts"]}


def thread_snapshot(record: ThreadRecord) -> dict[str, Any]:
    """``GET /agui/threads/{id}``: what a client needs to rebuild the thread."""
    return {
        "threadId": record.thread_id,
        "messages": record.messages,
        "state": record.state,
        "pendingInterrupts": []
        if record.open_receipt is None
        else record.open_receipt["interrupts"],
        "lastSequence": record.last_sequence,
    }


def _service_error(error: PauseMeshError) -> _Stop:
    if isinstance(error, _CONFLICTS):
        return _Stop(REPLAY_CONFLICT, "AG-UI resume conflicts with the completed interrupt outcome")
    if isinstance(error, ContinuationExpiredError):
        return _Stop(RESUME_EXPIRED, "AG-UI resume references an expired interrupt")
    return _Stop(error.code, error.message)


class RunHost:
    """Runs one agent on durable threads; the routes turn its frame generators into SSE."""

    def __init__(
        self,
        *,
        agent: Agent,
        service: ContinuationService,
        threads: ThreadStore,
        operations: OperationLedger | None = None,
        schemas: SchemaValidatorCache | None = None,
        clock: Clock | None = None,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        keepalive_seconds: float = 15.0,
        queue_size: int = 256,
    ) -> None:
        self.agent = agent
        self.service = service
        self.threads = threads
        self.operations = operations
        self.schemas = schemas or SchemaValidatorCache()
        self.clock: Clock = clock or service.clock
        if not 0 < keepalive_seconds <= lease_seconds / 2:
            # A silent run renews its lease on each keep-alive; it must come well before expiry.
            msg = "keepalive_seconds must be positive and at most half of lease_seconds"
            raise ValueError(msg)
        self.lease = timedelta(seconds=lease_seconds)
        self.keepalive_seconds = keepalive_seconds
        self.queue_size = queue_size

    # -- reads ----------------------------------------------------------------------------

    async def load(self, thread_id: str, principal: str | None) -> ThreadRecord:
        """The thread as ``principal`` may see it; ``ThreadNotFoundError`` otherwise."""
        record = await self.threads.get(thread_id)
        if record is None or record.owner != principal:
            raise ThreadNotFoundError(thread_id)
        return record

    async def check_access(self, thread_id: str, principal: str | None) -> None:
        """Refuse (before any stream starts) a thread that belongs to someone else."""
        record = await self.threads.get(thread_id)
        if record is not None and record.owner != principal:
            raise ThreadNotFoundError(thread_id)

    async def connect(
        self, run_input: RunAgentInput, principal: str | None
    ) -> AsyncGenerator[bytes, None]:
        """Restore a thread without running the agent: RUN_STARTED, snapshots, RUN_FINISHED.

        An unknown thread (or one of another principal, which looks the same) echoes the
        client's own messages and state, so a first visit loses nothing.
        """
        record = await self.threads.get(run_input.thread_id)
        if record is None or record.owner != principal:
            messages: list[Message] = list(run_input.messages)
            state = run_input.state
            interrupts: list[Interrupt] = []
        else:
            messages = _to_messages(record.messages)
            state = record.state
            interrupts = _open_interrupts(record)
        events = _restored(run_input.thread_id, run_input.run_id, messages, state, interrupts)
        yield b"".join(encode_frame(event) for event in events)

    async def tail(self, thread_id: str, *, after_sequence: int) -> AsyncGenerator[bytes, None]:
        """The thread log after ``after_sequence``, then live events as they are appended."""
        after = after_sequence
        while True:
            entries = await self.threads.read_events(
                thread_id, after_sequence=after, limit=_TAIL_PAGE
            )
            if entries:
                yield b"".join(encode_frame(e.event_json, e.sequence) for e in entries)
                after = entries[-1].sequence
                continue
            woke = await self.threads.wait_for_events(
                thread_id, after_sequence=after, wait_seconds=self.keepalive_seconds
            )
            if not woke:
                yield KEEPALIVE_FRAME

    # -- runs -----------------------------------------------------------------------------

    async def run(
        self, run_input: RunAgentInput, principal: str | None
    ) -> AsyncGenerator[bytes, None]:
        """SSE frames for one run of the agent on ``run_input.thread_id``."""
        thread_id = run_input.thread_id
        lease_id = uuid.uuid4().hex
        now = self.clock.now()
        try:
            record = await self.threads.create_or_load(thread_id, owner=principal, now=now)
            if record.owner != principal:
                raise ThreadNotFoundError(thread_id)
            record = await self.threads.acquire_lease(
                thread_id,
                lease_id=lease_id,
                run_id=run_input.run_id,
                now=now,
                expires_at=now + self.lease,
            )
        except PauseMeshError as error:
            yield encode_frame(RunErrorEvent(message=error.message, code=error.code))
            return
        run = _Run(self, record, run_input, principal, lease_id)
        try:
            # aclosing: a client that goes away closes the inner generators now, not at GC.
            async with contextlib.aclosing(run.frames()) as frames:
                async for chunk in frames:
                    yield chunk
        finally:
            # Runs even when the client went away and the scope is cancelled.
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await self.threads.release_lease(thread_id, lease_id=lease_id)


class _Run:
    """The state of one leased run."""

    def __init__(
        self,
        host: RunHost,
        record: ThreadRecord,
        run_input: RunAgentInput,
        principal: str | None,
        lease_id: str,
    ) -> None:
        self.host = host
        self.record = record
        self.input = run_input
        self.principal = principal
        self.lease_id = lease_id
        self.thread_id = run_input.thread_id
        self.run_id = run_input.run_id
        self.started = False
        self._renewed_at = host.clock.now()

    # -- output ---------------------------------------------------------------------------

    async def _emit(self, events: Sequence[Event]) -> bytes:
        """Append ``events`` to the thread log, then return their frames (id = sequence)."""
        if not events:
            return b""
        texts = [encode_event(e) for e in events]
        sequences = await self.host.threads.append_events(
            self.thread_id,
            lease_id=self.lease_id,
            run_id=self.run_id,
            events=[t.decode() for t in texts],
        )
        await self._renew_if_due()
        return b"".join(encode_frame(t, s) for t, s in zip(texts, sequences, strict=True))

    async def _renew_if_due(self) -> None:
        now = self.host.clock.now()
        if now - self._renewed_at < self.host.lease / 3:
            return
        await self.host.threads.acquire_lease(
            self.thread_id,
            lease_id=self.lease_id,
            run_id=self.run_id,
            now=now,
            expires_at=now + self.host.lease,
        )
        self._renewed_at = now

    async def _error_frame(self, stop: _Stop) -> bytes:
        if self.started:
            with contextlib.suppress(PauseMeshError):
                return await self._emit([stop.event])
        return encode_frame(stop.event)

    async def frames(self) -> AsyncGenerator[bytes, None]:
        try:
            async with contextlib.aclosing(self._frames()) as frames:
                async for chunk in frames:
                    yield chunk
        except _Stop as stop:
            yield await self._error_frame(stop)
        except PauseMeshError as error:
            yield await self._error_frame(_Stop(error.code, error.message))
        except Exception:  # noqa: BLE001 - after the 200 every failure is a RUN_ERROR
            _log.exception("AG-UI run failed on thread %s", self.thread_id)
            yield await self._error_frame(_Stop("INTERNAL_ERROR", "The run failed"))

    # -- the run --------------------------------------------------------------------------

    async def _cohort(self, cohort: Any) -> tuple[CohortReceipt, list[Continuation]]:
        try:
            receipt = receipt_from_json(cohort["receipt"])
        except (msgspec.ValidationError, msgspec.DecodeError, KeyError, TypeError):
            raise _Stop(INVALID_INPUT, "AG-UI issuance receipt is invalid") from None
        continuations = [
            await self.host.service.get(i.continuation_id, principal=self.principal)
            for i in receipt.interrupts
        ]
        return receipt, continuations

    async def _validated(self, cohort: Any) -> tuple[ResumePlan, list[Continuation]]:
        receipt, continuations = await self._cohort(cohort)
        result = validate_resume(
            self.input,
            receipt,
            continuations,
            now=self.host.clock.now(),
            schemas=self.host.schemas,
        )
        if isinstance(result, AguiRunError):
            abandoned = self._abandoned_expired(receipt, continuations)
            if result.code != RESUME_EXPIRED or abandoned is None:
                raise _Stop(result.code, result.message)
            return abandoned, continuations
        return result, continuations

    def _abandoned_expired(
        self, receipt: CohortReceipt, continuations: list[Continuation]
    ) -> ResumePlan | None:
        """A batch that cancels a cohort whose every question has expired closes it.

        AG-UI: an expired interrupt can no longer be resolved, but it can and must be
        cancelled to continue the thread. Nothing is left to execute: expiry settled them.
        """
        resume = self.input.resume
        if resume is UNSET or len(resume) != len(receipt.interrupts):
            return None
        by_id = {e.interrupt_id: e for e in resume}
        if set(by_id) != set(receipt.interrupt_ids):
            return None
        if any(e.status != "cancelled" or e.payload is not UNSET for e in resume):
            return None
        now = self.host.clock.now()
        if not all(
            c.status == "expired" or (c.is_pending and now >= c.expires_at) for c in continuations
        ):
            return None
        return ResumePlan(
            thread_id=receipt.thread_id,
            cohort_id=receipt.cohort_id,
            commands=(),
            entries=tuple(by_id[i] for i in receipt.interrupt_ids),
        )

    async def _execute(self, plan: ResumePlan) -> None:
        service = self.host.service
        for command in plan.commands:
            try:
                if isinstance(command, CancelCommand):
                    await service.cancel(
                        continuation_id=command.continuation_id,
                        reason=command.reason,
                        expected_version=command.expected_version,
                        principal=self.principal,
                    )
                else:
                    await service.resume_trusted(
                        continuation_id=command.continuation_id,
                        idempotency_key=command.idempotency_key,
                        payload=command.payload,
                        principal=self.principal,
                        resolved_by=self.principal,
                    )
            except PauseMeshError as error:
                raise _service_error(error) from None

    def _decisions(
        self, plan: ResumePlan, continuations: list[Continuation]
    ) -> dict[str, Decision]:
        by_id = {c.continuation_id: c for c in continuations}
        decisions: dict[str, Decision] = {}
        for entry in plan.entries:
            continuation = by_id[entry.interrupt_id]
            pause = parse_pause_payload(continuation.payload)
            agent_metadata = continuation.metadata.get("agent")
            decisions[entry.interrupt_id] = Decision(
                interrupt_id=entry.interrupt_id,
                status=entry.status,
                payload=entry.payload if entry.status == "resolved" else UNSET,
                message=pause.message,
                reason=pause.reason,
                tool_call_id=pause.tool_call_id,
                metadata=agent_metadata if isinstance(agent_metadata, dict) else {},
            )
        return decisions

    def _merged_messages(self, dropped_tool_calls: set[str]) -> list[dict[str, Any]]:
        """The server's history plus what the client added; the server's copy wins.

        A ``tool`` message the client made up for an interrupted tool call (CopilotKit does)
        is dropped: the resume entry is the answer.
        """
        known = {m.get("id") for m in self.record.messages}
        added = [
            msgspec.to_builtins(m)
            for m in self.input.messages
            if m.id not in known
            and not (isinstance(m, ToolMessage) and m.tool_call_id in dropped_tool_calls)
        ]
        return [*self.record.messages, *added]

    async def _frames(self) -> AsyncGenerator[bytes, None]:
        closing: Any = None
        decisions: dict[str, Decision] = {}
        dropped: set[str] = set()
        resume = self.input.resume
        record = self.record
        answered = {e.interrupt_id for e in resume} if resume else set()
        closed_ids = _cohort_ids(record.closed_receipt)
        if answered and answered & closed_ids and not answered & _cohort_ids(record.open_receipt):
            # A resume of the cohort that is already closed: identical → answered from the
            # record (the agent already acted on it); different → refused by validation.
            plan, _ = await self._validated(record.closed_receipt)
            await self._execute(plan)
            yield await self._replayed()
            return
        if record.open_receipt is not None:
            plan, continuations = await self._validated(record.open_receipt)
            await self._execute(plan)
            closing = record.open_receipt
            decisions = self._decisions(plan, continuations)
            dropped = {
                i.tool_call_id for i in _cohort_interrupts(closing) if i.tool_call_id is not UNSET
            }
        elif resume:
            _log.warning(
                "ignoring %d resume entries for unknown interrupts on thread %s",
                len(resume),
                self.thread_id,
            )

        self.started = True
        yield await self._emit(
            [
                RunStartedEvent(
                    thread_id=self.thread_id, run_id=self.run_id, protocol_version=PROTOCOL_VERSION
                )
            ]
        )
        fresh = record.version == 1 and not record.messages
        transcript = Transcript(
            self._merged_messages(dropped), self.input.state if fresh else record.state
        )
        context = RunContext(
            thread_id=self.thread_id,
            run_id=self.run_id,
            messages=_to_messages(transcript.messages),
            state=msgspec.json.decode(msgspec.json.encode(transcript.state)),
            principal=self.principal,
            decisions=decisions,
            operations=None
            if self.host.operations is None
            else Operations(self.host.operations, clock=self.host.clock),
            tools=self.input.tools,
            context=self.input.context,
            forwarded_props=None
            if self.input.forwarded_props is UNSET
            else self.input.forwarded_props,
        )
        pauses: list[PauseRequest] = []
        async with contextlib.aclosing(self._agent_frames(context, transcript, pauses)) as agent:
            async for chunk in agent:
                yield chunk
        yield await self._emit(transcript.closing_events())
        yield await self._finish(transcript, pauses, closing)

    async def _replayed(self) -> bytes:
        record = self.record
        self.started = True
        # If the agent paused again after that resume, the thread's current question stands.
        return await self._emit(
            _restored(
                self.thread_id,
                self.run_id,
                _to_messages(record.messages),
                record.state,
                _open_interrupts(record),
            )
        )

    async def _agent_frames(
        self, context: RunContext, transcript: Transcript, pauses: list[PauseRequest]
    ) -> AsyncGenerator[bytes, None]:
        """Run the agent in its own task; send what it yields in batches, keep-alives between."""
        queue: asyncio.Queue[Event | PauseRequest | _Done | _Failed] = asyncio.Queue(
            self.host.queue_size
        )

        async def produce() -> None:
            try:
                async for output in self.host.agent(context):
                    await queue.put(output)
            except Exception as error:  # noqa: BLE001 - reported to the client as RUN_ERROR
                await queue.put(_Failed(error))
            else:
                await queue.put(_DONE)

        task = asyncio.create_task(produce(), name=f"pausemesh-agent-{self.thread_id}")
        try:
            while True:
                try:
                    async with asyncio.timeout(self.host.keepalive_seconds):
                        item = await queue.get()
                except TimeoutError:
                    await self._renew_if_due()
                    yield KEEPALIVE_FRAME
                    continue
                batch = [item]
                while not isinstance(batch[-1], (_Done, _Failed)) and not queue.empty():
                    batch.append(queue.get_nowait())
                events: list[Event] = []
                stop: _Stop | None = None
                try:
                    for output in batch:
                        self._take(output, transcript, pauses, events)
                except _Stop as error:
                    stop = error
                # What the agent sent before a failure still goes out, then the RUN_ERROR.
                if events:
                    yield await self._emit(events)
                if stop is not None:
                    raise stop
                if isinstance(batch[-1], _Done):
                    return
        finally:
            # Not awaited: the agent's own cleanup must not hold up (or swallow) ours.
            task.cancel()

    def _take(
        self,
        output: Event | PauseRequest | _Done | _Failed,
        transcript: Transcript,
        pauses: list[PauseRequest],
        events: list[Event],
    ) -> None:
        """Fold one agent output into the run; ``_Stop`` ends the run with a RUN_ERROR."""
        if isinstance(output, _Done):
            return
        if isinstance(output, _Failed):
            _log.error("agent failed on thread %s", self.thread_id, exc_info=output.error)
            raise _Stop("AGENT_FAILED", "The agent failed")
        if isinstance(output, PauseRequest):
            pauses.append(output)
        elif isinstance(output, RunErrorEvent):
            # The agent ends the run with its own error.
            code = output.code if isinstance(output.code, str) else "AGENT_ERROR"
            raise _Stop(code, output.message)
        elif isinstance(output, _FRAME_EVENTS):
            msg = "The agent must not send RUN_STARTED or RUN_FINISHED"
            raise _Stop("AGENT_PROTOCOL_ERROR", msg)
        else:
            try:
                transcript.apply(output)
            except PauseMeshError as error:
                raise _Stop(error.code, error.message) from None
            events.append(output)

    async def _finish(
        self, transcript: Transcript, pauses: list[PauseRequest], closing: Any
    ) -> bytes:
        closed = closing if closing is not None else self.record.closed_receipt
        now = self.host.clock.now()
        if not pauses:
            await self._save_end(transcript, None, closed, now)
            return await self._emit(
                [RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id)]
            )
        continuations = await self._create(pauses, now)
        try:
            finished, receipt = issue_interrupts(
                continuations,
                thread_id=self.thread_id,
                run_id=self.run_id,
                schemas=self.host.schemas,
            )
        except PauseMeshError as error:
            raise _Stop(error.code, error.message) from None
        assert isinstance(finished.outcome, RunFinishedInterruptOutcome)  # noqa: S101 - issued so
        cohort = {
            "receipt": receipt_to_json(receipt),
            "interrupts": msgspec.to_builtins(finished.outcome.interrupts),
        }
        # The cohort is durable before the client hears of it.
        await self._save_end(transcript, cohort, closed, now)
        return await self._emit(
            [
                MessagesSnapshotEvent(messages=_to_messages(transcript.messages)),
                StateSnapshotEvent(snapshot=transcript.state),
                finished,
            ]
        )

    async def _save_end(
        self, transcript: Transcript, open_receipt: Any, closed_receipt: Any, now: datetime
    ) -> None:
        """Save the run's transcript with the receipts it ends with (open: a pending cohort)."""
        record = msgspec.structs.replace(
            self.record,
            messages=transcript.messages,
            state=transcript.state,
            open_receipt=open_receipt,
            closed_receipt=closed_receipt,
        )
        try:
            self.record = await self.host.threads.save(record, now=now)
        except VersionConflictError:
            raise _Stop("THREAD_CONFLICT", "The thread changed during the run") from None

    async def _create(self, pauses: list[PauseRequest], now: datetime) -> list[Continuation]:
        # Every pause is checked before any continuation exists: all of the cohort or none.
        payloads: list[dict[str, Any]] = []
        for pause in pauses:
            payload = pause_payload(
                pause.message,
                response_schema=pause.response_schema,
                tool_call_id=pause.tool_call_id,
                reason=pause.reason,
            )
            try:
                parse_pause_payload(payload)
                if pause.response_schema is not None:
                    self.host.schemas.check_schema(pause.response_schema)
            except (ValueError, TypeError) as error:
                message = error.message if isinstance(error, PauseMeshError) else str(error)
                raise _Stop("AGENT_PROTOCOL_ERROR", f"invalid pause: {message}") from None
            payloads.append(payload)
        created: list[Continuation] = []
        for pause, payload in zip(pauses, payloads, strict=True):
            expires_at = pause.expires_at
            if expires_at is None and pause.expires_in is not None:
                expires_at = now + timedelta(seconds=pause.expires_in)
            try:
                result = await self.host.service.create(
                    payload=payload,
                    correlation_id=self.thread_id,
                    expires_at=expires_at,
                    metadata={} if pause.metadata is None else {"agent": pause.metadata},
                    owner=self.principal,
                    keyed=True,
                )
            except PauseMeshError as error:
                raise _Stop("AGENT_PROTOCOL_ERROR", error.message) from None
            created.append(result.continuation)
        return created
