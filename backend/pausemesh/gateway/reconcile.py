"""An operation's terms, and the answer for one that already has a record (nothing is sent)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from pausemesh.core.errors import OperationConflictError
from pausemesh.core.operations import OperationRecord, decide, new_attempt
from pausemesh.gateway.config import Job
from pausemesh.gateway.inspect import operation_state, upstream_result
from pausemesh.gateway.lock import PinnedJob
from pausemesh.gateway.results import (
    DENIED,
    OPERATION_CONFLICT,
    OUTCOME_UNKNOWN,
    RECONCILIATION_ONLY,
    outcome,
)

__all__ = ("recorded_answer", "wanted_attempt")

_TERMS_VERSION: Final = "pausemesh-gateway-job/1"


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
