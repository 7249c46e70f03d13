"""AG-UI 1.0 messages and content parts as frozen msgspec Structs (camelCase, no nulls).

``Message`` is a tagged union on ``role``; ``ContentPart`` on ``type``. Optional fields
default to ``UNSET`` and are omitted on the wire ("absent means absent").
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

__all__ = (
    "ActivityMessage",
    "AssistantMessage",
    "AudioPart",
    "ContentPart",
    "DataSource",
    "DeveloperMessage",
    "DocumentPart",
    "FileSource",
    "FunctionCall",
    "ImagePart",
    "Message",
    "ReasoningMessage",
    "SystemMessage",
    "TextPart",
    "ToolCall",
    "ToolMessage",
    "UrlSource",
    "UserMessage",
    "VideoPart",
)


class _Wire(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    pass


# --- content parts -------------------------------------------------------------------------


class _Source(_Wire, frozen=True, kw_only=True, tag_field="type"):
    pass


class DataSource(_Source, frozen=True, kw_only=True, tag="data"):
    value: str
    mime_type: str


class UrlSource(_Source, frozen=True, kw_only=True, tag="url"):
    value: str
    mime_type: str | UnsetType = UNSET


class FileSource(_Source, frozen=True, kw_only=True, tag="file"):
    value: str
    provider: str | UnsetType = UNSET
    mime_type: str | UnsetType = UNSET


Source = DataSource | UrlSource | FileSource


class _Part(_Wire, frozen=True, kw_only=True, tag_field="type"):
    id: str | UnsetType = UNSET
    metadata: dict[str, Any] | UnsetType = UNSET


class TextPart(_Part, frozen=True, kw_only=True, tag="text"):
    text: str


class ImagePart(_Part, frozen=True, kw_only=True, tag="image"):
    source: Source


class AudioPart(_Part, frozen=True, kw_only=True, tag="audio"):
    source: Source


class VideoPart(_Part, frozen=True, kw_only=True, tag="video"):
    source: Source


class DocumentPart(_Part, frozen=True, kw_only=True, tag="document"):
    source: Source


ContentPart = TextPart | ImagePart | AudioPart | VideoPart | DocumentPart


# --- messages -------------------------------------------------------------------------------


class FunctionCall(_Wire, frozen=True, kw_only=True):
    name: str
    # The arguments as JSON *text*, kept as the model wrote it.
    arguments: str


class ToolCall(_Wire, frozen=True, kw_only=True, tag_field="type", tag="function"):
    # ``type: "function"`` is the tag, so it is always on the wire and checked on input.
    id: str
    function: FunctionCall
    encrypted_value: str | UnsetType = UNSET
    metadata: dict[str, Any] | UnsetType = UNSET


class _Message(_Wire, frozen=True, kw_only=True, tag_field="role"):
    id: str
    subagent_run_id: str | UnsetType = UNSET
    metadata: dict[str, Any] | UnsetType = UNSET


class DeveloperMessage(_Message, frozen=True, kw_only=True, tag="developer"):
    content: str
    name: str | UnsetType = UNSET
    encrypted_value: str | UnsetType = UNSET


class SystemMessage(_Message, frozen=True, kw_only=True, tag="system"):
    content: str
    name: str | UnsetType = UNSET
    encrypted_value: str | UnsetType = UNSET


class AssistantMessage(_Message, frozen=True, kw_only=True, tag="assistant"):
    content: str | UnsetType = UNSET
    tool_calls: list[ToolCall] | UnsetType = UNSET
    name: str | UnsetType = UNSET
    encrypted_value: str | UnsetType = UNSET


class UserMessage(_Message, frozen=True, kw_only=True, tag="user"):
    content: str | list[ContentPart]
    name: str | UnsetType = UNSET
    encrypted_value: str | UnsetType = UNSET


class ToolMessage(_Message, frozen=True, kw_only=True, tag="tool"):
    content: str | list[ContentPart]
    tool_call_id: str
    error: str | UnsetType = UNSET
    encrypted_value: str | UnsetType = UNSET


class ActivityMessage(_Message, frozen=True, kw_only=True, tag="activity"):
    activity_type: str
    content: dict[str, Any]


class ReasoningMessage(_Message, frozen=True, kw_only=True, tag="reasoning"):
    content: str
    encrypted_value: str | UnsetType = UNSET


Message = (
    DeveloperMessage
    | SystemMessage
    | AssistantMessage
    | UserMessage
    | ToolMessage
    | ActivityMessage
    | ReasoningMessage
)
