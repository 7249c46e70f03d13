"""Interrupt cohorts: issuing them as AG-UI ``RUN_FINISHED`` and validating a whole-batch resume.

``issue_interrupts`` turns the continuations of one pause into the interrupting
``RUN_FINISHED`` event and a host-only, content-addressed **receipt**: thread, run, and for
each interrupt its continuation id, expiry, issued version and payload hash, in issued order.
The receipt is protected workflow state; it never goes to the client.

``validate_resume`` checks the next run's ``resume`` against that receipt and the current
continuations, all-or-nothing, in the order of ``reference/pausemesh-ts.md`` §2.2, and either
returns the commands to execute (in issued order) or an ``AguiRunError`` to send as
``RUN_ERROR``. It never raises. The checks, in order, and their codes::

    1  preflight (depth, node count, cycles, limits)       PAUSEMESH_AGUI_INVALID_INPUT
    2  RunAgentInput shape                                 PAUSEMESH_AGUI_INVALID_INPUT
    3  receipt shape, cohortId recompute, duplicates       PAUSEMESH_AGUI_INVALID_INPUT
    4  current continuations = the issued cohort           PAUSEMESH_AGUI_RESUME_SET_MISMATCH
       ... unchanged since issuance (thread, expiry,       PAUSEMESH_AGUI_REPLAY_CONFLICT
           version, payload hash)
    5  input threadId = receipt threadId                   PAUSEMESH_AGUI_THREAD_MISMATCH
    6  ``resume`` present                                  PAUSEMESH_AGUI_RESUME_REQUIRED
    7  no interrupt answered twice                         PAUSEMESH_AGUI_DUPLICATE_INTERRUPT
    8  entries = the issued set (no partial/extra/empty)   PAUSEMESH_AGUI_RESUME_SET_MISMATCH
    9  an aware clock                                      PAUSEMESH_AGUI_INVALID_INPUT
    10 per member, in issued order: payload rules          PAUSEMESH_AGUI_INVALID_PAYLOAD /
       (resolved needs one, cancelled must omit it),       PAUSEMESH_AGUI_INVALID_ENTRY
       authorization refused, settled outcome matches      PAUSEMESH_AGUI_REPLAY_CONFLICT
       (exact replay → the same command), expiry,          PAUSEMESH_AGUI_RESUME_EXPIRED
       responseSchema (Draft 2020-12, formats checked)     PAUSEMESH_AGUI_INVALID_PAYLOAD

A continuation's payload is read as a pause by ``core.pause`` (the one parser every protocol
shares); this module re-exports ``pause_payload`` and friends for agent authors.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final, Literal

import msgspec
from msgspec import UNSET

from pausemesh.agui.events import (
    Interrupt,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
)
from pausemesh.agui.input import ResumeEntry, RunAgentInput
from pausemesh.agui.preflight import DEFAULT_MAX_DEPTH, DEFAULT_MAX_NODES, passes_preflight
from pausemesh.core.canonical import canonical_json, canonical_sha256
from pausemesh.core.clock import iso_millis
from pausemesh.core.errors import InvalidInputError, PauseMeshError, ProtocolAdapterError
from pausemesh.core.model import Continuation
from pausemesh.core.pause import (
    AUTHORIZATION_REASON,
    INPUT_REASON,
    PausePayload,
    parse_pause_payload,
    pause_payload,
)
from pausemesh.core.schema import SchemaValidatorCache
from pausemesh.core.validation import check_protocol_id

__all__ = (
    "AGUI_CANCEL_REASON",
    "AUTHORIZATION_REASON",
    "INPUT_REASON",
    "RECEIPT_SCHEMA_VERSION",
    "AguiRunError",
    "CancelCommand",
    "CohortReceipt",
    "PausePayload",
    "ReceiptInterrupt",
    "ResumeCommand",
    "ResumePlan",
    "issue_interrupts",
    "parse_pause_payload",
    "pause_payload",
    "receipt_from_json",
    "receipt_to_json",
    "resume_idempotency_key",
    "validate_resume",
)

RECEIPT_SCHEMA_VERSION: Final = 1
AGUI_CANCEL_REASON: Final = "agui:cancelled"
_HEX64 = re.compile(r"[0-9a-f]{64}")
_COHORT_PREFIX = "agui-cohort:"


# --- receipts --------------------------------------------------------------------------------


class ReceiptInterrupt(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    continuation_id: str
    expires_at: str
    issued_version: int
    payload_hash: str


class CohortReceipt(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Host-only record of one issued cohort; ``cohort_id`` content-addresses the rest."""

    schema_version: int
    cohort_id: str
    thread_id: str
    run_id: str
    interrupts: tuple[ReceiptInterrupt, ...]

    @property
    def interrupt_ids(self) -> tuple[str, ...]:
        return tuple(i.continuation_id for i in self.interrupts)


