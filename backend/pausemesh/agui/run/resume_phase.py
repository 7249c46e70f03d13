"""The resume phase of a run: what its input settles on the thread before the agent runs.

``ResumePhase.settle``, in order:

1. a resume of the cohort already closed is a replay: identical → answered from the record
   (nothing executed again), different → refused by validation, decided elsewhere → the
   stored outcome stands whatever it says; the agent does not run;
2. the growth the input would bring is measured (``thread_size``) and refused past
   ``PAUSEMESH_MAX_THREAD_BYTES`` before anything happens;
3. the open cohort (or a lapsed one this run acknowledges): decided out of band → the stored
   decisions; otherwise the run's whole batch is validated once (``agui/resume.py``), its
   approvers checked, and each command executed exactly once through the service.

Each continuation of the cohort is loaded once per run; validation, the expired-cohort rule
and the agent's decisions all read those same objects. The phase changes the continuations
only; what it settled for the run comes back as ``Settled``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec
from msgspec import UNSET

from pausemesh.agui.agent import Decision
from pausemesh.agui.events import ToolMessage
from pausemesh.agui.input import RunAgentInput
from pausemesh.agui.resume import CancelCommand, ResumePlan, validate_resume
from pausemesh.agui.run.snapshots import cohort_interrupts
from pausemesh.agui.run.thread_size import check_growth
from pausemesh.agui.run_error import REPLAY_CONFLICT, RESUME_EXPIRED, AguiRunError
from pausemesh.core.approvers import may_decide, parse_approver
from pausemesh.core.errors import (
    ContinuationCancelledError,
    ContinuationExpiredError,
    IdempotencyConflictError,
    InvalidTransitionError,
    PauseMeshError,
    TokenAlreadyUsedError,
    VersionConflictError,
)
from pausemesh.core.model import Continuation
from pausemesh.core.pause import parse_pause_payload
from pausemesh.core.ports import Clock
from pausemesh.core.resume import Resume, TrustedHost
from pausemesh.core.schema import SchemaValidatorCache
from pausemesh.core.service import ContinuationService
from pausemesh.core.threads import CohortReceipt, IssuedCohort, ThreadRecord, ThreadStore
from pausemesh.observability.telemetry import span

__all__ = ("ResumePhase", "Settled", "decided_elsewhere")

NOT_AN_APPROVER = "NOT_AN_APPROVER"
# The idempotency keys AG-UI derives for its own resumes (``agui/resume.py``); any other key
# means the decision came from elsewhere.
AGUI_KEY_PREFIX = "agui:"

_log = logging.getLogger("pausemesh.agui")

_CONFLICTS = (
    TokenAlreadyUsedError,
    IdempotencyConflictError,
    InvalidTransitionError,
    ContinuationCancelledError,
    VersionConflictError,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Settled:
    """What the resume phase settled for the rest of the run."""

    # A replay of the closed cohort: answered from the record, the agent does not run.
    replayed: bool = False
    # The cohort this run closes when it finishes (None: it answers none).
    closing: IssuedCohort | None = None
    # The agent's view of the answers (``ctx.decisions``), keyed by interrupt id.
    decisions: dict[str, Decision] = field(default_factory=dict)
    # Decided out of band: the run says who decided what before the agent's events.
    elsewhere: bool = False
    # What the client added to the server's history (the agent starts from both), the state.
    added: list[dict[str, Any]] = field(default_factory=list)
    state: Any = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ResumePhase:
    """The resume phase of one run by ``principal`` (holding ``roles``)."""

    service: ContinuationService
    threads: ThreadStore
    clock: Clock
    schemas: SchemaValidatorCache
    max_thread_bytes: int
    principal: str | None
    roles: frozenset[str]

    async def settle(self, record: ThreadRecord, run_input: RunAgentInput) -> Settled:
        """Settle ``run_input`` on the thread (see the module docstring); ``AguiRunError``
        when refused, before the run has started."""
        resume = run_input.resume
        answered = {e.interrupt_id for e in resume} if resume else set()
        closed = record.closed_receipt
        open_cohort = record.open_receipt
        if open_cohort is None and closed is not None and closed.lapsed and answered & _ids(closed):
            # The server closed this cohort when its questions lapsed; the client's answer to
            # it (a cancel; a resolve is refused as expired) is the run that acknowledges it.
            open_cohort = closed
        if closed is not None and answered & _ids(closed) and not answered & _ids(open_cohort):
            # A resume of the cohort that is already closed: identical → answered from the
            # record (the agent already acted on it); different → refused by validation.
            # Decided elsewhere → the stored outcome stands, whatever this resume says.
            if not closed.decided_elsewhere:
                plan, _ = await self._validated(run_input, closed, None)
                await self._execute(plan)
            return Settled(replayed=True)
        # Measured before anything happens (no resume executed, nothing logged): refused past
        # PAUSEMESH_MAX_THREAD_BYTES, unless it answers the open cohort and adds nothing.
        added = await self._added_messages(record, run_input, open_cohort)
        fresh = record.version == 1 and not record.message_count
        check_growth(
            record.stored_bytes,
            added,
            run_input.state,
            self.max_thread_bytes,
            first_run=fresh,
            answers_cohort=open_cohort is not None,
        )
        messages = added
        state = run_input.state if fresh else record.state
        if open_cohort is None:
            if resume:
                _log.warning(
                    "ignoring %d resume entries for unknown interrupts on thread %s",
                    len(resume),
                    run_input.thread_id,
                )
            return Settled(added=messages, state=state)
        continuations = await self._load(open_cohort)
        if decided_elsewhere(continuations):
            # Decided out of band: this run (the server's own, or a client's resume that
            # arrived first) continues with the stored outcomes; the client's entries, if
            # any, change nothing.
            return Settled(
                closing=msgspec.structs.replace(open_cohort, decided_elsewhere=True),
                decisions=_stored_decisions(continuations),
                elsewhere=True,
                added=messages,
                state=state,
            )
        plan, continuations = await self._validated(run_input, open_cohort, continuations)
        await self._execute(plan)
        return Settled(
            closing=open_cohort,
            decisions=_decisions(plan, continuations),
            added=messages,
            state=state,
        )

    async def _added_messages(
        self, record: ThreadRecord, run_input: RunAgentInput, cohort: IssuedCohort | None
    ) -> list[dict[str, Any]]:
        """What the client added to the server's history (the server's copy of a known id
        wins; an id a rollback removed stays removed): the input's ids looked up in the
        store's indexes, not the history read.

        A ``tool`` message the client made up for a tool call the ``cohort``'s interrupts
        answer (CopilotKit does) is dropped: the resume entry is the answer.
        """
        dropped = (
            set()
            if cohort is None
            else {i.tool_call_id for i in cohort_interrupts(cohort) if i.tool_call_id is not UNSET}
        )
        ids = [m.id for m in run_input.messages]
        known = (
            await self.threads.known_message_ids(record.thread_id, ids)
            | await self.threads.removed_message_ids(record.thread_id, ids)
            if ids and record.message_count
            else set()
        )
        return [
            msgspec.to_builtins(m)
            for m in run_input.messages
            if m.id not in known and not (isinstance(m, ToolMessage) and m.tool_call_id in dropped)
        ]

    async def _load(self, cohort: IssuedCohort) -> list[Continuation]:
        """Each continuation of ``cohort``, loaded once for the run (expiry materialized)."""
        return [
            await self.service.get(i.continuation_id, principal=self.principal)
            for i in cohort.receipt.interrupts
        ]

    async def _validated(
        self,
        run_input: RunAgentInput,
        cohort: IssuedCohort,
        continuations: list[Continuation] | None,
    ) -> tuple[ResumePlan, list[Continuation]]:
        """The run's batch checked against ``cohort``; raises ``AguiRunError`` when refused."""
        receipt = cohort.receipt
        with span(
            "agui.resume.validate",
            thread_id=run_input.thread_id,
            run_id=run_input.run_id,
            cohort_size=len(receipt.interrupts),
        ):
            if continuations is None:
                continuations = await self._load(cohort)
            result = validate_resume(
                run_input, receipt, continuations, now=self.clock.now(), schemas=self.schemas
            )
            if isinstance(result, AguiRunError):
                abandoned = self._abandoned_expired(run_input, receipt, continuations)
                if result.code != RESUME_EXPIRED or abandoned is None:
                    raise result
                return abandoned, continuations
            self._check_approvers(result, continuations)
            return result, continuations

    def _check_approvers(self, plan: ResumePlan, continuations: list[Continuation]) -> None:
        """A pause that names approvers is decided by them (the approvals inbox), not by this
        run's caller, its owner, unless it allows the requester and names them; withdrawing it
        (a cancel) stays the owner's right."""
        by_id = {c.continuation_id: c for c in continuations}
        for command in plan.commands:
            if isinstance(command, CancelCommand) or command.settled:
                continue
            continuation = by_id[command.continuation_id]
            if continuation.approvers and not may_decide(
                [parse_approver(text) for text in continuation.approvers],
                owner=continuation.owner if isinstance(continuation.owner, str) else None,
                principal=self.principal,
                roles=self.roles,
                allow_requester=continuation.allow_requester,
            ):
                raise AguiRunError(NOT_AN_APPROVER, "Only the pause's approvers may decide it")

    def _abandoned_expired(
        self, run_input: RunAgentInput, receipt: CohortReceipt, continuations: list[Continuation]
    ) -> ResumePlan | None:
        """A batch that cancels a cohort whose every question has expired closes it.

        AG-UI: an expired interrupt can no longer be resolved, but it can and must be cancelled
        to continue the thread. Nothing is left to execute: expiry settled them.
        """
        resume = run_input.resume
        if resume is UNSET or len(resume) != len(receipt.interrupts):
            return None
        by_id = {e.interrupt_id: e for e in resume}
        if set(by_id) != set(receipt.interrupt_ids):
            return None
        if any(e.status != "cancelled" or e.payload is not UNSET for e in resume):
            return None
        now = self.clock.now()
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
        """Each command once, through the service (keyed token re-derived there).

        A settled command (an exact replay, seen in the continuation loaded for validation) is
        already done: the service would only hand back the stored outcome, so it is not asked.
        """
        service = self.service
        for command in plan.commands:
            if command.settled:
                continue
            try:
                if isinstance(command, CancelCommand):
                    await service.cancel(
                        continuation_id=command.continuation_id,
                        reason=command.reason,
                        expected_version=command.expected_version,
                        principal=self.principal,
                    )
                else:
                    await service.resume(
                        Resume(
                            continuation_id=command.continuation_id,
                            idempotency_key=command.idempotency_key,
                            payload=command.payload,
                            by=TrustedHost(self.principal, roles=self.roles),
                        )
                    )
            except PauseMeshError as error:
                raise _service_error(error) from None


