"""Interrupt cohorts, issued: the interrupting AG-UI ``RUN_FINISHED`` and its receipt.

``issue_interrupts`` turns the continuations of one pause into the interrupting
``RUN_FINISHED`` event and a host-only, content-addressed **receipt**: thread, run, and for
each interrupt its continuation id, expiry, issued version and payload hash, in issued order.
The receipt is protected workflow state; it never goes to the client. The receipt Structs live
in ``core.threads`` (a thread record stores them typed); ``resume.py`` checks a batch against them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import msgspec
from msgspec import UNSET

from pausemesh.agui.events import Interrupt, RunFinishedEvent, RunFinishedInterruptOutcome
from pausemesh.core.canonical import canonical_sha256
from pausemesh.core.clock import iso_millis
from pausemesh.core.errors import PauseMeshError, ProtocolAdapterError
from pausemesh.core.model import Continuation
from pausemesh.core.pause import parse_pause_payload
from pausemesh.core.schema import SchemaValidatorCache
from pausemesh.core.threads import CohortReceipt, IssuedCohort, ReceiptInterrupt
from pausemesh.core.validation import check_protocol_id

__all__ = (
    "COHORT_PREFIX",
    "RECEIPT_SCHEMA_VERSION",
    "CohortReceipt",
    "IssuedCohort",
    "ReceiptInterrupt",
    "cohort_id",
    "issue_interrupts",
    "issued_cohort",
    "receipt_from_json",
    "receipt_to_json",
)

RECEIPT_SCHEMA_VERSION: Final = 1
COHORT_PREFIX: Final = "agui-cohort:"


def cohort_id(
    schema_version: int, thread_id: str, run_id: str, interrupts: Sequence[ReceiptInterrupt]
) -> str:
    """The content address of a receipt: what ``CohortReceipt.cohort_id`` must equal."""
    descriptor = {
        "schemaVersion": schema_version,
        "threadId": thread_id,
        "runId": run_id,
        "interrupts": [msgspec.to_builtins(i) for i in interrupts],
    }
    return COHORT_PREFIX + canonical_sha256(["agui-cohort-v1", descriptor])


def receipt_to_json(receipt: CohortReceipt) -> dict[str, Any]:
    """The receipt as plain JSON."""
    data: dict[str, Any] = msgspec.to_builtins(receipt)
    return data


def receipt_from_json(data: object) -> CohortReceipt:
    """Type a receipt given as JSON; ``msgspec.ValidationError`` if its shape is wrong."""
    if isinstance(data, CohortReceipt):
        return data
    if isinstance(data, (bytes, str)):
        return msgspec.json.decode(data, type=CohortReceipt, strict=True)
    return msgspec.convert(data, CohortReceipt, strict=True)


def issued_cohort(finished: RunFinishedEvent, receipt: CohortReceipt) -> IssuedCohort:
    """What a thread record keeps of an issued cohort: the receipt and the interrupts as sent."""
    if not isinstance(finished.outcome, RunFinishedInterruptOutcome):
        msg = "an issued cohort needs an interrupting RUN_FINISHED"
        raise TypeError(msg)
    interrupts = tuple(msgspec.to_builtins(i) for i in finished.outcome.interrupts)
    return IssuedCohort(receipt=receipt, interrupts=interrupts)


def issue_interrupts(
    continuations: Sequence[Continuation],
    *,
    thread_id: str,
    run_id: str,
    schemas: SchemaValidatorCache | None = None,
) -> tuple[RunFinishedEvent, CohortReceipt]:
    """The interrupting ``RUN_FINISHED`` and the cohort receipt for pending ``continuations``.

    Raises ``ProtocolAdapterError``: ``INVALID_PROTOCOL_BINDING`` (bad ids, empty cohort,
    duplicates, a continuation of another thread), ``INVALID_PROTOCOL_TRANSITION`` (a member
    is not pending), ``INVALID_PROTOCOL_MESSAGE`` (a payload that is not an AG-UI pause, or a
    ``responseSchema`` that is not a valid Draft 2020-12 schema).
    """
    try:
        return _issue(continuations, thread_id, run_id, schemas or SchemaValidatorCache(64))
    except ProtocolAdapterError:
        raise
    except Exception as error:
        msg = "AG-UI interrupt projection failed"
        raise ProtocolAdapterError(msg, code="INVALID_PROTOCOL_MESSAGE") from error


def _issue(
    continuations: Sequence[Continuation],
    thread_id: str,
    run_id: str,
    schemas: SchemaValidatorCache,
) -> tuple[RunFinishedEvent, CohortReceipt]:
    check_protocol_id(thread_id, "AG-UI threadId", "INVALID_PROTOCOL_BINDING")
    check_protocol_id(run_id, "AG-UI runId", "INVALID_PROTOCOL_BINDING")
    if not continuations:
        msg = "An AG-UI interrupt cohort needs at least one continuation"
        raise ProtocolAdapterError(msg, code="INVALID_PROTOCOL_BINDING")
    seen: set[str] = set()
    for continuation in continuations:
        if not continuation.is_pending:
            msg = f"Cannot issue an AG-UI interrupt for a {continuation.status} continuation"
            raise ProtocolAdapterError(msg, code="INVALID_PROTOCOL_TRANSITION")
        if continuation.correlation_id != thread_id:
            msg = "An AG-UI interrupt must belong to the run's thread"
            raise ProtocolAdapterError(msg, code="INVALID_PROTOCOL_BINDING")
        check_protocol_id(
            continuation.continuation_id, "AG-UI interrupt id", "INVALID_PROTOCOL_BINDING"
        )
        if continuation.continuation_id in seen:
            msg = "An AG-UI interrupt cohort contains a duplicate continuation"
            raise ProtocolAdapterError(msg, code="INVALID_PROTOCOL_BINDING")
        seen.add(continuation.continuation_id)

    interrupts: list[Interrupt] = []
    entries: list[ReceiptInterrupt] = []
    for continuation in continuations:
        try:
            pause = parse_pause_payload(continuation.payload)
            if pause.response_schema is not None:
                schemas.check_schema(pause.response_schema)
            payload_hash = canonical_sha256(continuation.payload)
        except (ValueError, TypeError) as error:
            # InvalidInputError (bad schema, non-JSON payload) is a ValueError too.
            message = error.message if isinstance(error, PauseMeshError) else str(error)
            msg = f"Continuation payload is not an AG-UI pause: {message}"
            raise ProtocolAdapterError(msg, code="INVALID_PROTOCOL_MESSAGE") from None
        expires_at = iso_millis(continuation.expires_at)
        interrupts.append(
            Interrupt(
                id=continuation.continuation_id,
                reason=pause.reason,
                message=pause.message,
                tool_call_id=UNSET if pause.tool_call_id is None else pause.tool_call_id,
                response_schema=UNSET if pause.response_schema is None else pause.response_schema,
                expires_at=expires_at,
                metadata={
                    "pausemesh": {
                        "continuationId": continuation.continuation_id,
                        "schemaVersion": RECEIPT_SCHEMA_VERSION,
                        # Who may decide it; absent: the thread's owner (four-eyes approvals).
                        **(
                            {"approvers": list(continuation.approvers)}
                            if continuation.approvers
                            else {}
                        ),
                    }
                },
            )
        )
        entries.append(
            ReceiptInterrupt(
                continuation_id=continuation.continuation_id,
                expires_at=expires_at,
                issued_version=continuation.version,
                payload_hash=payload_hash,
            )
        )
    receipt = CohortReceipt(
        schema_version=RECEIPT_SCHEMA_VERSION,
        cohort_id=cohort_id(RECEIPT_SCHEMA_VERSION, thread_id, run_id, entries),
        thread_id=thread_id,
        run_id=run_id,
        interrupts=tuple(entries),
    )
    event = RunFinishedEvent(
        thread_id=thread_id,
        run_id=run_id,
        outcome=RunFinishedInterruptOutcome(interrupts=interrupts),
    )
    return event, receipt
