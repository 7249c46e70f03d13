"""What ``continuity_status`` / ``continuity_why`` and ``pausemesh ops`` say about one operation.

Digests, flags, timestamps and who acted — never the response body. Shared by the MCP tools
(which find the operation from a job and its key arguments) and the operator CLI (which
names it by id), so both describe an operation the same way.
"""

from __future__ import annotations

from typing import Any

from pausemesh.core.clock import iso_millis
from pausemesh.core.fencing import Dispatch, FencedOperations, Resolution, UnknownDeclaration
from pausemesh.core.operations import OperationLedger, OperationRecord, result_hash, terms_hash
from pausemesh.gateway.results import (
    DENIED,
    NOT_STARTED,
    OUTCOME_UNKNOWN,
    RESPONSE_RETAINED,
)

__all__ = (
    "DECLINED_RESULT",
    "describe",
    "explain",
    "inspect_operation",
    "operation_state",
    "upstream_result",
)

# What the ledger records for a job whose approval was declined: nothing was sent, and a
# repeat of the call finds this and stays declined.
DECLINED_RESULT: dict[str, Any] = {"declined": True}


def upstream_result(record: OperationRecord) -> Any:
    result = record.result
    if isinstance(result, dict):
        if "upstreamResult" in result:
            return result["upstreamResult"]
        if "resolvedResult" in result:
            return result["resolvedResult"]
    return None


def _intact(record: OperationRecord) -> bool:
    return record.terms_hash == terms_hash(record.tool, record.arguments) and (
        record.result_hash is None or record.result_hash == result_hash(record.result)
    )


def operation_state(record: OperationRecord | None) -> str:
    if record is None:
        return NOT_STARTED
    if not record.completed or not _intact(record):
        return OUTCOME_UNKNOWN
    if record.result == DECLINED_RESULT:
        return DENIED
    return RESPONSE_RETAINED


def _dispatch(dispatch: Dispatch | None, current_epoch: int | None) -> dict[str, Any] | None:
    if dispatch is None:
        return None
    return {
        "worker": dispatch.worker,
        "epoch": dispatch.epoch,
        "job": dispatch.job,
        "at": iso_millis(dispatch.dispatched_at),
        "workerCurrent": current_epoch == dispatch.epoch,
    }


def describe(
    operation_id: str,
    record: OperationRecord | None,
    *,
    dispatch: Dispatch | None = None,
    resolution: Resolution | None = None,
    dispatcher_epoch: int | None = None,
    unknown: UnknownDeclaration | None = None,
) -> dict[str, Any]:
    """The status body: no response content, no arguments."""
    state = operation_state(record)
    body: dict[str, Any] = {
        "status": state,
        "operationId": operation_id,
        "dispatchPerformed": False,
        "externalOutcome": "NOT_PROVEN",
    }
    if record is None:
        return body
    body["businessKey"] = record.business_key
    body["termsHash"] = record.terms_hash
    body["attemptedAt"] = iso_millis(record.attempted_at)
    if record.completed_at is not None:
        body["completedAt"] = iso_millis(record.completed_at)
    if record.result_hash is not None:
        body["responseDigest"] = record.result_hash
    reply = upstream_result(record)
    if isinstance(reply, dict) and resolution is None:
        body["reportedError"] = bool(reply.get("isError", False))
    body["resolvedByOperator"] = resolution is not None
    if resolution is not None:
        body["resolution"] = {
            "resolvedBy": resolution.resolved_by,
            "resolvedAt": iso_millis(resolution.resolved_at),
            "reason": resolution.reason,
        }
    if unknown is not None:
        # A caller was told OUTCOME_UNKNOWN: for a gateway's operation no late reply can be
        # recorded any more; an agent's (the ledger's run_once) may still be recovered.
        body["declaredUnknown"] = {
            "declaredBy": unknown.declared_by,
            "reason": unknown.reason,
            "at": iso_millis(unknown.declared_at),
        }
    dispatched = _dispatch(dispatch, dispatcher_epoch)
    if dispatched is not None:
        body["dispatchedBy"] = dispatched
    return body


async def inspect_operation(
    ledger: OperationLedger, fencing: FencedOperations, domain: str, operation_id: str
) -> dict[str, Any]:
    """``describe`` with everything read from the stores."""
    dispatch = await fencing.dispatch_of(operation_id)
    epoch = None if dispatch is None else await fencing.worker_epoch(domain, dispatch.worker)
    return describe(
        operation_id,
        await ledger.get(operation_id),
        dispatch=dispatch,
        resolution=await fencing.resolution_of(operation_id),
        dispatcher_epoch=epoch,
        unknown=await fencing.unknown_of(operation_id),
    )


def explain(described: dict[str, Any]) -> str:
    """One paragraph on why the operation is where it is and what may happen next."""
    state = described["status"]
    if state == NOT_STARTED:
        return (
            "No attempt is recorded for this business key. A call with the execute permission"
            " would check the live tool against the pinned definition, record the attempt,"
            " then send it to the upstream once."
        )
    by = described.get("dispatchedBy") or {}
    who = f" by worker {by['worker']} (epoch {by['epoch']})" if by else ""
    if state == OUTCOME_UNKNOWN:
        return (
            f"An attempt was recorded at {described['attemptedAt']}{who} and no reply was"
            " recorded: the gateway stopped, the call timed out, the upstream exited or sent"
            " something unreadable, or the worker was retired before it could record the"
            " reply. The upstream may or may not have acted. The gateway will never send this"
            " operation again; investigate the upstream system, then record what happened"
            " with `pausemesh ops resolve`."
        )
    if state == DENIED:
        return (
            "A person declined this operation before anything was sent; every later call of"
            " it stays declined. A different business key is a different operation."
        )
    resolution = described.get("resolution")
    if resolution is not None:
        return (
            f"The outcome was unknown; {resolution['resolvedBy']} resolved it at"
            f" {resolution['resolvedAt']} ({resolution['reason']}). Later calls with the same"
            " arguments get the recorded result, marked as resolved by an operator; nothing"
            " is sent."
        )
    return (
        f"The upstream's reply to the attempt{who} was recorded at {described['completedAt']}."
        " Later calls with the same arguments get that reply (RECONCILIATION_ONLY); nothing"
        " is sent again. The reply is what the upstream said, not proof of business success."
    )
