"""Expiry that shows: a thread whose open questions have all lapsed closes its cohort itself.

When every interrupt of a thread's open cohort is settled without an answer (expired, or
cancelled elsewhere), nobody can continue it any more, so the thread should stop offering it.
``close_lapsed`` takes the thread's lease like a run and appends a short run to the log:

    RUN_STARTED → CUSTOM ``pausemesh.interrupts_expired`` {interruptIds, statuses} → RUN_FINISHED

A success ``RUN_FINISHED`` is what makes an unmodified ``@ag-ui/client`` drop its
``pendingInterrupts`` (it keeps only the interrupts of the latest ``RUN_FINISHED``), and live
tails receive the three events like any run's. The record then holds the cohort as *closed*:
``/agui/connect`` and ``GET /agui/threads/{id}`` show nothing pending, a later resume that
cancels those interrupts is answered from the record, and one that tries to resolve them is
refused with ``PAUSEMESH_AGUI_RESUME_EXPIRED``, as before.

The expiry sweeper calls ``close_lapsed_cohorts`` every interval (``ThreadStore.lapsed_cohorts``
lists the candidates from an index); the thread reads call ``close_lapsed`` too, so a read never
shows a question whose deadline has passed even between sweeps.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime
from typing import Final

import msgspec

from pausemesh.agui.events import (
    PROTOCOL_VERSION,
    CustomEvent,
    Event,
    RunFinishedEvent,
    RunStartedEvent,
    encode_event,
)
from pausemesh.core.errors import (
    ContinuationNotFoundError,
    PauseMeshError,
    ThreadBusyError,
    ThreadNotFoundError,
    VersionConflictError,
)
from pausemesh.core.leases import LeaseKeeper
from pausemesh.core.ports import Clock
from pausemesh.core.service import ContinuationService
from pausemesh.core.threads import IssuedCohort, ThreadRecord, cohort_deadline

__all__ = (
    "EXPIRED_EVENT",
    "EXPIRY_RUN_PREFIX",
    "close_lapsed",
    "close_lapsed_cohorts",
    "closing_lapsed",
    "has_lapsed",
)

_log = logging.getLogger("pausemesh.agui")

EXPIRED_EVENT: Final = "pausemesh.interrupts_expired"
# The run id of a close (the browser demo reads it too: such a run is not the agent typing).
EXPIRY_RUN_PREFIX: Final = "pausemesh-expiry-"
_LAPSED: Final = frozenset({"expired", "cancelled"})
_BATCH: Final = 100


async def _lapsed_statuses(
    service: ContinuationService, record: ThreadRecord, cohort: IssuedCohort
) -> dict[str, str] | None:
    """Each open interrupt's status (reading it materializes a passed deadline), or None when
    one of them can still be answered."""
    statuses: dict[str, str] = {}
    for continuation_id in cohort.interrupt_ids:
        try:
            state = await service.get(continuation_id, principal=record.owner)
        except ContinuationNotFoundError:
            return None
        if state.status not in _LAPSED:
            return None
        statuses[continuation_id] = state.status
    return statuses


async def close_lapsed(
    leases: LeaseKeeper,
    service: ContinuationService,
    thread_id: str,
    *,
    clock: Clock | None = None,
) -> bool:
    """Close ``thread_id``'s open cohort if every question of it has lapsed; True if closed.

    A thread with a run in progress is left alone (that run's resume deals with the cohort).
    The close holds the thread's lease like a run: an instance lease of ``leases``' holder,
    renewed by that keeper while held (so a sweep whose process died frees the thread within
    the short TTL, or at once when that replica restarts). Lost meanwhile, the close writes
    nothing more (``LEASE_LOST``).
    """
    threads = leases.threads
    clock = clock or service.clock
    record = await threads.get(thread_id, tail=0, state=False)
    if record is None or record.open_receipt is None:
        return False
    now = clock.now()
    cohort = record.open_receipt
    statuses = await _lapsed_statuses(service, record, cohort)
    if statuses is None:
        return False
    lease_id = leases.new_lease_id()
    run_id = f"{EXPIRY_RUN_PREFIX}{uuid.uuid4().hex}"
    try:
        record = await leases.acquire(thread_id, lease_id=lease_id, run_id=run_id, now=now)
    except (ThreadBusyError, ThreadNotFoundError):
        return False
    try:
        if record.open_receipt is None or record.open_receipt.receipt != cohort.receipt:
            return False  # closed or replaced while we looked
        ids = list(cohort.interrupt_ids)
        events: list[Event] = [
            RunStartedEvent(thread_id=thread_id, run_id=run_id, protocol_version=PROTOCOL_VERSION),
            CustomEvent(name=EXPIRED_EVENT, value={"interruptIds": ids, "statuses": statuses}),
            RunFinishedEvent(thread_id=thread_id, run_id=run_id),
        ]
        # The log first: a crash before the save leaves the cohort open, and the next sweep
        # closes it again (the log may then say it twice; it never misses saying it).
        await threads.append_events(
            thread_id,
            lease_id=lease_id,
            run_id=run_id,
            events=[encode_event(e).decode() for e in events],
        )
        try:
            await threads.save(
                msgspec.structs.replace(
                    record,
                    open_receipt=None,
                    closed_receipt=msgspec.structs.replace(cohort, lapsed=True),
                ),
                now=clock.now(),
            )
        except VersionConflictError:
            return False
        _log.info("closed lapsed interrupts %s on thread %s", ids, thread_id)
        return True
    finally:
        await leases.release(thread_id, lease_id)


def closing_lapsed(record: ThreadRecord | None) -> bool:
    """Whether a close of lapsed questions holds the record's lease right now (a few writes)."""
    return (
        record is not None
        and record.lease is not None
        and record.lease.run_id.startswith(EXPIRY_RUN_PREFIX)
    )


def has_lapsed(record: ThreadRecord, now: datetime) -> bool:
    """Whether every deadline of the record's open cohort has passed (no service call)."""
    deadline = cohort_deadline(record.open_receipt)
    return deadline is not None and deadline <= now


async def close_lapsed_cohorts(
    leases: LeaseKeeper, service: ContinuationService, *, now: datetime | None = None
) -> int:
    """One sweep: close every thread cohort whose deadlines have all passed; how many closed.
    Each close holds an instance lease of ``leases`` (see ``close_lapsed``)."""
    closed = 0
    due = await leases.threads.lapsed_cohorts(now=now or service.clock.now(), limit=_BATCH)
    for thread_id in due:
        try:
            closed += await close_lapsed(leases, service, thread_id)
        except PauseMeshError as error:
            _log.warning("could not close lapsed interrupts on thread %s: %s", thread_id, error)
    return closed
