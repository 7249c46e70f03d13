"""AG-UI 1.0 events as frozen msgspec Structs (their SSE framing is in ``agui/sse.py``).

Events are a tagged union on ``type``; wire keys are camelCase; an optional field with no
value is ``UNSET`` and omitted, never ``null`` ("absent means absent"). Required JSON
payloads that may legitimately be ``null`` (``CUSTOM.value``, ``STATE_SNAPSHOT.snapshot``)
are plain ``Any``.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import msgspec
from msgspec import UNSET, UnsetType

from pausemesh.agui.input import RunAgentInput
from pausemesh.agui.messages import (
    ActivityMessage,
    AssistantMessage,
    ContentPart,
    DeveloperMessage,
    FunctionCall,
    Message,
    ReasoningMessage,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    UserMessage,
)

__all__ = (
    "PROTOCOL_VERSION",
    "ActivityDeltaEvent",
    "ActivityMessage",
    "ActivitySnapshotEvent",
    "AssistantMessage",
    "CustomEvent",
    "DeveloperMessage",
    "Event",
    "FunctionCall",
    "Interrupt",
    "Message",
    "MessagesSnapshotEvent",
    "RawEvent",
    "ReasoningEncryptedValueEvent",
    "ReasoningEndEvent",
    "ReasoningMessage",
    "ReasoningMessageChunkEvent",
    "ReasoningMessageContentEvent",
    "ReasoningMessageEndEvent",
    "ReasoningMessageStartEvent",
    "ReasoningStartEvent",
    "RunErrorEvent",
    "RunFinishedCancelledOutcome",
    "RunFinishedEvent",
    "RunFinishedInterruptOutcome",
    "RunFinishedOutcome",
    "RunFinishedSuccessOutcome",
    "RunStartedEvent",
    "StateDeltaEvent",
    "StateSnapshotEvent",
    "StepFinishedEvent",
    "StepStartedEvent",
    "SubagentErrorEvent",
    "SubagentFinishedEvent",
    "SubagentFinishedSuccessOutcome",
    "SubagentFinishedSuspendedOutcome",
    "SubagentStartedEvent",
    "SystemMessage",
    "TextMessageChunkEvent",
    "TextMessageContentEvent",
    "TextMessageEndEvent",
    "TextMessageStartEvent",
    "TextPart",
    "TokenUsage",
    "ToolCall",
    "ToolCallArgsEvent",
    "ToolCallChunkEvent",
    "ToolCallEndEvent",
    "ToolCallResultEvent",
    "ToolCallStartEvent",
    "ToolMessage",
    "UserMessage",
    "decode_event",
    "encode_event",
)

PROTOCOL_VERSION: Final = "1.0"


class _Wire(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    pass


# --- RUN_FINISHED outcome ------------------------------------------------------------------


class Interrupt(_Wire, frozen=True, kw_only=True):
    """One open question in an ``interrupt`` outcome; resume entries answer it by ``id``."""

    id: str
    reason: str
    message: str | UnsetType = UNSET
    tool_call_id: str | UnsetType = UNSET
    response_schema: dict[str, Any] | UnsetType = UNSET
    expires_at: str | UnsetType = UNSET
    metadata: dict[str, Any] | UnsetType = UNSET
    subagent_run_id: str | UnsetType = UNSET


class _Outcome(_Wire, frozen=True, kw_only=True, tag_field="type"):
    pass


class RunFinishedSuccessOutcome(_Outcome, frozen=True, kw_only=True, tag="success"):
    pending_tool_call_ids: list[str] | UnsetType = UNSET


class RunFinishedInterruptOutcome(_Outcome, frozen=True, kw_only=True, tag="interrupt"):
    # At least one: both official SDKs reject an empty list.
    interrupts: list[Interrupt]

    def __post_init__(self) -> None:
        if not self.interrupts:
            msg = "an interrupt outcome needs at least one interrupt"
            raise ValueError(msg)


class RunFinishedCancelledOutcome(_Outcome, frozen=True, kw_only=True, tag="cancelled"):
    pass


RunFinishedOutcome = (
    RunFinishedSuccessOutcome | RunFinishedInterruptOutcome | RunFinishedCancelledOutcome
)


class TokenUsage(_Wire, frozen=True, kw_only=True):
    provider: str | UnsetType = UNSET
    model: str | UnsetType = UNSET
    input_tokens: int | UnsetType = UNSET
    output_tokens: int | UnsetType = UNSET
    total_tokens: int | UnsetType = UNSET
    reasoning_tokens: int | UnsetType = UNSET
    cached_input_tokens: int | UnsetType = UNSET
    cache_write_input_tokens: int | UnsetType = UNSET


# --- events -----------------------------------------------------------------------------------


class _Event(_Wire, frozen=True, kw_only=True, tag_field="type"):
    timestamp: int | UnsetType = UNSET
    raw_event: Any | UnsetType = UNSET
    metadata: dict[str, Any] | UnsetType = UNSET


class _Attributable(_Event, frozen=True, kw_only=True):
    # The subagent invocation this belongs to; absent = the parent agent.
    subagent_run_id: str | UnsetType = UNSET


class RunStartedEvent(_Event, frozen=True, kw_only=True, tag="RUN_STARTED"):
    thread_id: str
    run_id: str
    protocol_version: str | UnsetType = UNSET
    parent_run_id: str | UnsetType = UNSET
    input: RunAgentInput | UnsetType = UNSET


class RunFinishedEvent(_Event, frozen=True, kw_only=True, tag="RUN_FINISHED"):
    thread_id: str
    run_id: str
    result: Any | UnsetType = UNSET
    # Absent means success.
    outcome: RunFinishedOutcome | UnsetType = UNSET
    usage: list[TokenUsage] | UnsetType = UNSET


class RunErrorEvent(_Event, frozen=True, kw_only=True, tag="RUN_ERROR"):
    message: str
    code: str | UnsetType = UNSET
    usage: list[TokenUsage] | UnsetType = UNSET


class StepStartedEvent(_Attributable, frozen=True, kw_only=True, tag="STEP_STARTED"):
    step_name: str


class StepFinishedEvent(_Attributable, frozen=True, kw_only=True, tag="STEP_FINISHED"):
    step_name: str


class TextMessageStartEvent(_Attributable, frozen=True, kw_only=True, tag="TEXT_MESSAGE_START"):
    message_id: str
    # Absent means "assistant".
    role: Literal["developer", "system", "assistant", "user"] | UnsetType = UNSET
    name: str | UnsetType = UNSET


class TextMessageContentEvent(_Attributable, frozen=True, kw_only=True, tag="TEXT_MESSAGE_CONTENT"):
    message_id: str
    delta: str


class TextMessageEndEvent(_Attributable, frozen=True, kw_only=True, tag="TEXT_MESSAGE_END"):
    message_id: str


class ToolCallStartEvent(_Attributable, frozen=True, kw_only=True, tag="TOOL_CALL_START"):
    tool_call_id: str
    tool_call_name: str
    parent_message_id: str | UnsetType = UNSET


class ToolCallArgsEvent(_Attributable, frozen=True, kw_only=True, tag="TOOL_CALL_ARGS"):
    tool_call_id: str
    # A fragment of the JSON argument text.
    delta: str


class ToolCallEndEvent(_Attributable, frozen=True, kw_only=True, tag="TOOL_CALL_END"):
    tool_call_id: str


class ToolCallResultEvent(_Attributable, frozen=True, kw_only=True, tag="TOOL_CALL_RESULT"):
    message_id: str
    tool_call_id: str
    content: str | list[ContentPart]
    role: Literal["tool"] | UnsetType = UNSET


class StateSnapshotEvent(_Attributable, frozen=True, kw_only=True, tag="STATE_SNAPSHOT"):
    snapshot: Any


class StateDeltaEvent(_Attributable, frozen=True, kw_only=True, tag="STATE_DELTA"):
    # RFC 6902 JSON Patch operations.
    delta: list[dict[str, Any]]


class MessagesSnapshotEvent(_Event, frozen=True, kw_only=True, tag="MESSAGES_SNAPSHOT"):
    messages: list[Message]


class RawEvent(_Attributable, frozen=True, kw_only=True, tag="RAW"):
    event: Any
    source: str | UnsetType = UNSET


class CustomEvent(_Attributable, frozen=True, kw_only=True, tag="CUSTOM"):
    name: str
    value: Any


class TextMessageChunkEvent(_Attributable, frozen=True, kw_only=True, tag="TEXT_MESSAGE_CHUNK"):
    # The first chunk of a message must carry ``message_id``.
    message_id: str | UnsetType = UNSET
    role: Literal["developer", "system", "assistant", "user"] | UnsetType = UNSET
    delta: str | UnsetType = UNSET
    name: str | UnsetType = UNSET


class ToolCallChunkEvent(_Attributable, frozen=True, kw_only=True, tag="TOOL_CALL_CHUNK"):
    # The first chunk of a call must carry ``tool_call_id`` and ``tool_call_name``.
    tool_call_id: str | UnsetType = UNSET
    tool_call_name: str | UnsetType = UNSET
    parent_message_id: str | UnsetType = UNSET
    delta: str | UnsetType = UNSET


class ActivitySnapshotEvent(_Attributable, frozen=True, kw_only=True, tag="ACTIVITY_SNAPSHOT"):
    message_id: str
    activity_type: str
    content: dict[str, Any]
    # Absent means true.
    replace: bool | UnsetType = UNSET


class ActivityDeltaEvent(_Attributable, frozen=True, kw_only=True, tag="ACTIVITY_DELTA"):
    message_id: str
    activity_type: str
    patch: list[dict[str, Any]]


class ReasoningStartEvent(_Attributable, frozen=True, kw_only=True, tag="REASONING_START"):
    message_id: str


class ReasoningMessageStartEvent(
    _Attributable, frozen=True, kw_only=True, tag="REASONING_MESSAGE_START"
):
    message_id: str
    # Required on the wire (the TS schema insists), so it has no default to be omitted.
    role: Literal["reasoning"]


class ReasoningMessageContentEvent(
    _Attributable, frozen=True, kw_only=True, tag="REASONING_MESSAGE_CONTENT"
):
    message_id: str
    delta: str


class ReasoningMessageEndEvent(
    _Attributable, frozen=True, kw_only=True, tag="REASONING_MESSAGE_END"
):
    message_id: str


class ReasoningMessageChunkEvent(
    _Attributable, frozen=True, kw_only=True, tag="REASONING_MESSAGE_CHUNK"
):
    message_id: str | UnsetType = UNSET
    delta: str | UnsetType = UNSET


class ReasoningEndEvent(_Attributable, frozen=True, kw_only=True, tag="REASONING_END"):
    message_id: str


class ReasoningEncryptedValueEvent(
    _Attributable, frozen=True, kw_only=True, tag="REASONING_ENCRYPTED_VALUE"
):
    subtype: Literal["tool-call", "message"]
    entity_id: str
    encrypted_value: str


class SubagentStartedEvent(_Event, frozen=True, kw_only=True, tag="SUBAGENT_STARTED"):
    # Here ``subagent_run_id`` names the subagent itself (required), not an attribution.
    subagent_run_id: str
    name: str
    description: str | UnsetType = UNSET
    parent_subagent_run_id: str | UnsetType = UNSET
    parent_tool_call_id: str | UnsetType = UNSET
    parent_message_id: str | UnsetType = UNSET


class SubagentFinishedSuccessOutcome(_Outcome, frozen=True, kw_only=True, tag="success"):
    pass


class SubagentFinishedSuspendedOutcome(_Outcome, frozen=True, kw_only=True, tag="suspended"):
    interrupt_ids: list[str] | UnsetType = UNSET


class SubagentFinishedEvent(_Event, frozen=True, kw_only=True, tag="SUBAGENT_FINISHED"):
    subagent_run_id: str
    result: Any | UnsetType = UNSET
    outcome: SubagentFinishedSuccessOutcome | SubagentFinishedSuspendedOutcome | UnsetType = UNSET


class SubagentErrorEvent(_Event, frozen=True, kw_only=True, tag="SUBAGENT_ERROR"):
    subagent_run_id: str
    message: str
    code: str | UnsetType = UNSET


Event = (
    RunStartedEvent
    | RunFinishedEvent
    | RunErrorEvent
    | StepStartedEvent
    | StepFinishedEvent
    | TextMessageStartEvent
    | TextMessageContentEvent
    | TextMessageEndEvent
    | ToolCallStartEvent
    | ToolCallArgsEvent
    | ToolCallEndEvent
    | ToolCallResultEvent
    | StateSnapshotEvent
    | StateDeltaEvent
    | MessagesSnapshotEvent
    | RawEvent
    | CustomEvent
    | TextMessageChunkEvent
    | ToolCallChunkEvent
    | ActivitySnapshotEvent
    | ActivityDeltaEvent
    | ReasoningStartEvent
    | ReasoningMessageStartEvent
    | ReasoningMessageContentEvent
    | ReasoningMessageEndEvent
    | ReasoningMessageChunkEvent
    | ReasoningEndEvent
    | ReasoningEncryptedValueEvent
    | SubagentStartedEvent
    | SubagentFinishedEvent
    | SubagentErrorEvent
)

_encoder = msgspec.json.Encoder()
_decoder: msgspec.json.Decoder[Event] = msgspec.json.Decoder(Event)


def encode_event(event: Event) -> bytes:
    """The event as compact JSON (one line: JSON strings escape newlines)."""
    return _encoder.encode(event)


def decode_event(data: bytes | str) -> Event:
    """Parse one event we emitted earlier (e.g. from a thread log)."""
    return _decoder.decode(data)
