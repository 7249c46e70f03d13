"""Whole-batch resume validation: a run's ``resume`` against its cohort's receipt.

``validate_resume`` checks a typed ``RunAgentInput`` (bounded and typed once, at the route)
against the typed receipt the thread store holds and the current continuations, all-or-nothing,
in the order of the TypeScript reference (aantenore/pausemesh), and returns either the commands
(in issued order) or the ``AguiRunError`` to send as ``RUN_ERROR``. It never raises.
``resume_json.check_resume`` is the same check for callers holding untyped JSON (a request
body, a receipt as JSON): it adds the bounded preflight and the typing in front (steps 1-2).
The checks and their codes::

    1  preflight (depth, node count, cycles, limits)       PAUSEMESH_AGUI_INVALID_INPUT  (check_resume)
    2  RunAgentInput shape                                 PAUSEMESH_AGUI_INVALID_INPUT  (check_resume)
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
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final, Literal

import msgspec
from msgspec import UNSET

from pausemesh.agui.input import ResumeEntry, RunAgentInput
from pausemesh.agui.receipts import (
    COHORT_PREFIX,
    RECEIPT_SCHEMA_VERSION,
    CohortReceipt,
    ReceiptInterrupt,
    cohort_id,
)
from pausemesh.agui.run_error import (
    DUPLICATE_INTERRUPT,
    INVALID_ENTRY,
    INVALID_INPUT,
    INVALID_PAYLOAD,
    REPLAY_CONFLICT,
    RESUME_EXPIRED,
    RESUME_REQUIRED,
    SET_MISMATCH,
    THREAD_MISMATCH,
    AguiRunError,
)
from pausemesh.core.canonical import canonical_json, canonical_sha256, sha256_hex
from pausemesh.core.clock import iso_millis
from pausemesh.core.errors import InvalidInputError
from pausemesh.core.model import Continuation
from pausemesh.core.pause import PausePayload, parse_pause_payload
from pausemesh.core.schema import SchemaValidatorCache

__all__ = (
    "AGUI_CANCEL_REASON",
    "UNSAFE_INPUT",
    "CancelCommand",
    "ResumeCommand",
    "ResumePlan",
    "resume_idempotency_key",
    "validate_resume",
)

AGUI_CANCEL_REASON: Final = "agui:cancelled"
_HEX64 = re.compile(r"[0-9a-f]{64}")

UNSAFE_INPUT: Final = "AG-UI resume input could not be safely processed"
_COMPLETED_CONFLICT = "AG-UI resume conflicts with the completed interrupt outcome"


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


def resume_idempotency_key(thread_id: str, interrupt_id: str, payload: Any) -> str:
    """``agui:`` + sha256(canonical(["agui-v1", thread, interrupt, "resolved", payload]))."""
    return _idempotency_key(thread_id, interrupt_id, canonical_json(payload))


def _idempotency_key(thread_id: str, interrupt_id: str, canonical_payload: str) -> str:
    # The canonical text of the list, spliced from the payload's own canonical text (computed
    # once per member): a canonical array is "[" + its items' texts joined by "," + "]".
    head = canonical_json(["agui-v1", thread_id, interrupt_id, "resolved"])
    return "agui:" + sha256_hex(head[:-1] + "," + canonical_payload + "]")


def validate_resume(
    run_input: RunAgentInput,
    receipt: CohortReceipt,
    continuations: Sequence[Continuation],
    *,
    now: datetime,
    schemas: SchemaValidatorCache,
) -> ResumePlan | AguiRunError:
    """Validate a whole-batch resume; the plan or the ``RUN_ERROR`` to send. Never raises.

    ``continuations`` are the cohort's current state (any order).
    """
    try:
        return _validate(run_input, receipt, continuations, now, schemas)
    except AguiRunError as refusal:
        return refusal
    except Exception:  # noqa: BLE001 - the contract: any failure is a RUN_ERROR, not a crash
        return AguiRunError(INVALID_INPUT, UNSAFE_INPUT)


def _validate(
    typed: RunAgentInput,
    receipt: CohortReceipt,
    continuations: Sequence[Continuation],
    now: datetime,
    schemas: SchemaValidatorCache,
) -> ResumePlan:
    # 3. Receipt integrity.
    _check_receipt(receipt)

    # 4. The current continuations are exactly the issued cohort, unchanged since issuance.
    by_id = _check_current(receipt, continuations)

    # 5. Thread binding (the runId may differ: a resume is a new run, or a reused one).
    if typed.thread_id != receipt.thread_id:
        raise AguiRunError(THREAD_MISMATCH, "AG-UI resume must use the interrupted thread")

    # 6-8. The batch: present, no duplicates, exactly the issued set.
    if typed.resume is UNSET:
        raise AguiRunError(RESUME_REQUIRED, "Pending AG-UI interrupts require a resume batch")
    entries: dict[str, ResumeEntry] = {}
    for entry in typed.resume:
        if entry.interrupt_id in entries:
            raise AguiRunError(DUPLICATE_INTERRUPT, "AG-UI resume contains a duplicate interrupt")
        entries[entry.interrupt_id] = entry
    if set(entries) != set(receipt.interrupt_ids):
        raise AguiRunError(
            SET_MISMATCH,
            "AG-UI resume must address the complete issued interrupt cohort exactly once",
        )

    # 9. The clock.
    if not isinstance(now, datetime) or now.tzinfo is None or now.utcoffset() is None:
        raise AguiRunError(INVALID_INPUT, "AG-UI validation clock is invalid")

    # 10. Each member, in issued order.
    commands: list[ResumeCommand | CancelCommand] = []
    ordered: list[ResumeEntry] = []
    for issued in receipt.interrupts:
        entry = entries[issued.continuation_id]
        continuation = by_id[issued.continuation_id]
        commands.append(_member(receipt, issued, entry, continuation, now, schemas))
        ordered.append(entry)
    return ResumePlan(
        thread_id=receipt.thread_id,
        cohort_id=receipt.cohort_id,
        commands=tuple(commands),
        entries=tuple(ordered),
    )


def _check_receipt(receipt: CohortReceipt) -> None:
    well_formed = (
        receipt.schema_version == RECEIPT_SCHEMA_VERSION
        and bool(receipt.interrupts)
        and receipt.cohort_id.startswith(COHORT_PREFIX)
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
    if not well_formed:
        raise AguiRunError(INVALID_INPUT, "AG-UI issuance receipt is invalid")
    recomputed = cohort_id(
        receipt.schema_version, receipt.thread_id, receipt.run_id, receipt.interrupts
    )
    if recomputed != receipt.cohort_id:
        raise AguiRunError(INVALID_INPUT, "AG-UI issuance receipt was altered")
    if len(set(receipt.interrupt_ids)) != len(receipt.interrupts):
        raise AguiRunError(INVALID_INPUT, "AG-UI issuance receipt contains a duplicate interrupt")


def _check_current(
    receipt: CohortReceipt, continuations: Sequence[Continuation]
) -> dict[str, Continuation]:
    by_id = {c.continuation_id: c for c in continuations}
    if len(by_id) != len(continuations) or len(by_id) != len(receipt.interrupts):
        raise AguiRunError(
            SET_MISMATCH, "Current continuations do not match the complete issued interrupt cohort"
        )
    for issued in receipt.interrupts:
        continuation = by_id.get(issued.continuation_id)
        if continuation is None:
            raise AguiRunError(SET_MISMATCH, "Current continuations omit an issued interrupt")
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
            raise AguiRunError(
                REPLAY_CONFLICT,
                "Current continuation state does not match the issued interrupt receipt",
            )
    return by_id


def _member(  # noqa: PLR0917 - internal: one member's full context
    receipt: CohortReceipt,
    issued: ReceiptInterrupt,
    entry: ResumeEntry,
    continuation: Continuation,
    now: datetime,
    schemas: SchemaValidatorCache,
) -> ResumeCommand | CancelCommand:
    try:
        pause = parse_pause_payload(continuation.payload)
    except (ValueError, TypeError):
        raise AguiRunError(
            INVALID_INPUT, "An issued AG-UI interrupt has an invalid continuation payload"
        ) from None
    expired = now >= continuation.expires_at
    if entry.status == "cancelled":
        return _cancel_command(issued, entry, continuation, expired=expired)
    return _resume_command(receipt, entry, continuation, pause, expired=expired, schemas=schemas)


def _cancel_command(
    issued: ReceiptInterrupt,
    entry: ResumeEntry,
    continuation: Continuation,
    *,
    expired: bool,
) -> CancelCommand:
    # A typed entry keeps an explicit ``"payload": null`` as None; only an absent one is UNSET.
    if entry.payload is not UNSET:
        raise AguiRunError(INVALID_ENTRY, "A cancelled AG-UI resume entry must omit payload")
    if continuation.status == "resumed" or (
        continuation.status == "cancelled" and continuation.reason != AGUI_CANCEL_REASON
    ):
        raise AguiRunError(REPLAY_CONFLICT, _COMPLETED_CONFLICT)
    if continuation.status == "expired":
        raise AguiRunError(RESUME_EXPIRED, "AG-UI resume references an expired interrupt")
    if continuation.is_pending and expired:
        raise AguiRunError(RESUME_EXPIRED, "AG-UI resume arrived after an interrupt expired")
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
        raise AguiRunError(INVALID_PAYLOAD, "A resolved AG-UI resume entry must include payload")
    try:
        canonical_payload = canonical_json(entry.payload)
    except InvalidInputError:
        raise AguiRunError(
            INVALID_PAYLOAD, "A resolved AG-UI resume entry must contain valid JSON"
        ) from None
    if pause.kind == "authorization":
        raise AguiRunError(
            INVALID_ENTRY,
            "Authorization credentials must be delivered through a trusted out-of-band callback",
        )
    key = _idempotency_key(receipt.thread_id, continuation.continuation_id, canonical_payload)
    if continuation.status == "resumed":
        # Exact replay of a completed resume: the same command, no schema or expiry re-check.
        stored = continuation.resume_payload
        if (
            continuation.idempotency_key != key
            or stored is UNSET
            or canonical_json(stored) != canonical_payload
        ):
            raise AguiRunError(REPLAY_CONFLICT, _COMPLETED_CONFLICT)
        return ResumeCommand(
            continuation_id=continuation.continuation_id,
            idempotency_key=key,
            payload=entry.payload,
            settled=True,
        )
    if continuation.status == "cancelled":
        raise AguiRunError(REPLAY_CONFLICT, _COMPLETED_CONFLICT)
    if continuation.status == "expired" or expired:
        raise AguiRunError(RESUME_EXPIRED, "AG-UI resume references an expired interrupt")
    if pause.response_schema is not None:
        try:
            valid = schemas.is_valid(pause.response_schema, entry.payload)
        except Exception:  # noqa: BLE001 - a validator failure refuses the answer, never crashes
            raise AguiRunError(INVALID_PAYLOAD, "AG-UI resume payload validation failed") from None
        if not valid:
            raise AguiRunError(
                INVALID_PAYLOAD, "AG-UI resume payload does not match its response schema"
            )
    return ResumeCommand(
        continuation_id=continuation.continuation_id, idempotency_key=key, payload=entry.payload
    )
