"""What a run's events do to the thread: its messages, its state, and what is still open.

The run host folds every event the agent yields into a ``Transcript`` so that the thread record
(and the snapshots a reload gets) match what a client applying the same events would hold, and
so that it can close whatever the agent left open before ``RUN_FINISHED``.
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec

from pausemesh.agui.events import (
    Event,
    MessagesSnapshotEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from pausemesh.core.errors import InvalidInputError

__all__ = ("Transcript", "apply_json_patch")


class Transcript:
    """The run's view of the thread's messages and state.

    ``messages`` is the newest part of the history: the stored messages from position ``base``
    on (the run reads a window, not the whole thread), then the run's own. An event naming a
    message older than the window starts a new one (as ``@ag-ui/client`` does for a parent
    that is not the last message). ``dirty_from`` is the first position the run added or
    changed (None: none): the store rewrites from there, nothing before it. ``removed``: the
    ids of messages a rollback took out (the save remembers them, so they never come back).
    """

    def __init__(
        self,
        messages: list[dict[str, Any]],
        state: Any,
        *,
        base: int = 0,
        dirty_from: int | None = None,
    ) -> None:
        self.messages = messages
        self.state = state
        self.base = base
        self.dirty_from = dirty_from
        self.removed: list[str] = []
        self._open_text: list[str] = []
        self._open_tools: list[str] = []
        self._open_steps: list[str] = []

    @property
    def changed(self) -> list[dict[str, Any]]:
        """The messages from ``dirty_from`` on (what a save writes)."""
        if self.dirty_from is None:
            return []
        return self.messages[self.dirty_from - self.base :]

    @property
    def end(self) -> int:
        """The position after the last message."""
        return self.base + len(self.messages)

    def _touch(self, index: int) -> None:
        position = self.base + index
        if self.dirty_from is None or position < self.dirty_from:
            self.dirty_from = position

    def _append(self, message: dict[str, Any]) -> None:
        self._touch(len(self.messages))
        self.messages.append(message)

    def _find(self, message_id: str) -> int | None:
        for index in range(len(self.messages) - 1, -1, -1):
            if self.messages[index].get("id") == message_id:
                return index
        return None

    def _message(self, message_id: str) -> dict[str, Any] | None:
        index = self._find(message_id)
        return None if index is None else self.messages[index]

    def apply(self, event: Event) -> None:  # noqa: PLR0912 - one branch per event kind
        """Fold one event in; ``InvalidInputError`` for an event out of order."""
        if isinstance(event, TextMessageStartEvent):
            _refuse_if(event.message_id in self._open_text, "text message is already open")
            self._open_text.append(event.message_id)
            if self._message(event.message_id) is None:
                role = "assistant" if event.role is msgspec.UNSET else event.role
                self._append({"id": event.message_id, "role": role, "content": ""})
        elif isinstance(event, TextMessageContentEvent):
            _refuse_if(event.message_id not in self._open_text, "text message is not open")
            index = self._find(event.message_id)
            if index is not None:
                message = self.messages[index]
                message["content"] = str(message.get("content", "")) + event.delta
                self._touch(index)
        elif isinstance(event, TextMessageEndEvent):
            _refuse_if(event.message_id not in self._open_text, "text message is not open")
            self._open_text.remove(event.message_id)
        elif isinstance(event, ToolCallStartEvent):
            _refuse_if(event.tool_call_id in self._open_tools, "tool call is already open")
            self._open_tools.append(event.tool_call_id)
            self._start_tool_call(event)
        elif isinstance(event, ToolCallArgsEvent):
            _refuse_if(event.tool_call_id not in self._open_tools, "tool call is not open")
            found = self._tool_call(event.tool_call_id)
            if found is not None:
                index, call = found
                call["function"]["arguments"] += event.delta
                self._touch(index)
        elif isinstance(event, ToolCallEndEvent):
            _refuse_if(event.tool_call_id not in self._open_tools, "tool call is not open")
            self._open_tools.remove(event.tool_call_id)
        elif isinstance(event, ToolCallResultEvent):
            self._append(
                {
                    "id": event.message_id,
                    "role": "tool",
                    "toolCallId": event.tool_call_id,
                    "content": msgspec.to_builtins(event.content),
                }
            )
        elif isinstance(event, StepStartedEvent):
            _refuse_if(event.step_name in self._open_steps, "step is already open")
            self._open_steps.append(event.step_name)
        elif isinstance(event, StepFinishedEvent):
            _refuse_if(event.step_name not in self._open_steps, "step is not open")
            self._open_steps.remove(event.step_name)
        elif isinstance(event, MessagesSnapshotEvent):
            # The agent replaces the whole history: the store rewrites it from the start.
            self.messages = msgspec.to_builtins(event.messages)
            self.base = 0
            self.dirty_from = 0
        elif isinstance(event, StateSnapshotEvent):
            self.state = copy.deepcopy(event.snapshot)
        elif isinstance(event, StateDeltaEvent):
            self.state = apply_json_patch(self.state, event.delta)

    def _start_tool_call(self, event: ToolCallStartEvent) -> None:
        parent_id = (
            event.tool_call_id
            if event.parent_message_id is msgspec.UNSET
            else event.parent_message_id
        )
        index = self._find(parent_id)
        if index is None or self.messages[index].get("role") != "assistant":
            parent: dict[str, Any] = {"id": parent_id, "role": "assistant"}
            self._append(parent)
        else:
            parent = self.messages[index]
        calls = parent.setdefault("toolCalls", [])
        if not any(c.get("id") == event.tool_call_id for c in calls):
            self._touch(len(self.messages) - 1 if index is None else index)
            calls.append(
                {
                    "id": event.tool_call_id,
                    "type": "function",
                    "function": {"name": event.tool_call_name, "arguments": ""},
                }
            )

    def _tool_call(self, tool_call_id: str) -> tuple[int, dict[str, Any]] | None:
        for index in range(len(self.messages) - 1, -1, -1):
            for call in self.messages[index].get("toolCalls", ()):
                if call.get("id") == tool_call_id:
                    result: dict[str, Any] = call
                    return index, result
        return None

    def closing_events(self) -> list[Event]:
        """END events for everything still open (innermost first), already folded in."""
        events: list[Event] = [ToolCallEndEvent(tool_call_id=i) for i in reversed(self._open_tools)]
        events += [TextMessageEndEvent(message_id=i) for i in reversed(self._open_text)]
        events += [StepFinishedEvent(step_name=s) for s in reversed(self._open_steps)]
        for event in events:
            self.apply(event)
        return events


def _refuse_if(condition: bool, message: str) -> None:
    if condition:
        raise InvalidInputError(f"agent event out of order: {message}", code="AGENT_PROTOCOL_ERROR")


# --- RFC 6902 JSON Patch (what STATE_DELTA carries) -------------------------------------------


def _tokens(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        msg = f"invalid JSON pointer {pointer!r}"
        raise InvalidInputError(msg, code="AGENT_PROTOCOL_ERROR")
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def _index(container: list[Any], part: str, *, for_add: bool) -> int:
    if for_add and part == "-":  # the end of the array
        return len(container)
    if not part.isdigit() or (len(part) > 1 and part.startswith("0")):
        msg = f"invalid array index {part!r}"
        raise InvalidInputError(msg, code="AGENT_PROTOCOL_ERROR")
    index = int(part)
    if index > len(container) or (not for_add and index == len(container)):
        msg = f"array index {index} out of range"
        raise InvalidInputError(msg, code="AGENT_PROTOCOL_ERROR")
    return index


def _parent(doc: Any, tokens: list[str]) -> Any:
    target = doc
    for token in tokens[:-1]:
        if isinstance(target, list):
            target = target[_index(target, token, for_add=False)]
        elif isinstance(target, dict) and token in target:
            target = target[token]
        else:
            msg = "JSON patch path does not exist"
            raise InvalidInputError(msg, code="AGENT_PROTOCOL_ERROR")
    return target


def _get(doc: Any, pointer: str) -> Any:
    tokens = _tokens(pointer)
    if not tokens:
        return doc
    parent = _parent(doc, tokens)
    if isinstance(parent, list):
        return parent[_index(parent, tokens[-1], for_add=False)]
    if isinstance(parent, dict) and tokens[-1] in parent:
        return parent[tokens[-1]]
    msg = "JSON patch path does not exist"
    raise InvalidInputError(msg, code="AGENT_PROTOCOL_ERROR")


def _remove(doc: Any, pointer: str) -> Any:
    tokens = _tokens(pointer)
    if not tokens:  # the state must stay a document; an agent can replace it, not delete it
        msg = "JSON patch cannot remove the document root"
        raise InvalidInputError(msg, code="AGENT_PROTOCOL_ERROR")
    value = _get(doc, pointer)
    parent = _parent(doc, tokens)
    if isinstance(parent, list):
        del parent[_index(parent, tokens[-1], for_add=False)]
    else:
        del parent[tokens[-1]]
    return value


def _add(doc: Any, pointer: str, value: Any) -> Any:
    tokens = _tokens(pointer)
    if not tokens:
        return value
    parent = _parent(doc, tokens)
    if isinstance(parent, list):
        parent.insert(_index(parent, tokens[-1], for_add=True), value)
    elif isinstance(parent, dict):
        parent[tokens[-1]] = value
    else:
        msg = "JSON patch target is not a container"
        raise InvalidInputError(msg, code="AGENT_PROTOCOL_ERROR")
    return doc


def apply_json_patch(document: Any, operations: list[dict[str, Any]]) -> Any:
    """Apply ``operations`` to a copy of ``document``; all or nothing."""
    doc = copy.deepcopy(document)
    for op in operations:
        kind, path = op.get("op"), op.get("path", "")
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            if _tokens(path):  # the root is replaced whole; elsewhere the target must exist
                _remove(doc, path)
            doc = _add(doc, path, copy.deepcopy(op.get("value")))
        elif kind in ("move", "copy"):
            value = _get(doc, op.get("from", ""))
            if kind == "move":
                _remove(doc, op.get("from", ""))
            doc = _add(doc, path, copy.deepcopy(value))
        elif kind == "test":
            if _get(doc, path) != op.get("value"):
                msg = "JSON patch test failed"
                raise InvalidInputError(msg, code="AGENT_PROTOCOL_ERROR")
        else:
            msg = f"unknown JSON patch op {kind!r}"
            raise InvalidInputError(msg, code="AGENT_PROTOCOL_ERROR")
    return doc
