"""The resume phase of a run: the open cohort's batch validated once, executed exactly once.

Each continuation of the cohort is loaded once per run; validation, the expired-cohort rule
and the agent's decisions all read those same objects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import UNSET

from pausemesh.agui.agent import Decision
from pausemesh.agui.events import ToolMessage
from pausemesh.agui.resume import CancelCommand, ResumePlan, validate_resume
from pausemesh.agui.run.snapshots import cohort_interrupts
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
from pausemesh.core.resume import Resume, TrustedHost
from pausemesh.core.threads import CohortReceipt, IssuedCohort
from pausemesh.observability.telemetry import span

if TYPE_CHECKING:
    from pausemesh.agui.run.leased import LeasedRun

__all__ = (
    "added_messages",
    "decided_elsewhere",
    "decisions",
    "execute",
    "interrupted_tool_calls",
    "load_cohort",
    "merged_messages",
    "stored_decisions",
    "validated",
)

NOT_AN_APPROVER = "NOT_AN_APPROVER"
# The idempotency keys AG-UI derives for its own resumes (``agui/resume.py``); any other key
# means the decision came from elsewhere.
AGUI_KEY_PREFIX = "agui:"

_CONFLICTS = (
    TokenAlreadyUsedError,
    IdempotencyConflictError,
    InvalidTransitionError,
    ContinuationCancelledError,
    VersionConflictError,
)


def _service_error(error: PauseMeshError) -> AguiRunError:
    if isinstance(error, _CONFLICTS):
        return AguiRunError(
            REPLAY_CONFLICT, "AG-UI resume conflicts with the completed interrupt outcome"
        )
    if isinstance(error, ContinuationExpiredError):
        return AguiRunError(RESUME_EXPIRED, "AG-UI resume references an expired interrupt")
    return AguiRunError.from_error(error)


async def load_cohort(run: LeasedRun, cohort: IssuedCohort) -> list[Continuation]:
    """Each continuation of ``cohort``, loaded once for the run (expiry materialized)."""
    return [
        await run.parts.service.get(i.continuation_id, principal=run.principal)
        for i in cohort.receipt.interrupts
    ]


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


def stored_decisions(continuations: list[Continuation]) -> dict[str, Decision]:
    """The agent's view of a cohort decided elsewhere: each stored outcome (a resume is
    ``resolved`` with its payload; a cancelled or expired one is ``cancelled``)."""
    out: dict[str, Decision] = {}
    for continuation in continuations:
        pause = parse_pause_payload(continuation.payload)
        agent_metadata = continuation.metadata.get("agent")
        resumed = continuation.status == "resumed"
        out[continuation.continuation_id] = Decision(
            interrupt_id=continuation.continuation_id,
            status="resolved" if resumed else "cancelled",
            payload=continuation.resume_payload if resumed else UNSET,
            message=pause.message,
            reason=pause.reason,
            tool_call_id=pause.tool_call_id,
            metadata=agent_metadata if isinstance(agent_metadata, dict) else {},
            resolved_by=continuation.resolved_by
            if isinstance(continuation.resolved_by, str)
            else None,
        )
    return out


async def validated(
    run: LeasedRun, cohort: IssuedCohort, continuations: list[Continuation] | None = None
) -> tuple[ResumePlan, list[Continuation]]:
    """The run's batch checked against ``cohort``; raises ``AguiRunError`` when refused."""
    with span(
        "agui.resume.validate",
        thread_id=run.thread_id,
        run_id=run.run_id,
        cohort_size=len(cohort.receipt.interrupts),
    ):
        return await _validated(run, cohort, continuations)


async def _validated(
    run: LeasedRun, cohort: IssuedCohort, continuations: list[Continuation] | None
) -> tuple[ResumePlan, list[Continuation]]:
    receipt = cohort.receipt
    if continuations is None:
        continuations = await load_cohort(run, cohort)
    result = validate_resume(
        run.input, receipt, continuations, now=run.parts.clock.now(), schemas=run.parts.schemas
    )
    if isinstance(result, AguiRunError):
        abandoned = _abandoned_expired(run, receipt, continuations)
        if result.code != RESUME_EXPIRED or abandoned is None:
            raise result
        return abandoned, continuations
    _check_approvers(run, result, continuations)
    return result, continuations