def _cohort_id(
    schema_version: int, thread_id: str, run_id: str, interrupts: Sequence[ReceiptInterrupt]
) -> str:
    descriptor = {
        "schemaVersion": schema_version,
        "threadId": thread_id,
        "runId": run_id,
        "interrupts": [msgspec.to_builtins(i) for i in interrupts],
    }
    return _COHORT_PREFIX + canonical_sha256(["agui-cohort-v1", descriptor])


def receipt_to_json(receipt: CohortReceipt) -> dict[str, Any]:
    """The receipt as plain JSON (for a thread record)."""
    data: dict[str, Any] = msgspec.to_builtins(receipt)
    return data


def receipt_from_json(data: object) -> CohortReceipt:
    """Type a stored receipt; ``msgspec.ValidationError`` if its shape is wrong."""
    if isinstance(data, CohortReceipt):
        return data
    if isinstance(data, (bytes, str)):
        return msgspec.json.decode(data, type=CohortReceipt, strict=True)
    return msgspec.convert(data, CohortReceipt, strict=True)


# --- issuing ---------------------------------------------------------------------------------


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
        cohort_id=_cohort_id(RECEIPT_SCHEMA_VERSION, thread_id, run_id, entries),
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


# --- resume validation -----------------------------------------------------------------------


class AguiRunError(msgspec.Struct, frozen=True, kw_only=True):
    """A refusal to send as ``RUN_ERROR``; ``code`` is one of the ``PAUSEMESH_AGUI_*`` codes."""

    code: str
    message: str

    def to_event(self) -> RunErrorEvent:
        return RunErrorEvent(message=self.message, code=self.code)


class ResumeCommand(msgspec.Struct, frozen=True, kw_only=True):
    """Resume ``continuation_id`` with ``payload`` under the derived ``idempotency_key``.

    ``settled`` is True when the continuation already holds exactly this resume (a replay):
    the service will return the stored outcome and nothing happens twice.
    """

    continuation_id: str
    idempotency_key: str
    payload: Any
    settled: bool = False
    action: Literal["resume"] = "resume"


class CancelCommand(msgspec.Struct, frozen=True, kw_only=True):
    """Cancel ``continuation_id`` fenced on its issued version (replays are idempotent)."""

    continuation_id: str
    expected_version: int
    reason: str = AGUI_CANCEL_REASON
    settled: bool = False
    action: Literal["cancel"] = "cancel"


class ResumePlan(msgspec.Struct, frozen=True, kw_only=True):
    """Validated commands in issued order, and the entries they came from (same order)."""

    thread_id: str
    cohort_id: str
    commands: tuple[ResumeCommand | CancelCommand, ...]
    entries: tuple[ResumeEntry, ...]

    @property
    def decisions(self) -> dict[str, ResumeEntry]:
        """The entries keyed by interrupt id, for the agent's run context."""
        return {e.interrupt_id: e for e in self.entries}

    @property
    def is_replay(self) -> bool:
        """True if every command was already applied (an exact replay of a completed resume)."""
        return all(c.settled for c in self.commands)


class _Refusal(Exception):  # noqa: N818 - internal control flow, never escapes this module
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.error = AguiRunError(code=code, message=message)


