"""An operation's terms, and the answer for one that already has a record (nothing is sent).

An attempt without a reply is ``OUTCOME_UNKNOWN`` unless another gateway process may still
record its reply: it was dispatched by *another* worker whose epoch is still the one it
dispatched with, less than the job's timeout plus ``LATE_REPLY_GRACE`` ago. That call is
``BUSY`` (ask again). Before any process answers ``OUTCOME_UNKNOWN`` for an attempt without a
reply it declares the outcome unknown in the store, and the store refuses the dispatching
process's reply after that (and after the deadline), so once any client was told
``OUTCOME_UNKNOWN`` it stays so — whatever the processes' clocks say. A process restarted
under the same worker name holds a newer epoch (its predecessor is fenced) and treats its
name's unfinished attempts as its predecessor's: unknown.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Final

from pausemesh.core.errors import OperationConflictError
from pausemesh.core.fencing import FencedOperations
from pausemesh.core.operations import OperationRecord, decide, new_attempt
from pausemesh.core.webhooks import WebhookRoutes
from pausemesh.gateway.config import Job
from pausemesh.gateway.inspect import operation_state, upstream_result
from pausemesh.gateway.lock import PinnedJob
from pausemesh.gateway.results import (
    BUSY,
    DENIED,
    OPERATION_CONFLICT,
    OUTCOME_UNKNOWN,
    RECONCILIATION_ONLY,
    outcome,
)

__all__ = (
    "LATE_REPLY_GRACE",
    "NO_REPLY_RECORDED",
    "answer_recorded",
    "in_flight",
    "recorded_answer",
    "reply_deadline",
    "wanted_attempt",
)

_TERMS_VERSION: Final = "pausemesh-gateway-job/1"

# Why a process that did not dispatch an attempt declares it unknown.
NO_REPLY_RECORDED: Final = "NO_REPLY_RECORDED"

# Beyond the job's timeout: time for the dispatching process to record a reply it received.
LATE_REPLY_GRACE: Final = timedelta(seconds=5)


def _terms(job: Job, pinned: PinnedJob, arguments: dict[str, Any]) -> dict[str, Any]:
    # Upstream, tool, the pinned definition and the arguments: the alias (job name) is not
    # part of it, so renaming a job does not make new work.
    return {
        "v": _TERMS_VERSION,
        "upstream": job.upstream,
        "definitionDigest": pinned.digest,
        "arguments": arguments,
    }


def wanted_attempt(  # noqa: PLR0917 - the terms of one operation
    domain: str,
    job: Job,
    pinned: PinnedJob,
    key: str,
    arguments: dict[str, Any],
    now: datetime,
) -> OperationRecord:
    """The attempt this call would record for ``(domain, key)``."""
    return new_attempt(domain, key, job.tool, _terms(job, pinned, arguments), now=now)


def recorded_answer(job: Job, record: OperationRecord, wanted: OperationRecord) -> dict[str, Any]:
    """The answer for an operation that already has a record (nothing is sent)."""
    op = record.operation_id
    try:
        decide(record, wanted)
    except OperationConflictError:
        return outcome(
            OPERATION_CONFLICT,
            job.name,
            operation_id=op,
            message="This business key was already used with other arguments.",
        )
    state = operation_state(record)
    if state == DENIED:
        return outcome(DENIED, job.name, operation_id=op, reason="APPROVAL_DECLINED")
    if state == OUTCOME_UNKNOWN:
        return outcome(
            OUTCOME_UNKNOWN,
            job.name,
            operation_id=op,
            message="An attempt was recorded without a reply; it is never sent again.",
        )
    assert isinstance(record.result, dict)  # noqa: S101 - state RESPONSE_RETAINED
    return outcome(
        RECONCILIATION_ONLY,
        job.name,
        operation_id=op,
        resolvedByOperator="resolvedResult" in record.result,
        upstreamResult=upstream_result(record),
        contentTrust="UNTRUSTED_DATA",
    )


def reply_deadline(job: Job | float, record: OperationRecord) -> datetime:
    """After this, the store refuses the dispatching process's reply (outcome unknown).
    ``job`` is the job or its ``timeout_seconds``."""
    timeout = job if isinstance(job, int | float) else job.timeout_seconds
    return record.attempted_at + timedelta(seconds=timeout) + LATE_REPLY_GRACE


async def in_flight(
    fencing: FencedOperations,
    domain: str,
    job: Job | float,
    record: OperationRecord,
    now: datetime,
    *,
    asking_worker: str | None = None,
) -> bool:
    """True while the attempt's dispatching worker may still record its reply: no outcome, no
    declaration, before the reply deadline, and the worker still at the epoch it dispatched
    with (and not ``asking_worker``: a process never waits for its own name's attempts)."""
    if record.completed or now >= reply_deadline(job, record):
        return False
    dispatch = await fencing.dispatch_of(record.operation_id)
    if dispatch is None or dispatch.worker == asking_worker:
        return False
    if await fencing.unknown_of(record.operation_id) is not None:
        return False
    return await fencing.worker_epoch(domain, dispatch.worker) == dispatch.epoch


async def answer_recorded(  # noqa: PLR0917 - the record and who is asking, when
    fencing: FencedOperations,
    domain: str,
    worker: str,
    job: Job,
    record: OperationRecord,
    wanted: OperationRecord,
    *,
    now: datetime,
    webhooks: WebhookRoutes | None = None,
) -> dict[str, Any]:
    """``recorded_answer``, except ``BUSY`` while another worker may still record a reply.

    An ``OUTCOME_UNKNOWN`` answer for an attempt without a reply is declared in the store first,
    so the dispatching process can no longer record a reply; if the reply was recorded just
    before the declaration, the answer is that reply.
    """
    answer = recorded_answer(job, record, wanted)
    if answer["status"] != OUTCOME_UNKNOWN or record.completed:
        return answer
    if await in_flight(fencing, domain, job, record, now, asking_worker=worker):
        return outcome(
            BUSY,
            job.name,
            operation_id=record.operation_id,
            message="Another gateway process is dispatching this operation; ask again.",
        )
    latest = await fencing.declare_unknown(
        record.operation_id,
        declared_by=worker,
        reason=NO_REPLY_RECORDED,
        now=now,
        webhooks=webhooks,
    )
    return recorded_answer(job, latest, wanted) if latest.completed else answer
