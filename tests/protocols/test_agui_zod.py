"""Every AG-UI event we can emit passes the official TypeScript artifacts too.

Each event goes through ``@ag-ui/core`` 1.0.0's zod ``EventSchema`` and the ``@ag-ui/client``
1.0.0 enforce stage (unknown members warn, malformed known ones fail); realistic runs go
through the client's ``verifyEvents`` ordering check. Needs node and ``npm ci`` in
``tests/protocols/node``.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

from pausemesh.agui.events import (
    PROTOCOL_VERSION,
    Event,
    MessagesSnapshotEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SubagentFinishedEvent,
    SubagentFinishedSuccessOutcome,
    SubagentStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    UserMessage,
    encode_event,
)
from tests.protocols.test_agui_events import EVERY_EVENT, _interrupt_finish
from tests.support.agui import NODE, NODE_DIR, needs_node

pytestmark = needs_node

RUNS: list[Event] = [
    # An interrupted run, shaped like the run host's.
    RunStartedEvent(thread_id="t1", run_id="r1", protocol_version=PROTOCOL_VERSION),
    StepStartedEvent(step_name="plan"),
    TextMessageStartEvent(message_id="m1", role="assistant"),
    TextMessageContentEvent(message_id="m1", delta="Let me look."),
    TextMessageEndEvent(message_id="m1"),
    ToolCallStartEvent(tool_call_id="tc1", tool_call_name="search", parent_message_id="m1"),
    ToolCallArgsEvent(tool_call_id="tc1", delta='{"to":"BER"}'),
    ToolCallEndEvent(tool_call_id="tc1"),
    ToolCallResultEvent(message_id="m2", tool_call_id="tc1", content="2 flights"),
    StateDeltaEvent(delta=[{"op": "add", "path": "/bookings", "value": []}]),
    StepFinishedEvent(step_name="plan"),
    MessagesSnapshotEvent(messages=[UserMessage(id="u1", content="book")]),
    StateSnapshotEvent(snapshot={"bookings": []}),
    _interrupt_finish(),
    # The resumed run, with reasoning and a subagent.
    RunStartedEvent(thread_id="t1", run_id="r2", protocol_version=PROTOCOL_VERSION),
    ReasoningStartEvent(message_id="rs1"),
    ReasoningMessageStartEvent(message_id="rm1", role="reasoning"),
    ReasoningMessageContentEvent(message_id="rm1", delta="book LH1"),
    ReasoningMessageEndEvent(message_id="rm1"),
    ReasoningEndEvent(message_id="rs1"),
    SubagentStartedEvent(subagent_run_id="sa1", name="booker"),
    StepStartedEvent(step_name="book", subagent_run_id="sa1"),
    StepFinishedEvent(step_name="book", subagent_run_id="sa1"),
    SubagentFinishedEvent(subagent_run_id="sa1", outcome=SubagentFinishedSuccessOutcome()),
    RunFinishedEvent(thread_id="t1", run_id="r2", outcome=RunFinishedSuccessOutcome()),
    # A refused run: RUN_ERROR may open a stream.
    RunErrorEvent(message="Pending AG-UI interrupts require a resume batch", code="X"),
]


def _check(lines: list[dict[str, Any]]) -> dict[str, Any]:
    assert NODE is not None
    completed = subprocess.run(
        [NODE, str(NODE_DIR / "zod_check.mjs")],
        cwd=NODE_DIR,
        input="\n".join(json.dumps(line) for line in lines),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    report: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return report


def test_every_event_kind_and_realistic_runs_pass_the_official_ts_client() -> None:
    lines = [
        {"kind": "single", "event": json.loads(encode_event(event))}
        for event in EVERY_EVENT.values()
    ] + [{"kind": "sequence", "event": json.loads(encode_event(event))} for event in RUNS]
    report = _check(lines)
    assert report["failures"] == [], report["failures"]
    assert report["warnings"] == []
    assert report["checked"] == len(lines)


def test_the_ts_check_catches_unknown_members_nulls_and_misordering() -> None:
    report = _check(
        [
            {
                "kind": "single",
                "event": {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "x": 1},
            },
            {"kind": "single", "event": {"type": "RUN_ERROR", "message": "m", "code": None}},
            {"kind": "sequence", "event": {"type": "TEXT_MESSAGE_END", "messageId": "m"}},
        ]
    )
    assert [f["type"] for f in report["failures"]] == ["RUN_FINISHED", "RUN_ERROR", "sequence"]
