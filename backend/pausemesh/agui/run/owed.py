"""Decisions from elsewhere continue the thread: the run the server owes a thread.

When the last open interrupt of a thread's cohort is decided out of band (``POST
/v1/continuations/{id}/resume`` with a token, or an approver in ``/v1/approvals``), nobody in
the conversation will send the AG-UI resume that would run the agent. The decision itself
records that a run is owed (``ContinuationResumed.continues_thread``, indexed by the event
store in the same write: ``EventStore.owed_runs``), and ``continue_thread`` makes that run:

- as the thread's owner (its principal, and the roles it had when it asked, kept with the
  questions), like a run of theirs: it takes the thread's lease, so it never runs
  beside another run, and a process that dies holding it frees it within the lease TTL;
- with the stored decisions (``LeasedRun`` sees a cohort decided elsewhere), streaming into
  the thread log: ``RUN_STARTED``, CUSTOM ``pausemesh.decided_elsewhere``, the agent's events,
  ``RUN_FINISHED``. Live tails see it as it happens, a reload shows it;
- exactly once per cohort: the run's final save closes the cohort with a compare-and-swap, so
  a second attempt (another replica, the sweeper after a crash, the owner's own late resume)
  finds nothing open and runs nothing. A crash in the middle runs the agent again with the
  same decisions; its side effects go through the operation ledger (one per business key).

``settle_owed`` then clears the owed marks; until then every replica's sweeper retries them.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from enum import Enum

from pausemesh.agui.input import RunAgentInput
from pausemesh.agui.run.host import RunHost
from pausemesh.agui.run.resume_phase import decided_elsewhere
from pausemesh.core.errors import (
    ContinuationNotFoundError,
    PauseMeshError,
    ThreadBusyError,
    ThreadNotFoundError,
)
from pausemesh.core.service import ContinuationService
from pausemesh.core.threads import ThreadRecord

__all__ = ("Owed", "continue_owed_runs", "continue_thread")

_log = logging.getLogger("pausemesh.agui")
_BATCH = 100


class Owed(Enum):
    """What ``continue_thread`` found."""

    DONE = "done"  # it ran the agent, or nothing is owed any more: settle
    WAITING = "waiting"  # another interrupt of the cohort is still open: its decision owes
    BUSY = "busy"  # another run holds the thread: try again later


async def _decided(service: ContinuationService, record: ThreadRecord) -> bool | None:
    """Whether the record's open cohort is decided elsewhere (None: no open cohort)."""
    cohort = record.open_receipt
    if cohort is None:
        return None
    continuations = []
    for continuation_id in cohort.interrupt_ids:
        try:
            continuations.append(await service.get(continuation_id, principal=record.owner))
        except ContinuationNotFoundError:
            return None
    return decided_elsewhere(continuations)


async def _look(host: RunHost, thread_id: str) -> Owed | None:
    """``None`` when the thread is owed a run now; otherwise why not."""
    # Its cohort is all it looks at: no message read.
    record = await host.threads.get(thread_id, tail=0)
    decided = None if record is None else await _decided(host.service, record)
    if decided is None:
        return Owed.DONE
    return None if decided else Owed.WAITING


async def continue_thread(host: RunHost, thread_id: str) -> Owed:
    """Run the agent on ``thread_id`` with its cohort's out-of-band decisions, if owed."""
    found = await _look(host, thread_id)
    if found is not None:
        return found
    run_id = f"pausemesh-continue-{uuid.uuid4().hex}"
    lease_id = host.leases.new_lease_id()
    now = host.clock.now()
    try:
        record = await host.leases.acquire(thread_id, lease_id=lease_id, run_id=run_id, now=now)
    except ThreadBusyError:
        return Owed.BUSY
    except ThreadNotFoundError:
        return Owed.DONE
    released = False
    try:
        # Under the lease: another run may have continued it between our look and the lease.
        if await _decided(host.service, record):
            released = await _run(host, record, run_id, lease_id)
        return Owed.DONE
    finally:
        if not released:
            await host.leases.release(thread_id, lease_id)
        host.queued.kick(thread_id)  # inputs that waited for it (double texting)


async def _roles(host: RunHost, record: ThreadRecord) -> frozenset[str]:
    """The owner's roles as stored with the cohort's questions when it asked them."""
    if record.open_receipt is None or not record.open_receipt.interrupt_ids:
        return frozenset()
    created = await host.service.created_event(
        record.open_receipt.interrupt_ids[0], principal=record.owner
    )
    return frozenset(created.owner_roles)


async def _run(host: RunHost, record: ThreadRecord, run_id: str, lease_id: str) -> bool:
    """The owed run itself, as the thread's owner, into the thread log; whether its last
    write gave the lease back (``RunLease.released``)."""
    thread_id = record.thread_id
    run_input = RunAgentInput(thread_id=thread_id, run_id=run_id, messages=[], state=record.state)
    run = host.lease_run(
        record, run_input, record.owner, lease_id, roles=await _roles(host, record)
    )
    async with contextlib.aclosing(run.frames()) as frames:
        async for _ in frames:
            pass  # every frame is in the thread log already; tails read it from there
    if run.record.open_receipt == record.open_receipt:
        # The run failed (its RUN_ERROR is in the log): the cohort stays open, and the
        # owner's next resume of it runs the agent again with the same stored decisions.
        _log.warning("the run continuing thread %s failed", thread_id)
    else:
        _log.info("continued thread %s with decisions made elsewhere", thread_id)
    return run.lease.released


async def continue_owed_runs(host: RunHost) -> int:
    """One sweep: continue every thread owed a run; settle what is done. How many threads
    were settled as done (run now, or found continued already)."""
    owed = await host.service.store.owed_runs(limit=_BATCH)
    by_thread: dict[str, list[str]] = {}
    for continuation_id, thread_id in owed:
        by_thread.setdefault(thread_id, []).append(continuation_id)
    done = 0
    for thread_id, continuation_ids in by_thread.items():
        try:
            outcome = await continue_thread(host, thread_id)
        except PauseMeshError as error:
            _log.warning("could not continue thread %s: %s", thread_id, error.code)
            continue
        if outcome is not Owed.BUSY:
            await host.service.store.settle_owed(continuation_ids)
            done += outcome is Owed.DONE
    return done
