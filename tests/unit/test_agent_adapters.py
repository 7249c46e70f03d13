"""The framework adapters' own pieces, in-process: what becomes an interrupt, how an answer
becomes the framework's resume, and how streamed framework output becomes AG-UI events.

The end-to-end behaviour (real servers, SIGKILL, replicas) is in tests/e2e/test_framework_agents.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, ToolMessage
from pydantic_ai import Agent, DeferredToolRequests, ToolApproved, ToolDenied
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets.external import ExternalToolset

from pausemesh.agui.agent import AgentOutput, Decision, PauseRequest, RunContext
from pausemesh.agui.events import AssistantMessage, Event
from pausemesh.agui.events import ToolMessage as AguiToolMessage
from pausemesh.agui.messages import FunctionCall, ToolCall, UserMessage
from pausemesh.agui.transcript import Transcript
from pausemesh.integrations import langgraph as lg
from pausemesh.integrations import pydantic_ai as pai
from tests.support.agui import StreamChecker

WEATHER_RESULT = {"type": "object", "properties": {"celsius": {"type": "number"}}}


async def _weather_model(
    messages: list[ModelMessage], info: AgentInfo
) -> AsyncIterator[str | DeltaToolCalls]:
    del info
    last = messages[-1]
    returned = [p for p in getattr(last, "parts", []) if isinstance(p, ToolReturnPart)]
    if returned:
        yield f"It is {returned[0].model_response_str()} outside."
        return
    yield {
        0: DeltaToolCall(name="read_thermometer", json_args='{"room": "garden"}', tool_call_id="t1")
    }


def _weather_agent() -> Agent[None, str]:
    thermometer = ToolDefinition(
        name="read_thermometer",
        parameters_json_schema={"type": "object", "properties": {"room": {"type": "string"}}},
        return_schema=WEATHER_RESULT,
    )
    return Agent(
        FunctionModel(stream_function=_weather_model), toolsets=[ExternalToolset([thermometer])]
    )


async def _collect(agent: Any, ctx: RunContext) -> list[AgentOutput]:
    return [output async for output in agent(ctx)]


def _context(**fields: Any) -> RunContext:
    base: dict[str, Any] = {"thread_id": "t", "run_id": "r", "messages": [], "state": {}}
    base.update(fields)
    base.setdefault("principal", None)
    return RunContext(**base)


async def test_an_external_tool_call_asks_for_its_result_and_the_answer_is_the_result() -> None:
    agent = pai.PydanticAIAgent(_weather_agent())
    asked = await _collect(agent, _context(messages=[UserMessage(id="u1", content="Weather?")]))
    [pause] = [o for o in asked if isinstance(o, PauseRequest)]
    assert pause.reason == "tool_result"
    assert pause.tool_call_id == "t1"
    assert pause.response_schema == WEATHER_RESULT
    assert pause.message == 'Provide the result of read_thermometer({"room":"garden"})'
    assert pause.metadata is not None
    decision = Decision(
        interrupt_id="i1",
        status="resolved",
        payload={"celsius": 21},
        tool_call_id="t1",
        metadata=pause.metadata,
    )
    answered = await _collect(agent, _context(decisions={"i1": decision}))
    text = "".join(getattr(o, "delta", "") for o in answered if not isinstance(o, PauseRequest))
    assert text == 'It is {"celsius":21} outside.'


def test_answers_become_deferred_tool_results() -> None:
    def decision(call: str, status: str, payload: Any = msgspec.UNSET) -> Decision:
        return Decision(
            interrupt_id=f"i-{call}",
            status=status,  # type: ignore[arg-type]
            payload=payload,
            tool_call_id=call,
            metadata={"pydanticAi": {"kind": "approval"}},
        )

    results = pai._results(
        {
            "a": decision("a", "resolved", {"approved": True}),
            "b": decision("b", "resolved", {"approved": True, "editedArgs": {"x": 1}}),
            "c": decision("c", "resolved", {"approved": False, "reason": "No"}),
            "d": decision("d", "resolved", {"approved": False}),
            "e": decision("e", "cancelled"),
        }
    )
    assert results.approvals == {
        "a": ToolApproved(),
        "b": ToolApproved(override_args={"x": 1}),
        "c": ToolDenied("No"),
        "d": ToolDenied("The user declined this tool call."),
        "e": ToolDenied("Cancelled by user."),
    }


def test_a_new_turn_rebuilds_pydantic_ai_history_from_the_thread() -> None:
    call = ToolCall(id="c1", function=FunctionCall(name="issue_refund", arguments='{"a":1}'))
    history = pai.history_from_messages(
        [
            UserMessage(id="u1", content="refund"),
            AssistantMessage(id="m1", content="Sure.", tool_calls=[call]),
            AguiToolMessage(id="r1", content="done", tool_call_id="c1"),
            UserMessage(id="u2", content="thanks"),
        ]
    )
    assert [type(m) for m in history] == [ModelRequest, ModelResponse, ModelRequest]
    assert isinstance(history[0].parts[0], UserPromptPart)
    response = history[1]
    assert [type(p) for p in response.parts] == [TextPart, ToolCallPart]
    assert isinstance(response.parts[1], ToolCallPart)
    assert response.parts[1].tool_call_id == "c1"
    returned, prompt = history[2].parts
    assert isinstance(returned, ToolReturnPart)
    assert (returned.tool_name, returned.content) == ("issue_refund", "done")
    assert isinstance(prompt, UserPromptPart)


def test_the_approval_schema_refuses_edits_that_do_not_fit_the_tool() -> None:
    agent = pai.PydanticAIAgent(Agent(FunctionModel(stream_function=_weather_model)))
    assert agent._output_type()[-1] is DeferredToolRequests
    schema = pai.approval_schema({"type": "object", "required": ["x"]})
    assert schema["properties"]["editedArgs"]["required"] == ["x"]
    assert schema["required"] == ["approved"]


def _fold(events: list[Event]) -> Transcript:
    checker = StreamChecker(state="running")
    transcript = Transcript([], {})
    for event in events:
        checker.check(msgspec.to_builtins(event))
        transcript.apply(event)
    return transcript


def test_streamed_langgraph_chunks_become_one_assistant_message_with_its_tool_call() -> None:
    mapper = lg._EventMapper()
    chunks = [
        AIMessageChunk(content="Refunding ", id="ai-1"),
        AIMessageChunk(content="A-1001.", id="ai-1"),
        AIMessageChunk(
            content="",
            id="ai-1",
            tool_call_chunks=[{"index": 0, "id": "c1", "name": "issue_refund", "args": '{"order'}],
        ),
        AIMessageChunk(
            content="",
            id="ai-1",
            # A later piece of the call: LangChain sends it without an id or a name.
            tool_call_chunks=[{"index": 0, "id": None, "name": None, "args": '_id": "A-1001"}'}],
        ),
    ]
    events = [e for chunk in chunks for e in mapper.map(chunk)]
    # The whole message arrives after its chunks (LangGraph's messages mode): nothing repeats.
    whole = AIMessage(
        content="Refunding A-1001.",
        id="ai-1",
        tool_calls=[{"id": "c1", "name": "issue_refund", "args": {"order_id": "A-1001"}}],
    )
    events += mapper.map(whole)
    events += mapper.map(ToolMessage(content="ok", tool_call_id="c1", id="tm-1"))
    events += mapper.close()
    messages = _fold(events).messages
    assert messages == [
        {
            "id": "ai-1",
            "role": "assistant",
            "content": "Refunding A-1001.",
            "toolCalls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "issue_refund", "arguments": '{"order_id": "A-1001"}'},
                }
            ],
        },
        {"id": "tm-1", "role": "tool", "toolCallId": "c1", "content": "ok"},
    ]


def test_a_langgraph_interrupt_value_becomes_a_pause() -> None:
    class Pending:
        def __init__(self, value: Any, response_schema: Any = None) -> None:
            self.value = value
            self.id = "lg-1"
            self.response_schema = response_schema

    pause = lg._pause(Pending("Which order?"))
    assert (pause.message, pause.response_schema, pause.reason) == (
        "Which order?",
        {},
        "input_required",
    )
    assert pause.metadata == {"langgraph": {"interruptId": "lg-1"}}
    schema = {"type": "object", "required": ["ok"]}
    pause = lg._pause(Pending({"message": "Sure?", "tool_call_id": "c1"}, schema))
    assert (pause.message, pause.response_schema, pause.tool_call_id) == ("Sure?", schema, "c1")
    pause = lg._pause(Pending({"question": 1, "response_schema": schema}))
    assert (
        pause.message
        == '{"question": 1, "response_schema": {"type": "object", "required": ["ok"]}}'
    )
    assert pause.response_schema == schema
    decisions = {
        "a": Decision(
            interrupt_id="a", status="resolved", payload=1, metadata=pause.metadata or {}
        ),
    }
    assert lg._resume_values(decisions) == {"lg-1": 1}


async def test_a_new_turn_gives_the_model_a_window_of_the_history_from_a_user_message() -> None:
    asked: list[int | None] = []
    seen: list[list[ModelMessage]] = []
    stored = [
        UserMessage(id="u1", content="first"),
        AssistantMessage(
            id="a1",
            tool_calls=[
                ToolCall(id="c1", function=FunctionCall(name="read_thermometer", arguments="{}"))
            ],
        ),
        AguiToolMessage(id="t1", tool_call_id="c1", content="21"),
        AssistantMessage(id="a2", content="It is 21."),
        UserMessage(id="u2", content="And now?"),
    ]

    async def window(limit: int | None) -> list[Any]:
        asked.append(limit)
        return stored if limit is None else stored[-limit:]

    async def model(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        del info
        seen.append(messages)
        yield "Still 21."

    agent = pai.PydanticAIAgent(Agent(FunctionModel(stream_function=model)), history_messages=3)
    await _collect(agent, _context(history_loader=window))

    # The newest 3 read, not the thread; cut inside a turn, the window starts at its user
    # message (a tool result without its call would be refused by a model's API).
    assert asked == [3]
    [messages] = seen
    prompts = [p.content for m in messages for p in m.parts if isinstance(p, UserPromptPart)]
    assert prompts == ["And now?"]
    assert not any(isinstance(p, ToolReturnPart) for m in messages for p in m.parts)


def test_a_history_window_below_one_message_is_refused() -> None:
    with pytest.raises(ValueError, match="history_messages"):
        pai.PydanticAIAgent(
            Agent(FunctionModel(stream_function=_weather_model)), history_messages=0
        )
