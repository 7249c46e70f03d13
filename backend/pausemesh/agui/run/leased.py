"""One leased run, phase by phase: resume, ``RUN_STARTED``, the agent, the finish.

1. the run's input is settled on the thread (``ResumePhase``, ``resume_phase.py``): the open
   cohort's whole-batch ``resume`` validated and executed exactly once; a replay of the last
   closed cohort validated the same way and answered from the record without running the
   agent again;
2. ``RUN_STARTED``, then the agent's events (``AgentPump``, ``pump.py``), each appended to the
   thread log under the lease (``RunLease``, ``lease.py``: getting its sequence, the SSE ``id``)
   *before* it is sent;
3. close what the agent left open; if it paused, the cohort is stored before the interrupting
   ``RUN_FINISHED`` is sent (``RunFinish``, ``finish.py``). A run stopped by an interrupting
   input (double texting; only a run that carries no decisions can be) says so first, in a
   CUSTOM ``pausemesh.run_interrupted``, and saves what it keeps.

Each phase is made with the ports and values it uses (from ``RunParts``) and returns what it
changed; the run keeps its own record. Every refusal or failure after the lease is an
``AguiRunError``, turned into the ``RUN_ERROR`` frame in one place (``frames``); nothing raises
out of it except cancellation.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator
from typing import Any

from msgspec import UNSET

from pausemesh.agui.agent import Decision, Operations, RunContext, reads_history_lazily
from pausemesh.agui.events import (
    PROTOCOL_VERSION,
    CustomEvent,
    Message,
    RunStartedEvent,
)
from pausemesh.agui.input import RunAgentInput
from pausemesh.agui.run.finish import RunFinish
from pausemesh.agui.run.history import StoredHistory
from pausemesh.agui.run.lease import RunLease
from pausemesh.agui.run.parts import RunParts
from pausemesh.agui.run.pump import AgentPump
from pausemesh.agui.run.resume_phase import ResumePhase, Settled
from pausemesh.agui.run.snapshots import (
    open_interrupts,
    restored,
    typed_messages,
    wire_messages,
)
from pausemesh.agui.run.state import StoredState
from pausemesh.agui.run_error import AguiRunError
from pausemesh.agui.sse import encode_frame
from pausemesh.agui.transcript import Transcript
from pausemesh.core.errors import PauseMeshError, ThreadNotFoundError
from pausemesh.core.threads import ThreadRecord

__all__ = ("DECIDED_ELSEWHERE_EVENT", "LeasedRun", "decided_elsewhere_event")

DECIDED_ELSEWHERE_EVENT = "pausemesh.decided_elsewhere"

_log = logging.getLogger("pausemesh.agui")


def decided_elsewhere_event(decisions: dict[str, Decision]) -> CustomEvent:
    """What a run continuing a cohort decided out of band says first: who decided what."""
    return CustomEvent(
        name=DECIDED_ELSEWHERE_EVENT,
        value={
            "interruptIds": list(decisions),
            "decisions": [
                {
                    "interruptId": d.interrupt_id,
                    "status": d.status,
                    **({} if d.resolved_by is None else {"resolvedBy": d.resolved_by}),
                }
                for d in decisions.values()
            ],
        },
    )


class LeasedRun:
    """The state of one run that holds its thread's lease."""

    def __init__(
        self,
        parts: RunParts,
        record: ThreadRecord,
        run_input: RunAgentInput,
        principal: str | None,
        lease_id: str,
        *,
        roles: frozenset[str] = frozenset(),
    ) -> None:
        self.parts = parts
        self.record = record
        self.input = run_input
        self.principal = principal
        self.roles = roles
        self.thread_id = run_input.thread_id
        self.run_id = run_input.run_id
        self.lease = RunLease(
            keeper=parts.leases,
            threads=parts.threads,
            thread_id=self.thread_id,
            run_id=self.run_id,
            lease_id=lease_id,
        )
        self.started = False
        # How the run ended, for its span and pausemesh_runs_finished_total; None while it runs
        # (and for a run whose client went away before the end).
        self.outcome: str | None = None
        self.error_code: str | None = None

    async def _error_frame(self, error: AguiRunError) -> bytes:
        if self.started and not self.lease.lost:
            with contextlib.suppress(PauseMeshError):
                return await self.lease.emit([error.to_event()], last=True)
        return encode_frame(error.to_event())

    async def frames(self) -> AsyncGenerator[bytes, None]:
        try:
            async with contextlib.aclosing(self._frames()) as frames:
                async for chunk in frames:
                    yield chunk
        except PauseMeshError as error:  # AguiRunError is one too
            if error.code == "LEASE_LOST":
                self.lease.refused()  # nothing more is written
            refusal = AguiRunError.from_error(error)
            self.outcome, self.error_code = "error", refusal.code
            yield await self._error_frame(refusal)
        except Exception:  # noqa: BLE001 - after the 200 every failure is a RUN_ERROR
            _log.exception("AG-UI run failed on thread %s", self.thread_id)
            self.outcome, self.error_code = "error", "INTERNAL_ERROR"
            yield await self._error_frame(AguiRunError("INTERNAL_ERROR", "The run failed"))

    # -- the run --------------------------------------------------------------------------

    async def _frames(self) -> AsyncGenerator[bytes, None]:
        record, parts = self.record, self.parts
        resume = ResumePhase(
            service=parts.service,
            threads=parts.threads,
            clock=parts.clock,
            schemas=parts.schemas,
            max_thread_bytes=parts.max_thread_bytes,
            principal=self.principal,
            roles=self.roles,
        )
        settled = await resume.settle(record, self.input)
        self.started = True
        if settled.replayed:
            yield await self._replayed()
            self.outcome = "success"
            return
        yield await self.lease.emit(
            [
                RunStartedEvent(
                    thread_id=self.thread_id, run_id=self.run_id, protocol_version=PROTOCOL_VERSION
                )
            ]
        )
        if settled.elsewhere:
            yield await self.lease.emit([decided_elsewhere_event(settled.decisions)])
        # The run starts from none of the stored history (the lease's record holds no message):
        # its events continue only messages of this run, and the agent reads what it looks at
        # (``ctx.messages``, ``ctx.history``), so the run's cost does not grow with the thread.
        # Nor from the stored state: ``UNREAD_STATE`` unless the run's input set it (a first
        # run), read when the agent looks or a ``STATE_DELTA`` needs it (``run/state.py``); a
        # run that does neither reads and writes none of it.
        state = StoredState(settled.state, self._read_state)
        transcript = Transcript(
            [*record.messages, *settled.added],
            state.working_copy(),
            base=record.messages_from,
            dirty_from=record.message_count if settled.added else None,
        )
        agent = AgentPump(
            agent=parts.agent,
            lease=self.lease,
            queue_size=parts.queue_size,
            keepalive_seconds=parts.keepalive_seconds,
            run_timeout_seconds=parts.run_timeout_seconds,
            drain=parts.drain,
            # A run that carries decisions is never stopped: its side effects happen once.
            interruptible=not settled.decisions and settled.closing is None,
            state=state,
        )
        context = await self._context(state, settled, stored=record.messages_from)
        async with contextlib.aclosing(agent.frames(context, transcript)) as out:
            async for chunk in out:
                yield chunk
        yield await self.lease.emit(transcript.closing_events())
        if agent.interrupted is not None:
            yield await self.lease.emit([agent.end_interrupted(transcript, self.run_id)])
        finish = RunFinish(
            lease=self.lease,
            threads=parts.threads,
            service=parts.service,
            schemas=parts.schemas,
            clock=parts.clock,
            principal=self.principal,
            roles=self.roles,
            snapshot_messages=parts.snapshot_messages,
        )
        finished = await finish.end(
            record, transcript, agent.pauses, settled.closing, title=agent.title
        )
        self.record = finished.record
        last = await self.lease.emit(finished.events, last=True)
        self.outcome = "interrupt" if agent.pauses else "success"
        yield last

    async def _read_state(self) -> Any:
        """The stored state, read under the lease (no save comes in between)."""
        found = await self.parts.threads.get(self.thread_id, tail=0)
        if found is None:
            raise ThreadNotFoundError(self.thread_id)
        return found.state

    async def _context(self, state: StoredState, settled: Settled, *, stored: int) -> RunContext:
        """The agent's context; ``stored``: how many messages the thread held before the run's
        request (all of them ``ctx.messages`` reads when looked at, ``run/history.py``)."""
        parts = self.parts
        added = [dict(m) for m in settled.added]
        request = await typed_messages(added)
        history = None
        if not reads_history_lazily(parts.agent):

            async def read(start: int, end: int) -> list[Message]:
                rows = await parts.threads.read_messages(
                    self.thread_id, before=end, limit=end - start
                )
                return await typed_messages([row.message for row in reversed(rows)])

            history = StoredHistory(stored, request, read)

        async def loader(limit: int | None) -> list[Message]:
            if history is not None:
                held = history.held_tail(len(history) if limit is None else limit)
                if held is not None:
                    return held
            tail = None if limit is None else max(limit - len(added), 0)
            found = (
                await parts.threads.get(self.thread_id, tail=tail)
                if tail is None or tail > 0
                else None
            )
            messages = [*([] if found is None else found.messages), *added]
            return await typed_messages(messages if limit is None else messages[-limit:])

        return RunContext(
            thread_id=self.thread_id,
            run_id=self.run_id,
            # A ``lazy_history`` agent's: only what its request added.
            messages=request if history is None else history,
            state=state.for_agent(),
            principal=self.principal,
            roles=self.roles,
            decisions=settled.decisions,
            operations=None
            if parts.operations is None
            else Operations(
                parts.operations,
                clock=parts.clock,
                webhooks=parts.service.webhooks,
                declared_by=parts.leases.holder,
            ),
            tools=self.input.tools,
            context=self.input.context,
            forwarded_props=None
            if self.input.forwarded_props is UNSET
            else self.input.forwarded_props,
            history_loader=loader,
        )

    async def _replayed(self) -> bytes:
        # The newest page, as a reload carries (``RunFinish``).
        tail = self.parts.snapshot_messages
        record = await self.parts.threads.get(self.thread_id, tail=tail) or self.record
        # If the agent paused again after that resume, the thread's current question stands.
        return await self.lease.emit(
            restored(
                self.thread_id,
                self.run_id,
                await wire_messages(record.messages),
                record.state,
                open_interrupts(record),
            ),
            last=True,
        )
