"""Interrupt cohorts: issuance, receipts and whole-batch resume validation (docs/agui.md)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pausemesh.agui.events import RunFinishedInterruptOutcome, encode_event
from pausemesh.agui.input import ResumeEntry, decode_run_input, read_run_input
from pausemesh.agui.receipts import (
    CohortReceipt,
    issue_interrupts,
    issued_cohort,
    receipt_from_json,
    receipt_to_json,
)
from pausemesh.agui.resume import (
    AGUI_CANCEL_REASON,
    CancelCommand,
    ResumeCommand,
    ResumePlan,
    resume_idempotency_key,
    validate_resume,
)
from pausemesh.agui.resume_json import check_resume
from pausemesh.agui.run_error import AguiRunError
from pausemesh.core import ContinuationService, KeyedTokenIssuer, ManualClock
from pausemesh.core.canonical import canonical_sha256
from pausemesh.core.errors import PauseMeshError, ProtocolAdapterError, StoreError
from pausemesh.core.model import Continuation
from pausemesh.core.pause import AUTHORIZATION_REASON, pause_payload
from pausemesh.core.resume import Resume, TrustedHost
from pausemesh.core.schema import SchemaValidatorCache
from pausemesh.core.threads import decode_cohort
from pausemesh.stores.memory import InMemoryEventStore

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
EXPIRES = T0 + timedelta(minutes=15)
THREAD = "thread-1"
FLIGHT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"flight": {"type": "string", "enum": ["LH123", "AF456"]}},
    "required": ["flight"],
    "additionalProperties": False,
}
SCHEMAS = SchemaValidatorCache()


def pending(cid: str, payload: Any = None, *, thread: str = THREAD) -> Continuation:
    """A pending continuation as the service would return it right after create."""
    return Continuation(
        schema_version=1,
        continuation_id=cid,
        correlation_id=thread,
        version=1,
        status="pending",
        created_at=T0,
        expires_at=EXPIRES,
        payload=payload if payload is not None else pause_payload(f"Question {cid}?"),
        metadata={},
    )


def cohort(n: int) -> tuple[list[Continuation], CohortReceipt]:
    members = [pending(f"int-{i}") for i in range(n)]
    _, receipt = issue_interrupts(members, thread_id=THREAD, run_id="run-1")
    return members, receipt


def run_input(resume: list[dict[str, Any]] | None, *, thread: str = THREAD) -> dict[str, Any]:
    body: dict[str, Any] = {"threadId": thread, "runId": "run-2", "messages": []}
    if resume is not None:
        body["resume"] = resume
    return body


def answer(cid: str, payload: Any = None) -> dict[str, Any]:
    return {"interruptId": cid, "status": "resolved", "payload": payload or {"ok": True}}


def cancel(cid: str) -> dict[str, Any]:
    return {"interruptId": cid, "status": "cancelled"}


def validate(
    body: object, receipt: object, members: list[Continuation], *, now: datetime = T0, **kw: int
) -> ResumePlan | AguiRunError:
    return check_resume(body, receipt, members, now=now, schemas=SCHEMAS, **kw)


def refused(result: ResumePlan | AguiRunError, code: str) -> AguiRunError:
    assert isinstance(result, AguiRunError), result
    assert result.code == code, result
    return result


# --- issuance --------------------------------------------------------------------------------


def test_issue_projects_each_continuation_as_an_interrupt_with_id_message_schema_and_expiry() -> (
    None
):
    members = [
        pending("c1", pause_payload("Which flight?", response_schema=FLIGHT_SCHEMA)),
        pending("c2", pause_payload("Approve?", tool_call_id="tc-9")),
    ]
    event, receipt = issue_interrupts(members, thread_id=THREAD, run_id="r1")
    wire = msgspec.json.decode(encode_event(event))
    assert wire == {
        "type": "RUN_FINISHED",
        "threadId": THREAD,
        "runId": "r1",
        "outcome": {
            "type": "interrupt",
            "interrupts": [
                {
                    "id": "c1",
                    "reason": "input_required",
                    "message": "Which flight?",
                    "responseSchema": FLIGHT_SCHEMA,
                    "expiresAt": "2026-03-01T12:15:00.000Z",
                    "metadata": {"pausemesh": {"continuationId": "c1", "schemaVersion": 1}},
                },
                {
                    "id": "c2",
                    "reason": "input_required",
                    "message": "Approve?",
                    "toolCallId": "tc-9",
                    "expiresAt": "2026-03-01T12:15:00.000Z",
                    "metadata": {"pausemesh": {"continuationId": "c2", "schemaVersion": 1}},
                },
            ],
        },
    }
    assert receipt.interrupt_ids == ("c1", "c2")
    assert receipt.interrupts[0].payload_hash == canonical_sha256(members[0].payload)
    assert receipt.interrupts[0].issued_version == 1


def test_receipt_cohort_id_is_the_hash_of_its_canonical_descriptor() -> None:
    _, receipt = cohort(2)
    descriptor = {
        "schemaVersion": 1,
        "threadId": THREAD,
        "runId": "run-1",
        "interrupts": [msgspec.to_builtins(i) for i in receipt.interrupts],
    }
    assert receipt.cohort_id == "agui-cohort:" + canonical_sha256(["agui-cohort-v1", descriptor])
    assert receipt_from_json(receipt_to_json(receipt)) == receipt


def test_authorization_pause_uses_the_namespaced_reason() -> None:
    event, _ = issue_interrupts(
        [pending("c1", pause_payload("Sign in", kind="authorization"))],
        thread_id=THREAD,
        run_id="r1",
    )
    assert isinstance(event.outcome, RunFinishedInterruptOutcome)
    assert event.outcome.interrupts[0].reason == AUTHORIZATION_REASON


@pytest.mark.parametrize(
    ("members", "thread_id", "code"),
    [
        ([], THREAD, "INVALID_PROTOCOL_BINDING"),
        ([pending("c1")], " thread-1", "INVALID_PROTOCOL_BINDING"),
        ([pending("c1", thread="other")], THREAD, "INVALID_PROTOCOL_BINDING"),
        ([pending("c1"), pending("c1")], THREAD, "INVALID_PROTOCOL_BINDING"),
        (
            [msgspec.structs.replace(pending("c1"), status="cancelled", version=2)],
            THREAD,
            "INVALID_PROTOCOL_TRANSITION",
        ),
        ([pending("c1", {"message": ""})], THREAD, "INVALID_PROTOCOL_MESSAGE"),
        ([pending("c1", {"kind": "other", "message": "x"})], THREAD, "INVALID_PROTOCOL_MESSAGE"),
        (
            [pending("c1", pause_payload("x", response_schema={"type": 12}))],
            THREAD,
            "INVALID_PROTOCOL_MESSAGE",
        ),
    ],
    ids=[
        "empty",
        "edge-whitespace-thread",
        "foreign-thread",
        "duplicate",
        "not-pending",
        "empty-message",
        "unknown-kind",
        "invalid-schema",
    ],
)
def test_issue_refuses_what_cannot_be_a_cohort(
    members: list[Continuation], thread_id: str, code: str
) -> None:
    with pytest.raises(ProtocolAdapterError) as raised:
        issue_interrupts(members, thread_id=thread_id, run_id="r1")
    assert raised.value.code == code


# --- the happy path --------------------------------------------------------------------------


def test_complete_batch_yields_commands_in_issued_order_whatever_the_input_order() -> None:
    members, receipt = cohort(3)
    body = run_input([cancel("int-2"), answer("int-0", {"a": 1}), answer("int-1", {"b": 2})])
    plan = validate(body, receipt, members)
    assert isinstance(plan, ResumePlan)
    assert plan.commands == (
        ResumeCommand(
            continuation_id="int-0",
            idempotency_key=resume_idempotency_key(THREAD, "int-0", {"a": 1}),
            payload={"a": 1},
        ),
        ResumeCommand(
            continuation_id="int-1",
            idempotency_key=resume_idempotency_key(THREAD, "int-1", {"b": 2}),
            payload={"b": 2},
        ),
        CancelCommand(continuation_id="int-2", expected_version=1, reason=AGUI_CANCEL_REASON),
    )
    assert [e.interrupt_id for e in plan.entries] == ["int-0", "int-1", "int-2"]
    assert not plan.is_replay


def test_idempotency_key_is_deterministic_and_independent_of_key_order() -> None:
    first = resume_idempotency_key(THREAD, "c", {"x": 1, "y": 2})
    assert first == resume_idempotency_key(THREAD, "c", {"y": 2, "x": 1})
    assert first.startswith("agui:")
    assert len(first) == 5 + 64
    assert first != resume_idempotency_key("other", "c", {"x": 1, "y": 2})


@pytest.mark.parametrize(
    ("thread", "payload"),
    [
        (THREAD, {"flight": "LH123"}),
        ('th"read\\é', [1, 2.5, None, True, {"b": [], "a": "ü\u2028"}]),
        ("t", "just a string"),
        ("t", 1e300),
        ("t", None),
    ],
)
def test_idempotency_key_is_the_sha256_of_the_canonical_tuple(thread: str, payload: Any) -> None:
    # The key is spliced from the payload's canonical text (computed once per member).
    expected = "agui:" + canonical_sha256(["agui-v1", thread, "int-0", "resolved", payload])
    assert resume_idempotency_key(thread, "int-0", payload) == expected


def test_the_route_path_typed_once_validates_like_the_untyped_entry_point() -> None:
    members, receipt = cohort(2)
    raw = msgspec.json.encode(run_input([answer("int-0"), cancel("int-1")]))
    typed = validate_resume(read_run_input(raw), receipt, members, now=T0, schemas=SCHEMAS)
    assert isinstance(typed, ResumePlan)
    assert typed == validate(raw, receipt, members)


def test_the_typed_path_refuses_with_the_same_codes() -> None:
    members, receipt = cohort(2)
    partial = read_run_input(msgspec.json.encode(run_input([answer("int-0")])))
    result = validate_resume(partial, receipt, members, now=T0, schemas=SCHEMAS)
    refused(result, "PAUSEMESH_AGUI_RESUME_SET_MISMATCH")


def test_a_refusal_is_one_pausemesh_error_that_is_also_the_run_error() -> None:
    members, receipt = cohort(1)
    result = refused(validate(run_input(None), receipt, members), "PAUSEMESH_AGUI_RESUME_REQUIRED")
    assert isinstance(result, PauseMeshError)
    assert AguiRunError.from_error(result) is result
    event = AguiRunError.from_error(PauseMeshError("gone", code="THREAD_BUSY")).to_event()
    assert (event.code, event.message) == ("THREAD_BUSY", "gone")


def test_an_issued_cohort_round_trips_through_its_stored_json() -> None:
    members = [pending("c1", pause_payload("Which flight?", response_schema=FLIGHT_SCHEMA))]
    finished, receipt = issue_interrupts(members, thread_id=THREAD, run_id="r1")
    stored = issued_cohort(finished, receipt)
    again = decode_cohort(msgspec.json.encode(stored))
    assert again == stored
    assert again is not None
    assert again.receipt == receipt
    assert again.interrupt_ids == ("c1",)
    assert again.interrupts[0]["responseSchema"] == FLIGHT_SCHEMA


@pytest.mark.parametrize(
    "text", [b"{not json", b"[]", b'{"receipt": {"cohortId": 3}, "interrupts": []}']
)
def test_a_stored_cohort_that_does_not_decode_is_a_corrupt_stream(text: bytes) -> None:
    with pytest.raises(StoreError) as caught:
        decode_cohort(text)
    assert caught.value.code == "CORRUPT_STREAM"
    assert decode_cohort(None) is None


def test_accepts_body_bytes_and_typed_input_alike() -> None:
    members, receipt = cohort(1)
    body = run_input([answer("int-0")])
    raw = msgspec.json.encode(body)
    from_bytes = validate(raw, receipt, members)
    from_typed = validate(decode_run_input(raw), receipt, members)
    from_json = validate(body, receipt_to_json(receipt), members)
    assert isinstance(from_bytes, ResumePlan)
    assert from_bytes == from_typed == from_json


def test_response_schema_accepts_a_conforming_answer() -> None:
    members = [pending("c1", pause_payload("Which flight?", response_schema=FLIGHT_SCHEMA))]
    _, receipt = issue_interrupts(members, thread_id=THREAD, run_id="r1")
    plan = validate(run_input([answer("c1", {"flight": "AF456"})]), receipt, members)
    assert isinstance(plan, ResumePlan)


# --- refusals, in validation order -----------------------------------------------------------


def test_preflight_refuses_input_nested_past_the_depth_limit() -> None:
    members, receipt = cohort(1)
    deep: Any = "leaf"
    for _ in range(70):
        deep = [deep]
    body = run_input([answer("int-0", {"deep": deep})])
    result = refused(validate(body, receipt, members), "PAUSEMESH_AGUI_INVALID_INPUT")
    assert result.message == "AG-UI resume input could not be safely processed"
    assert isinstance(validate(body, receipt, members, max_depth=100), ResumePlan)


def test_preflight_refuses_input_with_too_many_nodes() -> None:
    members, receipt = cohort(1)
    body = run_input([answer("int-0", {"many": list(range(60_000))})])
    refused(validate(body, receipt, members), "PAUSEMESH_AGUI_INVALID_INPUT")
    assert isinstance(validate(body, receipt, members, max_nodes=70_000), ResumePlan)


def test_preflight_refuses_a_cyclic_host_object() -> None:
    members, receipt = cohort(1)
    body = run_input([answer("int-0")])
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    body["forwardedProps"] = cyclic
    refused(validate(body, receipt, members), "PAUSEMESH_AGUI_INVALID_INPUT")


@pytest.mark.parametrize(("max_depth", "max_nodes"), [(0, 10), (10, 0), (2**53, 10)])
def test_invalid_limits_are_refused(max_depth: int, max_nodes: int) -> None:
    members, receipt = cohort(1)
    refused(
        validate(
            run_input([answer("int-0")]),
            receipt,
            members,
            max_depth=max_depth,
            max_nodes=max_nodes,
        ),
        "PAUSEMESH_AGUI_INVALID_INPUT",
    )


@pytest.mark.parametrize(
    "body",
    [
        {
            "threadId": THREAD,
            "runId": "r",
            "messages": [],
            "resume": [{"interruptId": "int-0", "status": "wrong"}],
        },
        {"threadId": THREAD, "messages": []},
        [1, 2],
        b"{not json",
    ],
    ids=["bad-status", "missing-run-id", "not-an-object", "not-json"],
)
def test_protocol_invalid_input_is_refused(body: object) -> None:
    members, receipt = cohort(1)
    result = refused(validate(body, receipt, members), "PAUSEMESH_AGUI_INVALID_INPUT")
    assert "not protocol-valid" in result.message or "safely processed" in result.message


def test_altered_receipt_is_refused() -> None:
    members, receipt = cohort(2)
    forged = receipt_to_json(receipt)
    forged["interrupts"][1]["expiresAt"] = "2099-01-01T00:00:00.000Z"
    result = refused(
        validate(run_input([answer("int-0"), answer("int-1")]), forged, members),
        "PAUSEMESH_AGUI_INVALID_INPUT",
    )
    assert result.message == "AG-UI issuance receipt was altered"


def test_schema_invalid_receipt_is_refused() -> None:
    members, receipt = cohort(1)
    broken = receipt_to_json(receipt)
    broken["interrupts"][0]["payloadHash"] = "not-hex"
    result = refused(
        validate(run_input([answer("int-0")]), broken, members), "PAUSEMESH_AGUI_INVALID_INPUT"
    )
    assert result.message == "AG-UI issuance receipt is invalid"


def test_receipt_with_a_duplicate_interrupt_is_refused() -> None:
    members, receipt = cohort(1)
    doubled = msgspec.structs.replace(receipt, interrupts=receipt.interrupts * 2)
    json_doubled = receipt_to_json(doubled)
    descriptor = {k: json_doubled[k] for k in ("schemaVersion", "threadId", "runId", "interrupts")}
    json_doubled["cohortId"] = "agui-cohort:" + canonical_sha256(["agui-cohort-v1", descriptor])
    result = refused(
        validate(run_input([answer("int-0")]), json_doubled, members),
        "PAUSEMESH_AGUI_INVALID_INPUT",
    )
    assert result.message == "AG-UI issuance receipt contains a duplicate interrupt"


def test_resume_against_no_current_continuations_is_refused() -> None:
    _, receipt = cohort(2)
    refused(
        validate(run_input([answer("int-0"), answer("int-1")]), receipt, []),
        "PAUSEMESH_AGUI_RESUME_SET_MISMATCH",
    )


def test_current_continuations_missing_a_member_are_refused() -> None:
    members, receipt = cohort(2)
    result = refused(
        validate(
            run_input([answer("int-0"), answer("int-1")]),
            receipt,
            [members[0], pending("stranger")],
        ),
        "PAUSEMESH_AGUI_RESUME_SET_MISMATCH",
    )
    assert result.message == "Current continuations omit an issued interrupt"


def test_a_continuation_changed_since_issuance_is_a_replay_conflict() -> None:
    members, receipt = cohort(1)
    changed = [msgspec.structs.replace(members[0], payload=pause_payload("Something else?"))]
    refused(
        validate(run_input([answer("int-0")]), receipt, changed), "PAUSEMESH_AGUI_REPLAY_CONFLICT"
    )


def test_foreign_thread_is_refused() -> None:
    members, receipt = cohort(1)
    result = refused(
        validate(run_input([answer("int-0")], thread="thread-2"), receipt, members),
        "PAUSEMESH_AGUI_THREAD_MISMATCH",
    )
    assert result.message == "AG-UI resume must use the interrupted thread"


def test_plain_run_on_an_open_cohort_requires_a_resume_batch() -> None:
    members, receipt = cohort(1)
    refused(validate(run_input(None), receipt, members), "PAUSEMESH_AGUI_RESUME_REQUIRED")


def test_empty_batch_is_a_set_mismatch() -> None:
    members, receipt = cohort(1)
    refused(validate(run_input([]), receipt, members), "PAUSEMESH_AGUI_RESUME_SET_MISMATCH")


def test_partial_batch_is_refused() -> None:
    members, receipt = cohort(2)
    refused(
        validate(run_input([answer("int-0")]), receipt, members),
        "PAUSEMESH_AGUI_RESUME_SET_MISMATCH",
    )


def test_unknown_interrupt_alongside_the_real_one_is_refused() -> None:
    members, receipt = cohort(1)
    refused(
        validate(run_input([answer("int-0"), answer("int-x")]), receipt, members),
        "PAUSEMESH_AGUI_RESUME_SET_MISMATCH",
    )


def test_duplicate_entries_are_refused_even_when_identical() -> None:
    members, receipt = cohort(1)
    refused(
        validate(run_input([answer("int-0"), answer("int-0")]), receipt, members),
        "PAUSEMESH_AGUI_DUPLICATE_INTERRUPT",
    )


def test_naive_clock_is_refused() -> None:
    members, receipt = cohort(1)
    result = refused(
        validate(run_input([answer("int-0")]), receipt, members, now=datetime(2026, 3, 1)),  # noqa: DTZ001
        "PAUSEMESH_AGUI_INVALID_INPUT",
    )
    assert result.message == "AG-UI validation clock is invalid"


def test_cancelled_entry_with_a_payload_is_refused_even_null() -> None:
    members, receipt = cohort(1)
    entry = {"interruptId": "int-0", "status": "cancelled", "payload": None}
    refused(validate(run_input([entry]), receipt, members), "PAUSEMESH_AGUI_INVALID_ENTRY")


def test_resolved_entry_without_payload_is_refused() -> None:
    members, receipt = cohort(1)
    entry = {"interruptId": "int-0", "status": "resolved"}
    refused(validate(run_input([entry]), receipt, members), "PAUSEMESH_AGUI_INVALID_PAYLOAD")


def test_resolved_entry_with_explicit_null_payload_is_an_answer() -> None:
    members, receipt = cohort(1)
    entry = {"interruptId": "int-0", "status": "resolved", "payload": None}
    plan = validate(run_input([entry]), receipt, members)
    assert isinstance(plan, ResumePlan)
    assert plan.commands[0] == ResumeCommand(
        continuation_id="int-0",
        idempotency_key=resume_idempotency_key(THREAD, "int-0", None),
        payload=None,
    )


@pytest.mark.parametrize(
    "payload", [{"flight": "XX999"}, {"flight": 1}, {}, {"flight": "LH123", "extra": 1}]
)
def test_answer_outside_the_response_schema_is_refused(payload: Any) -> None:
    members = [pending("c1", pause_payload("Which flight?", response_schema=FLIGHT_SCHEMA))]
    _, receipt = issue_interrupts(members, thread_id=THREAD, run_id="r1")
    result = refused(
        validate(run_input([answer("c1", payload)]), receipt, members),
        "PAUSEMESH_AGUI_INVALID_PAYLOAD",
    )
    assert result.message == "AG-UI resume payload does not match its response schema"


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        ("date", "2026-03-02", "tomorrow"),
        ("date-time", "2026-03-02T09:30:00Z", "2026-03-02 morning"),
        ("time", "09:30:00Z", "half past nine"),
        ("email", "ada@example.org", "ada"),
        ("uri", "https://example.org/a", "not a uri"),
        ("uuid", "6f1c2b5e-0d4a-4c1e-9a57-3b2d8f0e1a2b", "6f1c"),
    ],
)
def test_response_schema_formats_are_checked(fmt: str, good: str, bad: str) -> None:
    schema = {"type": "object", "properties": {"v": {"type": "string", "format": fmt}}}
    members = [pending("c1", pause_payload("Which?", response_schema=schema))]
    _, receipt = issue_interrupts(members, thread_id=THREAD, run_id="r1")
    refused(
        validate(run_input([answer("c1", {"v": bad})]), receipt, members),
        "PAUSEMESH_AGUI_INVALID_PAYLOAD",
    )
    assert isinstance(
        validate(run_input([answer("c1", {"v": good})]), receipt, members), ResumePlan
    )


def test_authorization_interrupts_cannot_be_resolved_through_agui() -> None:
    members = [pending("c1", pause_payload("Sign in", kind="authorization"))]
    _, receipt = issue_interrupts(members, thread_id=THREAD, run_id="r1")
    result = refused(
        validate(run_input([answer("c1")]), receipt, members), "PAUSEMESH_AGUI_INVALID_ENTRY"
    )
    assert "out-of-band" in result.message
    # ... but they can be cancelled.
    assert isinstance(validate(run_input([cancel("c1")]), receipt, members), ResumePlan)


def test_expired_interrupt_cannot_be_resolved_at_or_after_its_deadline() -> None:
    members, receipt = cohort(1)
    body = run_input([answer("int-0")])
    result = refused(validate(body, receipt, members, now=EXPIRES), "PAUSEMESH_AGUI_RESUME_EXPIRED")
    assert result.message == "AG-UI resume references an expired interrupt"
    assert isinstance(
        validate(body, receipt, members, now=EXPIRES - timedelta(microseconds=1)), ResumePlan
    )


def test_expired_interrupt_cannot_be_cancelled_after_its_deadline_either() -> None:
    members, receipt = cohort(1)
    result = refused(
        validate(run_input([cancel("int-0")]), receipt, members, now=EXPIRES),
        "PAUSEMESH_AGUI_RESUME_EXPIRED",
    )
    assert result.message == "AG-UI resume arrived after an interrupt expired"
    expired = [msgspec.structs.replace(members[0], status="expired", version=2, expired_at=EXPIRES)]
    refused(
        validate(run_input([cancel("int-0")]), receipt, expired), "PAUSEMESH_AGUI_RESUME_EXPIRED"
    )
    refused(
        validate(run_input([answer("int-0")]), receipt, expired), "PAUSEMESH_AGUI_RESUME_EXPIRED"
    )


def test_one_bad_member_refuses_the_whole_batch() -> None:
    members = [
        pending("a"),
        pending("b", pause_payload("Which flight?", response_schema=FLIGHT_SCHEMA)),
    ]
    _, receipt = issue_interrupts(members, thread_id=THREAD, run_id="r1")
    body = run_input([answer("a"), answer("b", {"flight": "nope"})])
    refused(validate(body, receipt, members), "PAUSEMESH_AGUI_INVALID_PAYLOAD")


def test_validation_never_raises_on_garbage_receipts() -> None:
    members, _ = cohort(1)
    for garbage in (None, 1, "x", {"cohortId": 3}, [None]):
        refused(
            validate(run_input([answer("int-0")]), garbage, members), "PAUSEMESH_AGUI_INVALID_INPUT"
        )


# --- replays against the real service --------------------------------------------------------


@pytest.fixture(name="agui_service")
def agui_service_fixture() -> ContinuationService:
    return ContinuationService(
        store=InMemoryEventStore(),
        clock=ManualClock(T0),
        keyed_issuer=KeyedTokenIssuer({"k1": b"k" * 32}, active_key_id="k1"),
    )


async def _issue(service: ContinuationService, n: int) -> tuple[list[str], CohortReceipt]:
    ids = []
    for i in range(n):
        created = await service.create(
            payload=pause_payload("Which flight?", response_schema=FLIGHT_SCHEMA),
            continuation_id=f"c{i}",
            correlation_id=THREAD,
            keyed=True,
        )
        ids.append(created.continuation.continuation_id)
    current = [await service.get(cid) for cid in ids]
    _, receipt = issue_interrupts(current, thread_id=THREAD, run_id="r1")
    return ids, receipt


async def _execute(service: ContinuationService, plan: ResumePlan) -> None:
    for command in plan.commands:
        if isinstance(command, ResumeCommand):
            await service.resume(
                Resume(
                    continuation_id=command.continuation_id,
                    idempotency_key=command.idempotency_key,
                    payload=command.payload,
                    by=TrustedHost(),
                )
            )
        else:
            await service.cancel(
                continuation_id=command.continuation_id,
                expected_version=command.expected_version,
                reason=command.reason,
            )


async def test_exact_replay_of_a_completed_resume_returns_the_same_commands(
    agui_service: ContinuationService,
) -> None:
    ids, receipt = await _issue(agui_service, 2)
    body = run_input([answer(ids[0], {"flight": "LH123"}), cancel(ids[1])])
    before = [await agui_service.get(cid) for cid in ids]
    plan = validate(body, receipt, before)
    assert isinstance(plan, ResumePlan)
    await _execute(agui_service, plan)

    after = [await agui_service.get(cid) for cid in ids]
    assert [c.status for c in after] == ["resumed", "cancelled"]
    replay = validate(body, receipt, after, now=EXPIRES + timedelta(hours=1))
    assert isinstance(replay, ResumePlan)
    assert replay.is_replay
    assert [(c.continuation_id, c.action) for c in replay.commands] == [
        (ids[0], "resume"),
        (ids[1], "cancel"),
    ]
    assert replay.commands[0].idempotency_key == plan.commands[0].idempotency_key  # type: ignore[union-attr]
    await _execute(agui_service, replay)  # the service treats both as idempotent replays
    assert [await agui_service.get(cid) for cid in ids] == after


async def test_different_answer_after_resolution_is_a_replay_conflict(
    agui_service: ContinuationService,
) -> None:
    ids, receipt = await _issue(agui_service, 1)
    plan = validate(
        run_input([answer(ids[0], {"flight": "LH123"})]), receipt, [await agui_service.get(ids[0])]
    )
    assert isinstance(plan, ResumePlan)
    await _execute(agui_service, plan)
    after = [await agui_service.get(ids[0])]
    for body in (run_input([answer(ids[0], {"flight": "AF456"})]), run_input([cancel(ids[0])])):
        result = refused(validate(body, receipt, after), "PAUSEMESH_AGUI_REPLAY_CONFLICT")
        assert result.message == "AG-UI resume conflicts with the completed interrupt outcome"


async def test_resolving_an_interrupt_cancelled_through_agui_is_a_replay_conflict(
    agui_service: ContinuationService,
) -> None:
    ids, receipt = await _issue(agui_service, 1)
    await agui_service.cancel(continuation_id=ids[0], expected_version=1, reason=AGUI_CANCEL_REASON)
    after = [await agui_service.get(ids[0])]
    refused(
        validate(run_input([answer(ids[0], {"flight": "LH123"})]), receipt, after),
        "PAUSEMESH_AGUI_REPLAY_CONFLICT",
    )


async def test_cancel_replay_after_a_cancel_for_another_reason_is_a_conflict(
    agui_service: ContinuationService,
) -> None:
    ids, receipt = await _issue(agui_service, 1)
    await agui_service.cancel(continuation_id=ids[0], reason="operator")
    after = [await agui_service.get(ids[0])]
    refused(validate(run_input([cancel(ids[0])]), receipt, after), "PAUSEMESH_AGUI_REPLAY_CONFLICT")


# --- properties ------------------------------------------------------------------------------

_payloads = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def _complete_batches(
    draw: st.DrawFn,
) -> tuple[list[Continuation], CohortReceipt, list[dict[str, Any]]]:
    n = draw(st.integers(1, 8))
    members, receipt = cohort(n)
    entries = []
    for member in members:
        if draw(st.booleans()):
            entries.append(cancel(member.continuation_id))
        else:
            entries.append(
                {
                    "interruptId": member.continuation_id,
                    "status": "resolved",
                    "payload": draw(_payloads),
                }
            )
    return members, receipt, entries


@settings(max_examples=60, deadline=None)
@given(batch=_complete_batches(), data=st.data())
def test_any_permutation_of_a_complete_batch_yields_commands_in_issued_order(
    batch: tuple[list[Continuation], CohortReceipt, list[dict[str, Any]]], data: st.DataObject
) -> None:
    members, receipt, entries = batch
    shuffled = data.draw(st.permutations(entries))
    plan = validate(run_input(list(shuffled)), receipt, data.draw(st.permutations(members)))
    assert isinstance(plan, ResumePlan)
    assert [c.continuation_id for c in plan.commands] == list(receipt.interrupt_ids)
    assert [e.interrupt_id for e in plan.entries] == list(receipt.interrupt_ids)


@settings(max_examples=60, deadline=None)
@given(batch=_complete_batches(), data=st.data())
def test_removing_any_entry_is_refused(
    batch: tuple[list[Continuation], CohortReceipt, list[dict[str, Any]]], data: st.DataObject
) -> None:
    members, receipt, entries = batch
    index = data.draw(st.integers(0, len(entries) - 1))
    partial = entries[:index] + entries[index + 1 :]
    refused(validate(run_input(partial), receipt, members), "PAUSEMESH_AGUI_RESUME_SET_MISMATCH")


@settings(max_examples=60, deadline=None)
@given(batch=_complete_batches(), data=st.data())
def test_duplicating_any_entry_is_refused(
    batch: tuple[list[Continuation], CohortReceipt, list[dict[str, Any]]], data: st.DataObject
) -> None:
    members, receipt, entries = batch
    index = data.draw(st.integers(0, len(entries) - 1))
    position = data.draw(st.integers(0, len(entries)))
    doubled = [*entries[:position], entries[index], *entries[position:]]
    refused(validate(run_input(doubled), receipt, members), "PAUSEMESH_AGUI_DUPLICATE_INTERRUPT")


@settings(max_examples=60, deadline=None)
@given(batch=_complete_batches(), data=st.data())
def test_altering_any_receipt_field_is_detected(
    batch: tuple[list[Continuation], CohortReceipt, list[dict[str, Any]]], data: st.DataObject
) -> None:
    members, receipt, entries = batch
    forged = receipt_to_json(receipt)
    index = data.draw(st.integers(0, len(receipt.interrupts) - 1))
    field = data.draw(
        st.sampled_from(["continuationId", "expiresAt", "issuedVersion", "payloadHash"])
    )
    item = forged["interrupts"][index]
    item[field] = {
        "continuationId": item["continuationId"] + "x",
        "expiresAt": "2030-01-01T00:00:00.000Z",
        "issuedVersion": item["issuedVersion"] + 1,
        "payloadHash": "0" * 64,
    }[field]
    result = refused(validate(run_input(entries), forged, members), "PAUSEMESH_AGUI_INVALID_INPUT")
    assert result.message == "AG-UI issuance receipt was altered"


# --- remaining branches ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change",
    [
        {"correlation_id": "thread-2"},
        {"expires_at": EXPIRES + timedelta(seconds=1)},
        {"version": 3, "status": "resumed"},
        {"version": 2},
    ],
    ids=["foreign-thread", "other-expiry", "version-skipped", "pending-at-wrong-version"],
)
def test_current_state_that_contradicts_the_receipt_is_a_replay_conflict(
    change: dict[str, Any],
) -> None:
    members, receipt = cohort(1)
    changed = [msgspec.structs.replace(members[0], **change)]
    result = refused(
        validate(run_input([answer("int-0")]), receipt, changed), "PAUSEMESH_AGUI_REPLAY_CONFLICT"
    )
    assert (
        result.message == "Current continuation state does not match the issued interrupt receipt"
    )


def test_duplicate_current_continuations_do_not_match_the_cohort() -> None:
    members, receipt = cohort(1)
    result = refused(
        validate(run_input([answer("int-0")]), receipt, [members[0], members[0]]),
        "PAUSEMESH_AGUI_RESUME_SET_MISMATCH",
    )
    assert result.message == (
        "Current continuations do not match the complete issued interrupt cohort"
    )


def _hand_made_receipt(members: list[Continuation]) -> dict[str, Any]:
    """A receipt for payloads ``issue_interrupts`` would refuse (corrupted workflow state)."""
    interrupts = [
        {
            "continuationId": m.continuation_id,
            "expiresAt": "2026-03-01T12:15:00.000Z",
            "issuedVersion": 1,
            "payloadHash": canonical_sha256(m.payload),
        }
        for m in members
    ]
    descriptor = {"schemaVersion": 1, "threadId": THREAD, "runId": "r1", "interrupts": interrupts}
    cohort_id = "agui-cohort:" + canonical_sha256(["agui-cohort-v1", descriptor])
    return {**descriptor, "cohortId": cohort_id}


def test_an_issued_interrupt_whose_payload_is_not_a_pause_is_refused() -> None:
    members = [pending("c1", {"kind": "input", "message": ""})]
    result = refused(
        validate(run_input([answer("c1")]), _hand_made_receipt(members), members),
        "PAUSEMESH_AGUI_INVALID_INPUT",
    )
    assert result.message == "An issued AG-UI interrupt has an invalid continuation payload"


def test_a_resolved_payload_that_is_not_json_is_refused() -> None:
    members, receipt = cohort(1)
    typed = msgspec.structs.replace(
        decode_run_input(msgspec.json.encode(run_input([answer("int-0")]))),
        resume=[ResumeEntry(interrupt_id="int-0", status="resolved", payload=float("nan"))],
    )
    result = refused(validate(typed, receipt, members), "PAUSEMESH_AGUI_INVALID_PAYLOAD")
    assert result.message == "A resolved AG-UI resume entry must contain valid JSON"


def test_a_schema_whose_validation_fails_refuses_the_answer_without_crashing() -> None:
    schema = {"$ref": "https://schemas.invalid/unreachable.json"}
    members = [pending("c1", pause_payload("Which?", response_schema=schema))]
    _, receipt = issue_interrupts(members, thread_id=THREAD, run_id="r1")
    result = refused(
        validate(run_input([answer("c1")]), receipt, members), "PAUSEMESH_AGUI_INVALID_PAYLOAD"
    )
    assert result.message == "AG-UI resume payload validation failed"


def test_plan_decisions_are_keyed_by_interrupt_id() -> None:
    members, receipt = cohort(2)
    plan = validate(run_input([cancel("int-1"), answer("int-0", {"a": 1})]), receipt, members)
    assert isinstance(plan, ResumePlan)
    assert {k: v.status for k, v in plan.decisions.items()} == {
        "int-0": "resolved",
        "int-1": "cancelled",
    }


def test_run_error_event_carries_code_and_message() -> None:
    error = AguiRunError(code="PAUSEMESH_AGUI_RESUME_REQUIRED", message="m")
    assert msgspec.json.decode(encode_event(error.to_event())) == {
        "type": "RUN_ERROR",
        "message": "m",
        "code": "PAUSEMESH_AGUI_RESUME_REQUIRED",
    }
