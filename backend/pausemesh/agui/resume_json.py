"""Whole-batch resume validation for callers that hold untyped JSON.

``check_resume`` takes a request body (or its parsed JSON) and a receipt as JSON, runs the
bounded preflight over all of it and types it (steps 1-2 of ``resume.py``), then hands over to
``validate_resume``. The run host never needs it: the route bounds and types a run's input once
(``input.read_run_input``) and the thread store hands back a typed receipt.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import msgspec

from pausemesh.agui.input import RunAgentInput
from pausemesh.agui.preflight import DEFAULT_MAX_DEPTH, DEFAULT_MAX_NODES, passes_preflight
from pausemesh.agui.receipts import CohortReceipt, receipt_from_json
from pausemesh.agui.resume import UNSAFE_INPUT, ResumePlan, validate_resume
from pausemesh.agui.run_error import INVALID_INPUT, AguiRunError
from pausemesh.core.model import Continuation
from pausemesh.core.schema import SchemaValidatorCache

__all__ = ("check_resume",)


def check_resume(
    raw_input: object,
    receipt: object,
    continuations: Sequence[Continuation],
    *,
    now: datetime,
    schemas: SchemaValidatorCache,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_nodes: int = DEFAULT_MAX_NODES,
) -> ResumePlan | AguiRunError:
    """``validate_resume`` for untyped JSON: the bounded preflight and typing first.

    ``raw_input`` is a request body (bytes/str), its parsed JSON, or a ``RunAgentInput``;
    ``receipt`` a ``CohortReceipt`` or its JSON. Never raises.
    """
    try:
        typed = _typed_input(raw_input, receipt, continuations, max_depth, max_nodes)
        typed_receipt = _typed_receipt(receipt)
    except AguiRunError as refusal:
        return refusal
    except Exception:  # noqa: BLE001 - the contract: any failure is a RUN_ERROR, not a crash
        return AguiRunError(INVALID_INPUT, UNSAFE_INPUT)
    return validate_resume(typed, typed_receipt, continuations, now=now, schemas=schemas)


def _typed_input(
    raw_input: object,
    receipt: object,
    continuations: Sequence[Continuation],
    max_depth: int,
    max_nodes: int,
) -> RunAgentInput:
    # 1. Bounded preflight over everything before any of it is typed or hashed.
    if isinstance(raw_input, RunAgentInput):
        raw: object = msgspec.to_builtins(raw_input)
    elif isinstance(raw_input, (bytes, str)):
        raw = msgspec.json.decode(raw_input)
    else:
        raw = raw_input
    receipt_view = msgspec.to_builtins(receipt) if isinstance(receipt, CohortReceipt) else receipt
    current_view = [msgspec.to_builtins(c) for c in continuations]
    if not passes_preflight(
        (raw, receipt_view, current_view), max_depth=max_depth, max_nodes=max_nodes
    ):
        raise AguiRunError(INVALID_INPUT, UNSAFE_INPUT)
    # 2. Protocol validity.
    if isinstance(raw_input, RunAgentInput):
        return raw_input
    try:
        return msgspec.convert(raw, RunAgentInput, strict=True)
    except msgspec.ValidationError:
        raise AguiRunError(INVALID_INPUT, "AG-UI run input is not protocol-valid") from None


def _typed_receipt(receipt: object) -> CohortReceipt:
    try:
        return receipt_from_json(receipt)
    except (msgspec.ValidationError, msgspec.DecodeError):
        raise AguiRunError(INVALID_INPUT, "AG-UI issuance receipt is invalid") from None