_P = "PAUSEMESH_AGUI_"
INVALID_INPUT = _P + "INVALID_INPUT"
SET_MISMATCH = _P + "RESUME_SET_MISMATCH"
REPLAY_CONFLICT = _P + "REPLAY_CONFLICT"
THREAD_MISMATCH = _P + "THREAD_MISMATCH"
RESUME_REQUIRED = _P + "RESUME_REQUIRED"
DUPLICATE_INTERRUPT = _P + "DUPLICATE_INTERRUPT"
INVALID_ENTRY = _P + "INVALID_ENTRY"
INVALID_PAYLOAD = _P + "INVALID_PAYLOAD"
RESUME_EXPIRED = _P + "RESUME_EXPIRED"


def resume_idempotency_key(thread_id: str, interrupt_id: str, payload: Any) -> str:
    """``agui:`` + sha256(canonical(["agui-v1", thread, interrupt, "resolved", payload]))."""
    return "agui:" + canonical_sha256(["agui-v1", thread_id, interrupt_id, "resolved", payload])


def validate_resume(
    raw_input: object,
    receipt: CohortReceipt | object,
    continuations: Sequence[Continuation],
    *,
    now: datetime,
    schemas: SchemaValidatorCache,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_nodes: int = DEFAULT_MAX_NODES,
) -> ResumePlan | AguiRunError:
    """Validate a whole-batch resume; the plan or the ``RUN_ERROR`` to send. Never raises.

    ``raw_input`` is the request body (bytes/str), its parsed JSON, or a ``RunAgentInput``;
    ``receipt`` a ``CohortReceipt`` or its stored JSON; ``continuations`` the cohort's current
    state (any order).
    """
    try:
        return _validate(raw_input, receipt, continuations, now, schemas, max_depth, max_nodes)
    except _Refusal as refusal:
        return refusal.error
    except Exception:  # noqa: BLE001 - the contract: any failure is a RUN_ERROR, not a crash
        return AguiRunError(
            code=INVALID_INPUT, message="AG-UI resume input could not be safely processed"
        )


def _raw_views(raw_input: object) -> tuple[object, RunAgentInput | None]:
    if isinstance(raw_input, RunAgentInput):
        return msgspec.to_builtins(raw_input), raw_input
    if isinstance(raw_input, (bytes, str)):
        return msgspec.json.decode(raw_input), None
    return raw_input, None


def _validate(  # noqa: PLR0917 - internal: mirrors validate_resume
    raw_input: object,
    raw_receipt: object,
    continuations: Sequence[Continuation],
    now: datetime,
    schemas: SchemaValidatorCache,
    max_depth: int,
    max_nodes: int,
) -> ResumePlan:
    # 1. Bounded preflight over everything before any of it is typed or hashed.
    raw, typed = _raw_views(raw_input)
    receipt_view = (
        msgspec.to_builtins(raw_receipt) if isinstance(raw_receipt, CohortReceipt) else raw_receipt
    )
    current_view = [msgspec.to_builtins(c) for c in continuations]
    if not passes_preflight(
        (raw, receipt_view, current_view), max_depth=max_depth, max_nodes=max_nodes
    ):
        raise _Refusal(INVALID_INPUT, "AG-UI resume input could not be safely processed")

    # 2. Protocol validity.
    if typed is None:
        try:
            typed = msgspec.convert(raw, RunAgentInput, strict=True)
        except msgspec.ValidationError:
            raise _Refusal(INVALID_INPUT, "AG-UI run input is not protocol-valid") from None

    # 3. Receipt integrity.
    receipt = _check_receipt(raw_receipt)

    # 4. The current continuations are exactly the issued cohort, unchanged since issuance.
    by_id = _check_current(receipt, continuations)

    # 5. Thread binding (the runId may differ: a resume is a new run, or a reused one).
    if typed.thread_id != receipt.thread_id:
        raise _Refusal(THREAD_MISMATCH, "AG-UI resume must use the interrupted thread")

    # 6-8. The batch: present, no duplicates, exactly the issued set.
    if typed.resume is UNSET:
        raise _Refusal(RESUME_REQUIRED, "Pending AG-UI interrupts require a resume batch")
    entries: dict[str, ResumeEntry] = {}
    for entry in typed.resume:
        if entry.interrupt_id in entries:
            raise _Refusal(DUPLICATE_INTERRUPT, "AG-UI resume contains a duplicate interrupt")
        entries[entry.interrupt_id] = entry
    if set(entries) != set(receipt.interrupt_ids):
        raise _Refusal(
            SET_MISMATCH,
            "AG-UI resume must address the complete issued interrupt cohort exactly once",
        )

    # 9. The clock.
    if not isinstance(now, datetime) or now.tzinfo is None or now.utcoffset() is None:
        raise _Refusal(INVALID_INPUT, "AG-UI validation clock is invalid")

    # 10. Each member, in issued order.
    commands: list[ResumeCommand | CancelCommand] = []
    ordered: list[ResumeEntry] = []
    for issued in receipt.interrupts:
        entry = entries[issued.continuation_id]
        continuation = by_id[issued.continuation_id]
        commands.append(_member(receipt, issued, entry, continuation, raw, now, schemas))
        ordered.append(entry)
    return ResumePlan(
        thread_id=receipt.thread_id,
        cohort_id=receipt.cohort_id,
        commands=tuple(commands),
        entries=tuple(ordered),
    )


