"""Every AG-UI event we emit parses under the official ``ag-ui-protocol`` 1.0 models, strictly.

Strict means: ``validate_json(strict=True)`` (no coercion), the official dump (by alias,
``None`` excluded) equals our JSON exactly (no nulls, no snake_case keys, nothing dropped),
and no model holds an unknown key (``model_extra``; JSON Patch operations are open by spec).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import get_args

import pytest
from ag_ui._generated import models as official
from ag_ui.core import RunAgentInput as OfficialRunAgentInput

from pausemesh.agui.events import (
    PROTOCOL_VERSION,
    ActivityDeltaEvent,
    ActivitySnapshotEvent,
    AssistantMessage,
    CustomEvent,
    Event,
    FunctionCall,
    Interrupt,
    MessagesSnapshotEvent,
    RawEvent,
    ReasoningEncryptedValueEvent,
    ReasoningEndEvent,
    ReasoningMessageChunkEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentFinishedSuccessOutcome,
    SubagentFinishedSuspendedOutcome,
    SubagentStartedEvent,
    SystemMessage,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TextPart,
    TokenUsage,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UserMessage,
    decode_event,
    encode_event,
)
from pausemesh.agui.input import decode_run_input
from pausemesh.agui.messages import DeveloperMessage, ImagePart, ReasoningMessage, UrlSource
from pausemesh.agui.receipts import issue_interrupts
from pausemesh.agui.sse import KEEPALIVE_FRAME, encode_frame
from pausemesh.core.errors import InvalidInputError
from pausemesh.core.model import Continuation
from pausemesh.core.pause import pause_payload
from tests.support.agui import assert_conformant


def _interrupt_finish() -> RunFinishedEvent:
    now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    members = [
        Continuation(
            schema_version=1,
            continuation_id=f"c{i}",
            correlation_id="t1",
            version=1,
            status="pending",
            created_at=now,
            expires_at=now + timedelta(minutes=15),
            payload=payload,
            metadata={},
        )
        for i, payload in enumerate(
            [
                pause_payload(
                    "Which flight should I book?",
                    response_schema={
                        "type": "object",
                        "properties": {"flight": {"type": "string", "enum": ["LH1", "AF2"]}},
                        "required": ["flight"],
                    },
                ),
                pause_payload("Send it?", tool_call_id="tc-1", reason="tool_call"),
                pause_payload("Sign in", kind="authorization"),
            ]
        )
    ]
    event, _ = issue_interrupts(members, thread_id="t1", run_id="r1")
    return event


EVERY_EVENT: dict[str, Event] = {
    "run-started": RunStartedEvent(thread_id="t1", run_id="r1", protocol_version=PROTOCOL_VERSION),
    "run-started-with-input": RunStartedEvent(
        thread_id="t1",
        run_id="r2",
        parent_run_id="r1",
        input=decode_run_input(
            b'{"threadId":"t1","runId":"r2","messages":[{"id":"u1","role":"user","content":"hi"}],'
            b'"state":{"bookings":[]},"resume":[{"interruptId":"c0","status":"resolved",'
            b'"payload":{"flight":"LH1"}},{"interruptId":"c1","status":"cancelled"}]}'
        ),
    ),
    "run-finished-plain": RunFinishedEvent(thread_id="t1", run_id="r1"),
    "run-finished-success": RunFinishedEvent(
        thread_id="t1",
        run_id="r1",
        result={"booked": "LH1"},
        outcome=RunFinishedSuccessOutcome(pending_tool_call_ids=["tc-2"]),
        usage=[TokenUsage(model="none", input_tokens=0, output_tokens=0)],
    ),
    "run-finished-cancelled": RunFinishedEvent(
        thread_id="t1", run_id="r1", outcome=RunFinishedCancelledOutcome()
    ),
    "run-finished-interrupt": _interrupt_finish(),
    "run-finished-minimal-interrupt": RunFinishedEvent(
        thread_id="t1",
        run_id="r1",
        outcome=RunFinishedInterruptOutcome(interrupts=[Interrupt(id="i", reason="confirmation")]),
    ),
    "run-error": RunErrorEvent(message="nope", code="PAUSEMESH_AGUI_RESUME_REQUIRED"),
    "step-started": StepStartedEvent(step_name="plan", timestamp=1_767_225_600_000),
    "step-finished": StepFinishedEvent(step_name="plan"),
    "text-start": TextMessageStartEvent(message_id="m1", role="assistant"),
    "text-start-bare": TextMessageStartEvent(message_id="m1"),
    "text-content": TextMessageContentEvent(
        message_id="m1", delta="Hello\nthere \u00e9 \U0001f600"
    ),
    "text-content-empty": TextMessageContentEvent(message_id="m1", delta=""),
    "text-end": TextMessageEndEvent(message_id="m1", metadata={"x": 1}),
    "tool-start": ToolCallStartEvent(
        tool_call_id="tc1", tool_call_name="book", parent_message_id="m1"
    ),
    "tool-args": ToolCallArgsEvent(tool_call_id="tc1", delta='{"flight":'),
    "tool-end": ToolCallEndEvent(tool_call_id="tc1"),
    "tool-result": ToolCallResultEvent(
        message_id="m2", tool_call_id="tc1", content="ok", role="tool"
    ),
    "tool-result-parts": ToolCallResultEvent(
        message_id="m2", tool_call_id="tc1", content=[TextPart(text="ok")]
    ),
    "state-snapshot": StateSnapshotEvent(snapshot={"bookings": [{"flight": "LH1"}]}),
    "state-snapshot-null": StateSnapshotEvent(snapshot=None),
    "state-delta": StateDeltaEvent(
        delta=[{"op": "add", "path": "/bookings/-", "value": {"flight": "LH1"}}]
    ),
    "messages-snapshot": MessagesSnapshotEvent(
        messages=[
            SystemMessage(id="s1", content="be nice"),
            DeveloperMessage(id="d1", content="dev"),
            UserMessage(id="u1", content="book me a flight"),
            UserMessage(
                id="u2",
                content=[
                    TextPart(text="this one"),
                    ImagePart(source=UrlSource(value="https://example.org/a.png")),
                ],
            ),
            AssistantMessage(id="a1", content="Sure."),
            AssistantMessage(
                id="a2",
                tool_calls=[ToolCall(id="tc1", function=FunctionCall(name="book", arguments="{}"))],
            ),
            ToolMessage(id="t1", content="booked", tool_call_id="tc1"),
            ReasoningMessage(id="r1", content="thinking"),
        ]
    ),
    "custom": CustomEvent(name="pausemesh.note", value={"k": [1, 2]}),
    "custom-null": CustomEvent(name="ping", value=None),
    "raw": RawEvent(event={"provider": "x"}, source="demo"),
    "text-chunk": TextMessageChunkEvent(message_id="m3", role="assistant", delta="hi"),
    "tool-chunk": ToolCallChunkEvent(tool_call_id="tc3", tool_call_name="book", delta="{}"),
    "activity-snapshot": ActivitySnapshotEvent(
        message_id="act1", activity_type="search", content={"progress": 0.5}, replace=False
    ),
    "activity-delta": ActivityDeltaEvent(
        message_id="act1",
        activity_type="search",
        patch=[{"op": "replace", "path": "/progress", "value": 1}],
    ),
    "reasoning-start": ReasoningStartEvent(message_id="rs1"),
    "reasoning-message-start": ReasoningMessageStartEvent(message_id="rm1", role="reasoning"),
    "reasoning-message-content": ReasoningMessageContentEvent(message_id="rm1", delta="hmm"),
    "reasoning-message-end": ReasoningMessageEndEvent(message_id="rm1"),
    "reasoning-message-chunk": ReasoningMessageChunkEvent(message_id="rm2", delta="so"),
    "reasoning-end": ReasoningEndEvent(message_id="rs1"),
    "reasoning-encrypted": ReasoningEncryptedValueEvent(
        subtype="message", entity_id="rm1", encrypted_value="opaque"
    ),
    "subagent-started": SubagentStartedEvent(
        subagent_run_id="sa1", name="planner", parent_tool_call_id="tc1"
    ),
    "subagent-attributed-step": StepStartedEvent(step_name="plan", subagent_run_id="sa1"),
    "subagent-finished": SubagentFinishedEvent(
        subagent_run_id="sa1", outcome=SubagentFinishedSuspendedOutcome(interrupt_ids=["c0"])
    ),
    "subagent-finished-success": SubagentFinishedEvent(
        subagent_run_id="sa2", result="done", outcome=SubagentFinishedSuccessOutcome()
    ),
    "subagent-error": SubagentErrorEvent(subagent_run_id="sa3", message="boom", code="X"),
}


@pytest.mark.parametrize("event", list(EVERY_EVENT.values()), ids=list(EVERY_EVENT))
def test_event_parses_strictly_under_the_official_models(event: Event) -> None:
    assert_conformant(encode_event(event))


@pytest.mark.parametrize("event", list(EVERY_EVENT.values()), ids=list(EVERY_EVENT))
def test_event_round_trips_through_our_decoder(event: Event) -> None:
    assert decode_event(encode_event(event)) == event


def test_our_event_union_covers_every_official_event_type() -> None:
    ours = {cls.__struct_config__.tag for cls in get_args(Event)}
    assert ours == {member.value for member in official.EventType}
    assert {type(e) for e in EVERY_EVENT.values()} == set(get_args(Event))


def test_no_event_carries_a_null_optional_field() -> None:
    for name, event in EVERY_EVENT.items():
        text = encode_event(event).decode()
        allowed = name in {"state-snapshot-null", "custom-null"}
        assert ("null" in text) == allowed, name


def test_the_conformance_check_catches_nulls_snake_case_and_unknown_keys() -> None:
    base = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}
    assert_conformant(json.dumps(base).encode())
    for bad in (
        {**base, "timestamp": None},
        {"type": "RUN_FINISHED", "thread_id": "t", "runId": "r"},
        {**base, "bogus": 1},
        {**base, "outcome": {"type": "interrupt", "interrupts": []}},
    ):
        with pytest.raises(Exception):  # noqa: B017, PT011 - any failure of the strict check
            assert_conformant(json.dumps(bad).encode())


def test_an_empty_interrupt_outcome_cannot_be_built() -> None:
    with pytest.raises(ValueError, match="at least one interrupt"):
        RunFinishedInterruptOutcome(interrupts=[])


def test_frames_are_lf_only_with_the_sequence_as_id() -> None:
    event = TextMessageContentEvent(message_id="m1", delta="two\nlines\r\n")
    frame = encode_frame(event, 42)
    assert frame == b"id: 42\ndata: " + encode_event(event) + b"\n\n"
    assert b"\r" not in frame
    assert frame.count(b"\n") == 3
    assert encode_frame(event) == b"data: " + encode_event(event) + b"\n\n"
    assert encode_frame(encode_event(event), 7) == b"id: 7\ndata: " + encode_event(event) + b"\n\n"
    assert encode_frame(encode_event(event).decode(), 7) == encode_frame(event, 7)
    with pytest.raises(ValueError, match="line break"):
        encode_frame('{"type":"RAW",\n"event":1}', 8)


def test_keepalive_is_an_lf_comment_frame() -> None:
    assert KEEPALIVE_FRAME.startswith(b":")
    assert KEEPALIVE_FRAME.endswith(b"\n\n")
    assert b"\r" not in KEEPALIVE_FRAME


def test_frames_parse_like_the_official_clients_sse_reader() -> None:
    """The TS client splits on a blank line and joins ``data:`` lines; mirror that here."""
    stream = b"".join(
        [
            encode_frame(EVERY_EVENT["run-started"], 1),
            KEEPALIVE_FRAME,
            encode_frame(EVERY_EVENT["text-content"], 2),
            encode_frame(EVERY_EVENT["run-finished-interrupt"], 3),
        ]
    ).decode()
    events = []
    for block in stream.split("\n\n"):
        data = [line[len("data: ") :] for line in block.split("\n") if line.startswith("data:")]
        if data:
            events.append(json.loads("\n".join(data)))
    assert [e["type"] for e in events] == ["RUN_STARTED", "TEXT_MESSAGE_CONTENT", "RUN_FINISHED"]


# --- RunAgentInput ---------------------------------------------------------------------------


def test_input_dumped_by_the_official_model_decodes() -> None:
    official_input = OfficialRunAgentInput.model_validate(
        {
            "threadId": "t1",
            "runId": "r1",
            "messages": [
                {"id": "u1", "role": "user", "content": "hi"},
                {
                    "id": "a1",
                    "role": "assistant",
                    "toolCalls": [
                        {
                            "id": "tc",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
                {"id": "t1", "role": "tool", "content": "done", "toolCallId": "tc"},
            ],
            "tools": [{"name": "f", "description": "d", "parameters": {"type": "object"}}],
            "context": [{"description": "d", "value": "v"}],
            "forwardedProps": {"x": 1},
            "resume": [{"interruptId": "i1", "status": "resolved", "payload": {"a": 1}}],
        }
    )
    body = official_input.model_dump_json(by_alias=True, exclude_none=True).encode()
    decoded = decode_run_input(body)
    assert decoded.thread_id == "t1"
    assert [m.id for m in decoded.messages] == ["u1", "a1", "t1"]
    assert decoded.resume[0].payload == {"a": 1}  # type: ignore[index]


def test_input_tolerates_nulls_on_optional_fields() -> None:
    decoded = decode_run_input(
        b'{"threadId":"t","runId":"r","parentRunId":null,"state":null,"tools":null,'
        b'"context":null,"forwardedProps":null,"resume":null,"messages":['
        b'{"id":"a","role":"assistant","content":null,"name":null,"toolCalls":null}]}'
    )
    assert decoded.state == {}
    assert decoded.tools == []
    assert isinstance(decoded.messages[0], AssistantMessage)


def test_input_ignores_unknown_members() -> None:
    decoded = decode_run_input(
        b'{"threadId":"t","runId":"r","messages":[],"copilotkit":{"x":1},"resume":'
        b'[{"interruptId":"i","status":"cancelled","extra":true}]}'
    )
    assert decoded.resume[0].status == "cancelled"  # type: ignore[index]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b"{", "not valid JSON"),
        (b"[]", "must be a JSON object"),
        (b'{"threadId":"t","messages":[]}', "runId"),
        (b'{"threadId":1,"runId":"r","messages":[]}', "threadId"),
        (b'{"threadId":"t","runId":"r","messages":[{"id":"x","role":"robot"}]}', "messages"),
        (
            b'{"threadId":"t","runId":"r","messages":[],"resume":[{"interruptId":"i","status":"maybe"}]}',
            "status",
        ),
    ],
    ids=["truncated", "array", "missing-run-id", "wrong-type", "unknown-role", "bad-status"],
)
def test_invalid_input_is_refused_with_a_clear_message(body: bytes, fragment: str) -> None:
    with pytest.raises(InvalidInputError) as raised:
        decode_run_input(body)
    assert raised.value.code == "INVALID_RUN_INPUT"
    assert fragment in raised.value.message


def test_input_nested_too_deeply_is_refused_before_typing() -> None:
    deep = "[" * 100 + "]" * 100
    body = f'{{"threadId":"t","runId":"r","messages":[],"forwardedProps":{deep}}}'.encode()
    with pytest.raises(InvalidInputError, match="too deeply"):
        decode_run_input(body)
