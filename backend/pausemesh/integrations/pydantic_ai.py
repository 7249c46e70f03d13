"""pydantic-ai agents on PauseMesh, with durable, exactly-once tool approvals.

Install with ``pip install pausemesh[pydantic-ai]``; ``as_agent`` (and so ``pausemesh serve
--agent`` and ``PauseMeshConfig(agent=...)``) wraps a pydantic-ai ``Agent`` in
``PydanticAIAgent`` on its own. What a run does:

- Model text and tool calls stream as AG-UI events (``TEXT_MESSAGE_*``, ``TOOL_CALL_*``, and
  ``TOOL_CALL_RESULT`` once a tool returned). AG-UI events a tool returns in
  ``ToolReturn(metadata=[...])`` (e.g. a ``STATE_DELTA``) are sent after its result, as
  pydantic-ai's own AG-UI app does.
- A tool that requires approval ends the run with one interrupt per call, shaped like
  pydantic-ai's own AG-UI interrupts: ``reason: "tool_call"``, the ``toolCallId``, the message
  ``Approve tool({...args})?`` and a ``responseSchema`` asking ``{"approved": boolean,
  "editedArgs"?: <the tool's argument schema>, "reason"?: string}``, so edited arguments are
  checked against the tool's schema before anything runs. An external (deferred) tool call
  becomes an interrupt whose ``responseSchema`` is the tool's return schema, when it has one.
- The pydantic-ai message history of a paused run (with its pending tool calls) is kept in the
  pause itself: the metadata of its first continuation, written to the same database before
  the client hears of the question, never sent to a client. The next run turns the whole-batch
  answer into ``DeferredToolResults`` and continues that exact history, so an approval survives
  reloads, restarts and replicas and the client never sends history back. A new user turn
  rebuilds the history from the thread's newest AG-UI messages (``history_messages``, 200 by
  default: the run reads a window, never the whole thread; it starts at a user message).
- An approved tool executes through the operation ledger (``run_once`` keyed by thread and tool
  call id): a crash after it ran, or a retried resume, gets the recorded result and the tool
  never runs twice. A crash *while* it runs leaves the call ``OUTCOME_UNKNOWN``, which ends the
  run with that ``RUN_ERROR`` rather than risk a second execution. A denied call never runs;
  the model is told why (the ``reason``, or that the person declined).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from copy import deepcopy
from typing import Any, Final, TypeGuard

import msgspec
from pydantic import BaseModel
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai import (
    DeferredToolRequests,
    DeferredToolResults,
    ToolApproved,
    ToolDenied,
    ToolReturn,
)
from pydantic_ai.agent import AbstractAgent
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    FunctionToolResultEvent,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    PartDeltaEvent,
    PartEndEvent,
    PartStartEvent,
    SystemPromptPart,
    TextPart,
    TextPartDelta,
    ToolCallPart,
    ToolCallPartDelta,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.run import AgentRunResultEvent
from pydantic_core import to_jsonable_python

from pausemesh.agui.agent import AgentOutput, Decision, Operations, PauseRequest, RunContext
from pausemesh.agui.events import (
    AssistantMessage,
    DeveloperMessage,
    Event,
    Message,
    RunErrorEvent,
    StateSnapshotEvent,
    SystemMessage,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UserMessage,
    decode_event,
)
from pausemesh.agui.events import (
    TextPart as AguiTextPart,
)
from pausemesh.core.errors import PauseMeshError
from pausemesh.integrations.approval import approval_message, approval_schema

__all__ = (
    "DEFAULT_HISTORY_MESSAGES",
    "DOMAIN",
    "PydanticAIAgent",
    "approval_schema",
    "is_pydantic_ai_agent",
)

DOMAIN: Final = "pydantic-ai"
"""The operation ledger domain of approved tool executions (business key: thread:tool call)."""

DEFAULT_HISTORY_MESSAGES: Final = 200
"""How many of the thread's newest messages a new user turn gives the model as its history:
the run reads a window, not the thread (a conversation of weeks fits no model's context), and
the window starts at a user message. ``PAUSEMESH_AGENT_HISTORY_MESSAGES`` when served."""

_META: Final = "pydanticAi"
_DENIED: Final = "The user declined this tool call."
_CANCELLED: Final = "Cancelled by user."


def is_pydantic_ai_agent(obj: object) -> TypeGuard[AbstractAgent[Any, Any]]:
    return isinstance(obj, AbstractAgent)


def _jsonable(value: Any) -> Any:
    return to_jsonable_python(value, fallback=str)


# -- tool results through the operation ledger ------------------------------------------------


def _event_json(item: Any) -> Any:
    """An AG-UI event a tool returned (ours, the official models', or JSON), as JSON; else None."""
    if isinstance(item, msgspec.Struct):
        return msgspec.to_builtins(item)
    if isinstance(item, BaseModel) and hasattr(item, "type"):
        return item.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(item, dict) and isinstance(item.get("type"), str):
        return item
    return None


def _returned_events(metadata: Any) -> list[Event]:
    if not isinstance(metadata, list | tuple):
        return []
    events: list[Event] = []
    for item in metadata:
        data = _event_json(item)
        if data is not None:
            events.append(decode_event(msgspec.json.encode(data)))
    return events


def _record(result: Any) -> dict[str, Any]:
    """What the ledger keeps of a tool's result: enough to hand the same result back later."""
    if isinstance(result, ToolReturn):
        events = [e for e in (_event_json(i) for i in result.metadata or ()) if e is not None]
        return {"toolReturn": {"returnValue": _jsonable(result.return_value), "events": events}}
    return {"value": _jsonable(result)}


def _replayed(record: Any) -> Any:
    if isinstance(record, dict) and isinstance(record.get("toolReturn"), dict):
        returned = record["toolReturn"]
        return ToolReturn(return_value=returned.get("returnValue"), metadata=returned.get("events"))
    return record.get("value") if isinstance(record, dict) else record


class _ApprovedToolsOnce(AbstractCapability[Any]):
    """Runs each approved tool call through ``run_once`` (keyed by thread and tool call id)."""

    def __init__(self, operations: Operations, thread_id: str, domain: str) -> None:
        self.operations = operations
        self.thread_id = thread_id
        self.domain = domain

    async def wrap_tool_execute(
        self,
        ctx: Any,
        *,
        call: ToolCallPart,
        tool_def: Any,  # noqa: ARG002 - the hook's signature, named as pydantic-ai calls it
        args: dict[str, Any],
        handler: Callable[[dict[str, Any]], Any],
    ) -> Any:
        if not ctx.tool_call_approved:
            return await handler(args)

        async def action() -> dict[str, Any]:
            return _record(await handler(args))

        outcome = await self.operations.run_once(
            self.domain,
            f"{self.thread_id}:{call.tool_call_id}",
            tool=call.tool_name,
            arguments=_jsonable(args),
            action=action,
        )
        return _replayed(outcome.result)


# -- history -------------------------------------------------------------------------------


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.text for p in content if isinstance(p, AguiTextPart))


def history_from_messages(messages: Sequence[Message]) -> list[ModelMessage]:
    """The thread's AG-UI messages as pydantic-ai history (a new user turn starts from it)."""
    history: list[ModelMessage] = []
    tool_names: dict[str, str] = {}

    def request(part: Any) -> None:
        if history and isinstance(history[-1], ModelRequest):
            history[-1] = ModelRequest(parts=[*history[-1].parts, part])
        else:
            history.append(ModelRequest(parts=[part]))

    for message in messages:
        if isinstance(message, UserMessage):
            request(UserPromptPart(content=_text(message.content)))
        elif isinstance(message, SystemMessage | DeveloperMessage):
            request(SystemPromptPart(content=message.content))
        elif isinstance(message, AssistantMessage):
            parts: list[Any] = []
            if isinstance(message.content, str) and message.content:
                parts.append(TextPart(content=message.content))
            for call in message.tool_calls or ():
                tool_names[call.id] = call.function.name
                parts.append(
                    ToolCallPart(
                        tool_name=call.function.name,
                        args=call.function.arguments or None,
                        tool_call_id=call.id,
                    )
                )
            if parts:
                history.append(ModelResponse(parts=parts))
        elif isinstance(message, ToolMessage):
            request(
                ToolReturnPart(
                    tool_name=tool_names.get(message.tool_call_id, "tool"),
                    content=_text(message.content),
                    tool_call_id=message.tool_call_id,
                )
            )
    return history


def _from_a_user_turn(messages: Sequence[Message]) -> Sequence[Message]:
    """A window of the history that starts at a user message: one cut inside a turn would
    start with a tool result whose call is outside it, which a model's API refuses."""
    for index, message in enumerate(messages):
        if isinstance(message, UserMessage):
            return messages[index:]
    return messages


def _stored_history(decisions: Mapping[str, Decision]) -> list[ModelMessage] | None:
    for decision in decisions.values():
        mine = decision.metadata.get(_META)
        if isinstance(mine, dict) and "history" in mine:
            return ModelMessagesTypeAdapter.validate_python(mine["history"])
    return None


def _results(decisions: Mapping[str, Decision]) -> DeferredToolResults:
    results = DeferredToolResults()
    for decision in decisions.values():
        mine = decision.metadata.get(_META)
        if not isinstance(mine, dict) or decision.tool_call_id is None:
            continue
        call_id = decision.tool_call_id
        if isinstance(mine.get("metadata"), dict):
            results.metadata[call_id] = mine["metadata"]
        payload = decision.payload
        if mine.get("kind") == "external":
            results.calls[call_id] = (
                ToolReturn(return_value=_CANCELLED)
                if decision.status == "cancelled"
                else _jsonable(payload)
            )
            continue
        # The run host validated the payload against the approval schema already.
        answer = payload if isinstance(payload, dict) else {}
        if decision.status == "cancelled":
            results.approvals[call_id] = ToolDenied(_CANCELLED)
        elif answer.get("approved") is True:
            edited = answer.get("editedArgs")
            results.approvals[call_id] = ToolApproved(
                override_args=edited if isinstance(edited, dict) else None
            )
        else:
            reason = answer.get("reason")
            results.approvals[call_id] = ToolDenied(
                reason if isinstance(reason, str) and reason else _DENIED
            )
    return results


# -- streaming -------------------------------------------------------------------------------


class _EventMapper:
    """pydantic-ai stream events → AG-UI events (one assistant message per model response)."""

    def __init__(self) -> None:
        self._open_text: dict[int, str] = {}
        self._response_id = f"msg-{uuid.uuid4()}"
        self._response_used = False

    def _parent(self) -> str:
        self._response_used = True
        return self._response_id

    def _new_response(self) -> None:
        if self._response_used:
            self._response_id = f"msg-{uuid.uuid4()}"
            self._response_used = False

    def map(self, event: Any) -> list[Event]:  # noqa: PLR0911 - one branch per event kind
        if isinstance(event, PartStartEvent):
            if event.index == 0:
                self._new_response()
            return self._start(event)
        if isinstance(event, PartDeltaEvent):
            return self._delta(event)
        if isinstance(event, PartEndEvent):
            if isinstance(event.part, TextPart) and event.index in self._open_text:
                return [TextMessageEndEvent(message_id=self._open_text.pop(event.index))]
            if isinstance(event.part, ToolCallPart):
                return [ToolCallEndEvent(tool_call_id=event.part.tool_call_id)]
            return []
        if isinstance(event, FunctionToolResultEvent):
            self._new_response()
            part = event.part
            content = (
                part.model_response_str() if isinstance(part, ToolReturnPart) else _tool_retry(part)
            )
            events: list[Event] = [
                ToolCallResultEvent(
                    message_id=f"result-{part.tool_call_id}",
                    tool_call_id=part.tool_call_id,
                    content=content,
                    role="tool",
                )
            ]
            if isinstance(part, ToolReturnPart):
                events += _returned_events(part.metadata)
            return events
        return []

    def _start(self, event: PartStartEvent) -> list[Event]:
        part = event.part
        if isinstance(part, TextPart):
            # The first text of a response is its assistant message; tool calls attach to it.
            message_id = self._parent() if not self._response_used else f"msg-{uuid.uuid4()}"
            self._open_text[event.index] = message_id
            events: list[Event] = [TextMessageStartEvent(message_id=message_id, role="assistant")]
            if part.content:
                events.append(TextMessageContentEvent(message_id=message_id, delta=part.content))
            return events
        if isinstance(part, ToolCallPart):
            events = [
                ToolCallStartEvent(
                    tool_call_id=part.tool_call_id,
                    tool_call_name=part.tool_name,
                    parent_message_id=self._parent(),
                )
            ]
            args = part.args_as_json_str() if part.args else ""
            if args:
                events.append(ToolCallArgsEvent(tool_call_id=part.tool_call_id, delta=args))
            return events
        return []

    def _delta(self, event: PartDeltaEvent) -> list[Event]:
        delta = event.delta
        if isinstance(delta, TextPartDelta) and delta.content_delta:
            message_id = self._open_text.get(event.index)
            if message_id is not None:
                return [TextMessageContentEvent(message_id=message_id, delta=delta.content_delta)]
        if isinstance(delta, ToolCallPartDelta) and delta.tool_call_id and delta.args_delta:
            text = (
                delta.args_delta
                if isinstance(delta.args_delta, str)
                else json.dumps(delta.args_delta)
            )
            return [ToolCallArgsEvent(tool_call_id=delta.tool_call_id, delta=text)]
        return []


def _tool_retry(part: Any) -> str:
    response = getattr(part, "model_response", None)
    return str(response()) if callable(response) else "The tool call was rejected."


# -- the agent -----------------------------------------------------------------------------


class PydanticAIAgent:
    """A pydantic-ai ``Agent`` as a PauseMesh agent (see the module docstring).

    ``deps`` builds the run's pydantic-ai dependencies from the PauseMesh ``RunContext``;
    ``initial_state`` is merged under the thread's AG-UI state at the start of every run (so a
    fresh thread starts with, e.g., ``{"refunds": []}``); ``domain`` names the operation
    ledger domain of approved tool calls.
    """

    # What AG-UI capability discovery declares (``pausemesh.agui.capabilities``): an approval
    # answer's ``editedArgs`` replace the tool call's arguments.
    framework = "pydantic-ai"
    # The thread's history is read only for a new user turn, its newest ``history_messages``
    # (``ctx.history(limit=)``); a run that answers its pauses continues the history stored
    # with them and reads none (issue 42).
    pausemesh_lazy_history = True
    accepts_edited_args = True

    def __init__(
        self,
        agent: PydanticAgent[Any, Any] | AbstractAgent[Any, Any],
        *,
        deps: Callable[[RunContext], Any] | None = None,
        initial_state: Mapping[str, Any] | None = None,
        domain: str = DOMAIN,
        history_messages: int | None = DEFAULT_HISTORY_MESSAGES,
    ) -> None:
        if history_messages is not None and history_messages < 1:
            msg = "history_messages must be at least 1 (None: the whole history)"
            raise ValueError(msg)
        self.agent = agent
        # How many of the newest messages a new user turn gives the model (None: all).
        self.history_messages = history_messages
        self.deps = deps
        self.initial_state = dict(initial_state or {})
        self.domain = domain
        self._arguments_schemas, self._return_schemas = _tool_schemas(agent)

    def _output_type(self) -> Any:
        declared = getattr(self.agent, "output_type", str)
        types = list(declared) if isinstance(declared, list | tuple) else [declared]
        return types if DeferredToolRequests in types else [*types, DeferredToolRequests]

    def _initial_state(self, ctx: RunContext) -> list[Event]:
        if not self.initial_state:
            return []
        state = ctx.state if isinstance(ctx.state, dict) else {}
        if all(key in state for key in self.initial_state):
            return []
        return [StateSnapshotEvent(snapshot={**deepcopy(self.initial_state), **state})]

    async def __call__(self, ctx: RunContext) -> AsyncIterator[AgentOutput]:
        for event in self._initial_state(ctx):
            yield event
        results: DeferredToolResults | None = None
        if ctx.decisions:
            history = _stored_history(ctx.decisions)
            if history is None:
                yield RunErrorEvent(
                    code="PYDANTIC_AI_HISTORY_MISSING",
                    message="The answered interrupts were not asked by this pydantic-ai agent",
                )
                return
            results = _results(ctx.decisions)
        else:
            window = await ctx.history(limit=self.history_messages)
            history = history_from_messages(_from_a_user_turn(window))
        capabilities = (
            []
            if ctx.operations is None
            else [_ApprovedToolsOnce(ctx.operations, ctx.thread_id, self.domain)]
        )
        mapper = _EventMapper()
        outcome: Any = None
        try:
            async with self.agent.run_stream_events(
                message_history=history,
                deferred_tool_results=results,
                output_type=self._output_type(),
                deps=None if self.deps is None else self.deps(ctx),
                capabilities=capabilities,
            ) as stream:
                async for native in stream:
                    if isinstance(native, AgentRunResultEvent):
                        outcome = native.result
                    for mapped in mapper.map(native):
                        yield mapped
        except PauseMeshError as error:
            # OUTCOME_UNKNOWN, OPERATION_CONFLICT: the ledger refused to run the tool again.
            yield RunErrorEvent(code=error.code, message=error.message)
            return
        if outcome is not None and isinstance(outcome.output, DeferredToolRequests):
            for pause in self._pauses(outcome.output, outcome.all_messages()):
                yield pause

    def _pauses(
        self, requests: DeferredToolRequests, history: list[ModelMessage]
    ) -> list[PauseRequest]:
        stored = ModelMessagesTypeAdapter.dump_python(history, mode="json")
        pauses: list[PauseRequest] = []
        for kind, call in [("approval", c) for c in requests.approvals] + [
            ("external", c) for c in requests.calls
        ]:
            mine: dict[str, Any] = {"kind": kind}
            if not pauses:
                # One copy of the history per cohort, in its first pause.
                mine["history"] = stored
            if call.tool_call_id in requests.metadata:
                mine["metadata"] = _jsonable(requests.metadata[call.tool_call_id])
            if kind == "approval":
                message = approval_message(call.tool_name, call.args_as_json_str())
                schema: dict[str, Any] | None = approval_schema(
                    self._arguments_schemas.get(call.tool_name)
                )
                reason = "tool_call"
            else:
                message = f"Provide the result of {call.tool_name}({call.args_as_json_str()})"
                schema = self._return_schemas.get(call.tool_name)
                reason = "tool_result"
            pauses.append(
                PauseRequest(
                    message=message,
                    reason=reason,
                    response_schema=schema,
                    tool_call_id=call.tool_call_id,
                    metadata={_META: mine},
                )
            )
        return pauses


def _tool_schemas(agent: Any) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Each tool's argument and return JSON schemas, by name (function and external tools)."""
    arguments: dict[str, dict[str, Any]] = {}
    returns: dict[str, dict[str, Any]] = {}
    for toolset in getattr(agent, "toolsets", ()):
        for name, tool in (getattr(toolset, "tools", None) or {}).items():
            function_schema = getattr(tool, "function_schema", None)
            argument_schema = getattr(function_schema, "json_schema", None)
            return_schema = getattr(function_schema, "return_schema", None)
            if isinstance(argument_schema, dict):
                arguments[name] = argument_schema
            if isinstance(return_schema, dict):
                returns[name] = return_schema
        for definition in getattr(toolset, "tool_defs", None) or ():
            arguments[definition.name] = definition.parameters_json_schema
            if isinstance(getattr(definition, "return_schema", None), dict):
                returns[definition.name] = definition.return_schema
    return arguments, returns
