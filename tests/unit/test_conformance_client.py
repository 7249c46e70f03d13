"""The client side of ``pausemesh conformance agui``: SSE reading, what a reply says, the
history a client sends back, and the answers made from a question's ``responseSchema``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pausemesh.conformance.agui import Scenario
from pausemesh.conformance.agui_thread import ClientThread, breaking_answer, valid_answer
from pausemesh.conformance.sse import ConformanceError, Frame, Reply, parse_frames

FLIGHT = {
    "type": "object",
    "properties": {"flight": {"type": "string", "enum": ["PM101", "PM202"]}},
    "required": ["flight"],
}
APPROVAL = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["approved"],
}


def _reply(*events: dict[str, Any], status: int = 200) -> Reply:
    return Reply(status, [Frame(str(n), json.dumps(e)) for n, e in enumerate(events, 1)])


def test_frames_are_read_as_sse_ids_data_lines_and_comments() -> None:
    lines = [": keep-alive", "", "id: 7", 'data: {"a":', "data: 1}", "", "data: x", "retry: 5"]
    assert list(parse_frames(lines)) == [Frame("7", '{"a":\n1}'), Frame(None, "x")]


def test_a_refusal_is_a_non_2xx_or_a_run_error_and_names_its_code() -> None:
    assert Reply(409, problem="THREAD_BUSY").refusal == "HTTP 409 THREAD_BUSY"
    errored = _reply({"type": "RUN_STARTED"}, {"type": "RUN_ERROR", "code": "X", "message": "m"})
    assert errored.refusal == "RUN_ERROR X"
    assert _reply({"type": "RUN_ERROR", "message": "no code"}).refusal == "RUN_ERROR: no code"
    finished = _reply({"type": "RUN_STARTED"}, {"type": "RUN_FINISHED"})
    assert finished.refusal is None
    assert finished.outcome == "success"


def test_a_reply_knows_its_interrupts_and_what_the_agent_produced() -> None:
    interrupt = {"id": "i1", "reason": "input_required"}
    reply = _reply(
        {"type": "RUN_STARTED"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m1"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
        {"type": "RUN_FINISHED", "outcome": {"type": "interrupt", "interrupts": [interrupt]}},
    )
    assert reply.outcome == "interrupt"
    assert reply.interrupts == [interrupt]
    assert reply.agent_output() == ["TEXT_MESSAGE_START m1"]
    assert reply.describe() == "RUN_FINISHED interrupt after the agent ran (TEXT_MESSAGE_START m1)"


def test_the_thread_folds_text_and_tool_calls_into_the_history_it_sends_back() -> None:
    thread = ClientThread({}, {})
    thread.say("refund A-1001")
    thread.apply(
        _reply(
            {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "On it."},
            {
                "type": "TOOL_CALL_START",
                "toolCallId": "c1",
                "toolCallName": "refund",
                "parentMessageId": "m1",
            },
            {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"order": "A-1001"}'},
            {"type": "STATE_SNAPSHOT", "snapshot": {"refunds": []}},
        )
    )
    body = thread.body([{"interruptId": "i1", "status": "resolved", "payload": {}}])
    user, assistant = body["messages"]
    assert user["content"] == "refund A-1001"
    assert assistant["content"] == "On it."
    assert assistant["toolCalls"] == [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "refund", "arguments": '{"order": "A-1001"}'},
        }
    ]
    assert body["state"] == {"refunds": []}
    assert body["resume"] == [{"interruptId": "i1", "status": "resolved", "payload": {}}]
    assert thread.body()["runId"] != body["runId"]


def test_a_messages_snapshot_replaces_the_history() -> None:
    thread = ClientThread({}, {})
    thread.say("hello")
    thread.apply(
        _reply(
            {"type": "MESSAGES_SNAPSHOT", "messages": [{"id": "s", "role": "user", "content": "x"}]}
        )
    )
    assert thread.messages == [{"id": "s", "role": "user", "content": "x"}]


def test_answers_are_made_from_the_schema_unless_the_scenario_gives_one() -> None:
    assert valid_answer({"responseSchema": FLIGHT}, None) == {"flight": "PM101"}
    assert valid_answer({"responseSchema": APPROVAL}, None) == {"approved": True}
    assert valid_answer({"responseSchema": FLIGHT}, {"flight": "PM202"}) == {"flight": "PM202"}
    assert valid_answer({}, None) == {"approved": True}
    pattern = {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": "^[0-9]+$"}},
        "required": ["code"],
    }
    assert valid_answer({"responseSchema": pattern}, None) is None


def test_a_breaking_answer_is_one_the_schema_refuses() -> None:
    assert breaking_answer({"responseSchema": FLIGHT}, None) == {}
    assert (
        breaking_answer({"responseSchema": {"type": "object"}}, None)
        == "conformance: not an answer"
    )
    assert breaking_answer({"responseSchema": {}}, None) is None
    assert breaking_answer({}, None) is None
    assert breaking_answer({"responseSchema": FLIGHT}, {"flight": "PM101"}) is None
    assert breaking_answer({"responseSchema": FLIGHT}, {"flight": "XX"}) == {"flight": "XX"}


def test_a_scenario_file_names_only_known_fields() -> None:
    scenario = Scenario.from_json({"message": "hi", "invalidAnswer": 3, "forwardedProps": {"a": 1}})
    assert (scenario.message, scenario.invalid_answer, scenario.forwarded_props) == (
        "hi",
        3,
        {"a": 1},
    )
    with pytest.raises(ConformanceError, match="mesage"):
        Scenario.from_json({"mesage": "typo"})