def _check_receipt(raw_receipt: object) -> CohortReceipt:
    try:
        receipt = receipt_from_json(raw_receipt)
        well_formed = (
            receipt.schema_version == RECEIPT_SCHEMA_VERSION
            and bool(receipt.interrupts)
            and receipt.cohort_id.startswith(_COHORT_PREFIX)
            and all(
                isinstance(i.issued_version, int)
                and 1 <= i.issued_version <= 2**53 - 1
                and _HEX64.fullmatch(i.payload_hash) is not None
                and bool(i.continuation_id)
                and bool(i.expires_at)
                for i in receipt.interrupts
            )
            and bool(receipt.thread_id)
            and bool(receipt.run_id)
        )
    except (msgspec.ValidationError, msgspec.DecodeError):
        well_formed = False
    if not well_formed:
        raise _Refusal(INVALID_INPUT, "AG-UI issuance receipt is invalid")
    recomputed = _cohort_id(
        receipt.schema_version, receipt.thread_id, receipt.run_id, receipt.interrupts
    )
    if recomputed != receipt.cohort_id:
        raise _Refusal(INVALID_INPUT, "AG-UI issuance receipt was altered")
    if len(set(receipt.interrupt_ids)) != len(receipt.interrupts):
        raise _Refusal(INVALID_INPUT, "AG-UI issuance receipt contains a duplicate interrupt")
    return receipt


def _check_current(
    receipt: CohortReceipt, continuations: Sequence[Continuation]
) -> dict[str, Continuation]:
    by_id = {c.continuation_id: c for c in continuations}
    if len(by_id) != len(continuations) or len(by_id) != len(receipt.interrupts):
        raise _Refusal(
            SET_MISMATCH, "Current continuations do not match the complete issued interrupt cohort"
        )
    for issued in receipt.interrupts:
        continuation = by_id.get(issued.continuation_id)
        if continuation is None:
            raise _Refusal(SET_MISMATCH, "Current continuations omit an issued interrupt")
        expected_version = issued.issued_version + (0 if continuation.is_pending else 1)
        try:
            payload_hash = canonical_sha256(continuation.payload)
        except InvalidInputError:
            payload_hash = ""
        if (
            continuation.correlation_id != receipt.thread_id
            or iso_millis(continuation.expires_at) != issued.expires_at
            or continuation.version != expected_version
            or payload_hash != issued.payload_hash
        ):
            raise _Refusal(
                REPLAY_CONFLICT,
                "Current continuation state does not match the issued interrupt receipt",
            )
    return by_id


def _has_own_payload(raw: object, interrupt_id: str) -> bool:
    """Whether the raw entry for ``interrupt_id`` has a ``payload`` member at all (even null)."""
    if not isinstance(raw, Mapping):
        return False
    for item in raw.get("resume") or ():
        if isinstance(item, Mapping) and item.get("interruptId") == interrupt_id:
            return "payload" in item
    return False