def _check_approvers(run: LeasedRun, plan: ResumePlan, continuations: list[Continuation]) -> None:
    """A pause that names approvers is decided by them (the approvals inbox), not by this run's
    caller, its owner, unless it allows the requester and names them; withdrawing it (a
    cancel) stays the owner's right."""
    by_id = {c.continuation_id: c for c in continuations}
    for command in plan.commands:
        if isinstance(command, CancelCommand) or command.settled:
            continue
        continuation = by_id[command.continuation_id]
        if continuation.approvers and not may_decide(
            [parse_approver(text) for text in continuation.approvers],
            owner=continuation.owner if isinstance(continuation.owner, str) else None,
            principal=run.principal,
            roles=run.roles,
            allow_requester=continuation.allow_requester,
        ):
            raise AguiRunError(NOT_AN_APPROVER, "Only the pause's approvers may decide it")


def _abandoned_expired(
    run: LeasedRun, receipt: CohortReceipt, continuations: list[Continuation]
) -> ResumePlan | None:
    """A batch that cancels a cohort whose every question has expired closes it.

    AG-UI: an expired interrupt can no longer be resolved, but it can and must be cancelled to
    continue the thread. Nothing is left to execute: expiry settled them.
    """
    resume = run.input.resume
    if resume is UNSET or len(resume) != len(receipt.interrupts):
        return None
    by_id = {e.interrupt_id: e for e in resume}
    if set(by_id) != set(receipt.interrupt_ids):
        return None
    if any(e.status != "cancelled" or e.payload is not UNSET for e in resume):
        return None
    now = run.parts.clock.now()
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


async def execute(run: LeasedRun, plan: ResumePlan) -> None:
    """Each command once, through the service (keyed token re-derived there).

    A settled command (an exact replay, seen in the continuation loaded for validation) is
    already done: the service would only hand back the stored outcome, so it is not asked.
    """
    service = run.parts.service
    for command in plan.commands:
        if command.settled:
            continue
        try:
            if isinstance(command, CancelCommand):
                await service.cancel(
                    continuation_id=command.continuation_id,
                    reason=command.reason,
                    expected_version=command.expected_version,
                    principal=run.principal,
                )
            else:
                await service.resume(
                    Resume(
                        continuation_id=command.continuation_id,
                        idempotency_key=command.idempotency_key,
                        payload=command.payload,
                        by=TrustedHost(run.principal, roles=run.roles),
                    )
                )
        except PauseMeshError as error:
            raise _service_error(error) from None


def decisions(plan: ResumePlan, continuations: list[Continuation]) -> dict[str, Decision]:
    """The agent's view of the batch, keyed by interrupt id."""
    by_id = {c.continuation_id: c for c in continuations}
    out: dict[str, Decision] = {}
    for entry in plan.entries:
        continuation = by_id[entry.interrupt_id]
        pause = parse_pause_payload(continuation.payload)
        agent_metadata = continuation.metadata.get("agent")
        out[entry.interrupt_id] = Decision(
            interrupt_id=entry.interrupt_id,
            status=entry.status,
            payload=entry.payload if entry.status == "resolved" else UNSET,
            message=pause.message,
            reason=pause.reason,
            tool_call_id=pause.tool_call_id,
            metadata=agent_metadata if isinstance(agent_metadata, dict) else {},
            resolved_by=continuation.resolved_by
            if isinstance(continuation.resolved_by, str)
            else None,
        )
    return out


def interrupted_tool_calls(cohort: IssuedCohort) -> set[str]:
    """The tool calls the cohort's interrupts answer (a client's own ``tool`` message for one
    of them is dropped: the resume entry is the answer)."""
    return {i.tool_call_id for i in cohort_interrupts(cohort) if i.tool_call_id is not UNSET}


def added_messages(run: LeasedRun, dropped_tool_calls: set[str]) -> list[dict[str, Any]]:
    """What the client added to the server's history (the server's copy of a known id wins).

    A ``tool`` message the client made up for an interrupted tool call (CopilotKit does) is
    dropped: the resume entry is the answer.
    """
    known = {m.get("id") for m in run.record.messages}
    return [
        msgspec.to_builtins(m)
        for m in run.input.messages
        if m.id not in known
        and not (isinstance(m, ToolMessage) and m.tool_call_id in dropped_tool_calls)
    ]


def merged_messages(run: LeasedRun, dropped_tool_calls: set[str]) -> list[dict[str, Any]]:
    """The server's history plus what the client added (``added_messages``)."""
    return [*run.record.messages, *added_messages(run, dropped_tool_calls)]
