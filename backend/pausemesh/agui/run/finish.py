"""The finish of a run: save the transcript (and the agent's title) and, if the agent paused,
issue the cohort.

Every pause is checked before any continuation exists (all of the cohort or none), and the
cohort is durable in the thread record before the client hears of it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import msgspec

from pausemesh.agui.agent import PauseRequest
from pausemesh.agui.events import MessagesSnapshotEvent, RunFinishedEvent, StateSnapshotEvent
from pausemesh.agui.receipts import issue_interrupts, issued_cohort
from pausemesh.agui.run.snapshots import wire_messages
from pausemesh.agui.run_error import AguiRunError
from pausemesh.agui.transcript import Transcript
from pausemesh.core.approvers import check_approvers
from pausemesh.core.errors import PauseMeshError, VersionConflictError
from pausemesh.core.model import Continuation
from pausemesh.core.pause import parse_pause_payload, pause_payload
from pausemesh.core.threads import IssuedCohort

if TYPE_CHECKING:
    from pausemesh.agui.run.leased import LeasedRun

__all__ = ("finish",)


async def finish(
    run: LeasedRun,
    transcript: Transcript,
    pauses: list[PauseRequest],
    closing: IssuedCohort | None,
) -> bytes:
    """The run's last frames: ``RUN_FINISHED``, or the snapshots and the interrupting one."""
    closed = closing if closing is not None else run.record.closed_receipt
    if closed is not None and closed.lapsed:
        # This run acknowledged the lapsed cohort: from now on a replay is answered as one.
        closed = msgspec.structs.replace(closed, lapsed=False)
    now = run.parts.clock.now()
    if not pauses:
        await _save_end(run, transcript, None, closed, now)
        return await run.lease.emit(
            [RunFinishedEvent(thread_id=run.thread_id, run_id=run.run_id)], last=True
        )
    continuations = await _create(run, pauses, now)
    try:
        finished, receipt = issue_interrupts(
            continuations, thread_id=run.thread_id, run_id=run.run_id, schemas=run.parts.schemas
        )
    except PauseMeshError as error:
        raise AguiRunError.from_error(error) from None
    # The cohort is durable before the client hears of it.
    await _save_end(run, transcript, issued_cohort(finished, receipt), closed, now)
    return await run.lease.emit(
        [
            MessagesSnapshotEvent(messages=await wire_messages(transcript.messages)),
            StateSnapshotEvent(snapshot=transcript.state),
            finished,
        ],
        last=True,
    )


async def _save_end(
    run: LeasedRun,
    transcript: Transcript,
    open_cohort: IssuedCohort | None,
    closed_cohort: IssuedCohort | None,
    now: datetime,
) -> None:
    """Save the run's transcript with the cohorts it ends with (open: a pending one)."""
    record = msgspec.structs.replace(
        run.record,
        messages=transcript.messages,
        state=transcript.state,
        open_receipt=open_cohort,
        closed_receipt=closed_cohort,
    )
    run.lease.check()
    try:
        run.record = await run.parts.threads.save(record, now=now, agent_title=run.agent_title)
    except VersionConflictError:
        raise AguiRunError("THREAD_CONFLICT", "The thread changed during the run") from None


def _deadline(run: LeasedRun, pause: PauseRequest, now: datetime) -> datetime | None:
    """The pause's deadline (None: the default TTL), within ``PAUSEMESH_MAX_PAUSE_TTL_SECONDS``.

    One past the cap is refused, not shortened: the agent told its person a deadline the
    server would not keep (``INVALID_EXPIRY``, the run ends with ``AGENT_PROTOCOL_ERROR``).
    """
    expires_at = pause.expires_at
    if expires_at is None and pause.expires_in is not None:
        try:
            expires_at = now + timedelta(seconds=pause.expires_in)
        except (OverflowError, ValueError):  # e.g. 1e300 or NaN seconds
            msg = "expires_in must be a number of seconds within PAUSEMESH_MAX_PAUSE_TTL_SECONDS"
            raise ValueError(msg) from None
    if expires_at is None:
        return None
    return run.parts.service.check_expiry(expires_at, now)


async def _create(run: LeasedRun, pauses: list[PauseRequest], now: datetime) -> list[Continuation]:
    # Every pause is checked before any continuation exists: all of the cohort or none.
    payloads: list[dict[str, Any]] = []
    deadlines: list[datetime | None] = []
    for pause in pauses:
        payload = pause_payload(
            pause.message,
            response_schema=pause.response_schema,
            tool_call_id=pause.tool_call_id,
            reason=pause.reason,
        )
        try:
            deadlines.append(_deadline(run, pause, now))
            parse_pause_payload(payload)
            check_approvers(pause.approvers)
            if pause.response_schema is not None:
                run.parts.schemas.check_schema(pause.response_schema)
        except (ValueError, TypeError) as error:
            message = error.message if isinstance(error, PauseMeshError) else str(error)
            raise AguiRunError("AGENT_PROTOCOL_ERROR", f"invalid pause: {message}") from None
        payloads.append(payload)
    created: list[Continuation] = []
    for pause, payload, expires_at in zip(pauses, payloads, deadlines, strict=True):
        try:
            result = await run.parts.service.create(
                payload=payload,
                correlation_id=run.thread_id,
                expires_at=expires_at,
                metadata={} if pause.metadata is None else {"agent": pause.metadata},
                owner=run.principal,
                keyed=True,
                approvers=pause.approvers,
                owner_roles=run.roles,
                allow_requester=pause.allow_requester,
            )
        except PauseMeshError as error:
            raise AguiRunError("AGENT_PROTOCOL_ERROR", error.message) from None
        created.append(result.continuation)
    return created