def _member(  # noqa: PLR0917 - internal: one member's full context
    receipt: CohortReceipt,
    issued: ReceiptInterrupt,
    entry: ResumeEntry,
    continuation: Continuation,
    raw: object,
    now: datetime,
    schemas: SchemaValidatorCache,
) -> ResumeCommand | CancelCommand:
    try:
        pause = parse_pause_payload(continuation.payload)
    except (ValueError, TypeError):
        raise _Refusal(
            INVALID_INPUT, "An issued AG-UI interrupt has an invalid continuation payload"
        ) from None
    expired = now >= continuation.expires_at
    if entry.status == "cancelled":
        return _cancel_command(issued, entry, continuation, raw, expired=expired)
    return _resume_command(receipt, entry, continuation, pause, expired=expired, schemas=schemas)


def _cancel_command(
    issued: ReceiptInterrupt,
    entry: ResumeEntry,
    continuation: Continuation,
    raw: object,
    *,
    expired: bool,
) -> CancelCommand:
    if entry.payload is not UNSET or _has_own_payload(raw, entry.interrupt_id):
        raise _Refusal(INVALID_ENTRY, "A cancelled AG-UI resume entry must omit payload")
    if continuation.status == "resumed" or (
        continuation.status == "cancelled" and continuation.reason != AGUI_CANCEL_REASON
    ):
        raise _Refusal(
            REPLAY_CONFLICT, "AG-UI resume conflicts with the completed interrupt outcome"
        )
    if continuation.status == "expired":
        raise _Refusal(RESUME_EXPIRED, "AG-UI resume references an expired interrupt")
    if continuation.is_pending and expired:
        raise _Refusal(RESUME_EXPIRED, "AG-UI resume arrived after an interrupt expired")
    return CancelCommand(
        continuation_id=continuation.continuation_id,
        expected_version=issued.issued_version,
        settled=continuation.status == "cancelled",
    )


def _resume_command(
    receipt: CohortReceipt,
    entry: ResumeEntry,
    continuation: Continuation,
    pause: PausePayload,
    *,
    expired: bool,
    schemas: SchemaValidatorCache,
) -> ResumeCommand:
    if entry.payload is UNSET:
        raise _Refusal(INVALID_PAYLOAD, "A resolved AG-UI resume entry must include payload")
    try:
        canonical_payload = canonical_json(entry.payload)
    except InvalidInputError:
        raise _Refusal(
            INVALID_PAYLOAD, "A resolved AG-UI resume entry must contain valid JSON"
        ) from None
    if pause.kind == "authorization":
        raise _Refusal(
            INVALID_ENTRY,
            "Authorization credentials must be delivered through a trusted out-of-band callback",
        )
    key = resume_idempotency_key(receipt.thread_id, continuation.continuation_id, entry.payload)
    if continuation.status == "resumed":
        # Exact replay of a completed resume: the same command, no schema or expiry re-check.
        stored = continuation.resume_payload
        if (
            continuation.idempotency_key != key
            or stored is UNSET
            or canonical_json(stored) != canonical_payload
        ):
            raise _Refusal(
                REPLAY_CONFLICT, "AG-UI resume conflicts with the completed interrupt outcome"
            )
        return ResumeCommand(
            continuation_id=continuation.continuation_id,
            idempotency_key=key,
            payload=entry.payload,
            settled=True,
        )
    if continuation.status == "cancelled":
        raise _Refusal(
            REPLAY_CONFLICT, "AG-UI resume conflicts with the completed interrupt outcome"
        )
    if continuation.status == "expired" or expired:
        raise _Refusal(RESUME_EXPIRED, "AG-UI resume references an expired interrupt")
    if pause.response_schema is not None:
        try:
            valid = schemas.is_valid(pause.response_schema, entry.payload)
        except Exception:  # noqa: BLE001 - a validator failure refuses the answer, never crashes
            raise _Refusal(INVALID_PAYLOAD, "AG-UI resume payload validation failed") from None
        if not valid:
            raise _Refusal(
                INVALID_PAYLOAD, "AG-UI resume payload does not match its response schema"
            )
    return ResumeCommand(
        continuation_id=continuation.continuation_id, idempotency_key=key, payload=entry.payload
    )