def decided_elsewhere(continuations: list[Continuation]) -> bool:
    """Whether a cohort was settled from outside AG-UI: none is pending any more and one was
    resumed out of band (REST with a token, the approvals inbox: a key not made by AG-UI).
    The thread is then owed a run with the stored decisions, whoever starts it."""
    if not continuations or any(c.is_pending for c in continuations):
        return False
    return any(
        c.status == "resumed"
        and isinstance(c.idempotency_key, str)
        and not c.idempotency_key.startswith(AGUI_KEY_PREFIX)
        for c in continuations
    )


def _ids(cohort: IssuedCohort | None) -> set[str]:
    return set() if cohort is None else set(cohort.interrupt_ids)


def _service_error(error: PauseMeshError) -> AguiRunError:
    if isinstance(error, _CONFLICTS):
        return AguiRunError(
            REPLAY_CONFLICT, "AG-UI resume conflicts with the completed interrupt outcome"
        )
    if isinstance(error, ContinuationExpiredError):
        return AguiRunError(RESUME_EXPIRED, "AG-UI resume references an expired interrupt")
    return AguiRunError.from_error(error)


def _stored_decisions(continuations: list[Continuation]) -> dict[str, Decision]:
    """The agent's view of a cohort decided elsewhere: each stored outcome (a resume is
    ``resolved`` with its payload; a cancelled or expired one is ``cancelled``)."""
    out: dict[str, Decision] = {}
    for continuation in continuations:
        resumed = continuation.status == "resumed"
        out[continuation.continuation_id] = _decision(
            continuation,
            status="resolved" if resumed else "cancelled",
            payload=continuation.resume_payload if resumed else UNSET,
        )
    return out


def _decisions(plan: ResumePlan, continuations: list[Continuation]) -> dict[str, Decision]:
    """The agent's view of the batch, keyed by interrupt id."""
    by_id = {c.continuation_id: c for c in continuations}
    return {
        entry.interrupt_id: _decision(
            by_id[entry.interrupt_id],
            status=entry.status,
            payload=entry.payload if entry.status == "resolved" else UNSET,
        )
        for entry in plan.entries
    }


def _decision(
    continuation: Continuation, *, status: Literal["resolved", "cancelled"], payload: Any
) -> Decision:
    pause = parse_pause_payload(continuation.payload)
    agent_metadata = continuation.metadata.get("agent")
    return Decision(
        interrupt_id=continuation.continuation_id,
        status=status,
        payload=payload,
        message=pause.message,
        reason=pause.reason,
        tool_call_id=pause.tool_call_id,
        metadata=agent_metadata if isinstance(agent_metadata, dict) else {},
        resolved_by=continuation.resolved_by if isinstance(continuation.resolved_by, str) else None,
    )
