"""An operation's terms, and the answer for one that already has a record (nothing is sent).

An attempt without a reply is ``OUTCOME_UNKNOWN`` unless another gateway process may still
record its reply: it was dispatched by *another* worker whose epoch is still the one it
dispatched with, less than the job's timeout plus ``LATE_REPLY_GRACE`` ago. That call is
``BUSY`` (ask again). The dispatching process never records a reply after that deadline, so
once any process has answered ``OUTCOME_UNKNOWN`` it stays so. A process restarted under the
same worker name treats its name's unfinished attempts as its predecessor's: unknown.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Final

from pausemesh.core.errors import OperationConflictError
from pausemesh.core.fencing import FencedOperations
from pausemesh.core.operations import OperationRecord, decide, new_attempt
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
    "answer_recorded",
    "recorded_answer",
    "reply_deadline",
    "wanted_attempt",
)

_TERMS_VERSION: Final = "pausemesh-gateway-job/1"

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


def reply_deadline(job: Job, record: OperationRecord) -> datetime:
    """After this, the dispatching process no longer records the reply (outcome unknown)."""
    return record.attempted_at + timedelta(seconds=job.timeout_seconds) + LATE_REPLY_GRACE


async def _in_flight_elsewhere(  # noqa: PLR0917 - the record and who is asking, when
    fencing: FencedOperations,
    domain: str,
    worker: str,
    job: Job,
    record: OperationRecord,
    now: datetime,
) -> bool:
    if record.completed or now >= reply_deadline(job, record):
        return False
    dispatch = await fencing.dispatch_of(record.operation_id)
    if dispatch is None or dispatch.worker == worker:
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
) -> dict[str, Any]:
    """``recorded_answer``, except ``BUSY`` while another worker may still record a reply."""
    answer = recorded_answer(job, record, wanted)
    if answer["status"] == OUTCOME_UNKNOWN and await _in_flight_elsewhere(
        fencing, domain, worker, job, record, now
    ):
        return outcome(
            BUSY,
            job.name,
            operation_id=record.operation_id,
            message="Another gateway process is dispatching this operation; ask again.",
        )
    return answer
