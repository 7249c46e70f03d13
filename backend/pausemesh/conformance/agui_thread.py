"""What an AG-UI client keeps of a thread, the bodies it sends, and answers to a question.

A client that talks to a stateless server (one that keeps nothing between runs) must send the
history back with every run: the thread folds each run's events into messages and state the
way ``@ag-ui/client`` does (a ``MESSAGES_SNAPSHOT`` replaces the messages, text and tool-call
events add to them, a ``STATE_SNAPSHOT`` replaces the state; ``STATE_DELTA`` is not applied).
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from pausemesh.conformance.sse import Reply

__all__ = ("ClientThread", "breaking_answer", "valid_answer")

# Answers tried, in order, for one that a question's schema refuses.
_BREAKING_CANDIDATES: tuple[Any, ...] = ({}, "conformance: not an answer", 12345, [], True)


class ClientThread:
    """One thread as a client sees it: its id, its messages and its state."""

    def __init__(self, state: Any, forwarded_props: Any) -> None:
        self.thread_id = f"conformance-{uuid.uuid4()}"
        self.messages: list[dict[str, Any]] = []
        self.state = copy.deepcopy(state)
        self.forwarded_props = forwarded_props
        self._runs = 0

    def say(self, text: str) -> None:
        """A user message, added to the history the next run sends."""
        self.messages.append({"id": f"user-{uuid.uuid4()}", "role": "user", "content": text})

    def body(self, resume: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
        """The next run's ``RunAgentInput`` (a new run id each time)."""
        self._runs += 1
        body: dict[str, Any] = {
            "threadId": self.thread_id,
            "runId": f"{self.thread_id}-run-{self._runs}",
            "messages": copy.deepcopy(self.messages),
            "state": copy.deepcopy(self.state),
            "tools": [],
            "context": [],
            "forwardedProps": copy.deepcopy(self.forwarded_props),
        }
        if resume is not None:
            body["resume"] = [dict(entry) for entry in resume]
        return body

    def apply(self, reply: Reply) -> None:
        """Fold a run's events into the messages and the state."""
        by_id = {m["id"]: m for m in self.messages}
        calls: dict[str, dict[str, Any]] = {}
        for event in reply.events:
            kind = event.get("type")
            if kind == "MESSAGES_SNAPSHOT" and isinstance(event.get("messages"), list):
                self.messages = copy.deepcopy(event["messages"])
                by_id = {m.get("id"): m for m in self.messages if isinstance(m, dict)}
            elif kind == "STATE_SNAPSHOT":
                self.state = copy.deepcopy(event.get("snapshot"))
            elif kind in {"TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CHUNK"}:
                self._text(by_id, event)
            elif kind in {"TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_CHUNK"}:
                self._tool_call(by_id, calls, event)
            elif kind == "TOOL_CALL_RESULT":
                message = {
                    "id": event.get("messageId", f"tool-{uuid.uuid4()}"),
                    "role": "tool",
                    "toolCallId": event.get("toolCallId"),
                    "content": event.get("content", ""),
                }
                self.messages.append(message)
                by_id[message["id"]] = message

    def _text(self, by_id: dict[Any, dict[str, Any]], event: Mapping[str, Any]) -> None:
        message_id = event.get("messageId")
        message = by_id.get(message_id)
        if message is None:
            message = {"id": message_id, "role": event.get("role", "assistant"), "content": ""}
            self.messages.append(message)
            by_id[message_id] = message
        delta = event.get("delta")
        if isinstance(delta, str):
            message["content"] = (message.get("content") or "") + delta

    def _tool_call(
        self,
        by_id: dict[Any, dict[str, Any]],
        calls: dict[str, dict[str, Any]],
        event: Mapping[str, Any],
    ) -> None:
        call_id = event.get("toolCallId")
        call = calls.get(call_id) if isinstance(call_id, str) else None
        if call is None and isinstance(call_id, str) and "toolCallName" in event:
            parent_id = event.get("parentMessageId") or f"assistant-{call_id}"
            parent = by_id.get(parent_id)
            if parent is None:
                parent = {"id": parent_id, "role": "assistant", "content": ""}
                self.messages.append(parent)
                by_id[parent_id] = parent
            call = {
                "id": call_id,
                "type": "function",
                "function": {"name": event["toolCallName"], "arguments": ""},
            }
            parent.setdefault("toolCalls", []).append(call)
            calls[call_id] = call
        delta = event.get("delta")
        if call is not None and isinstance(delta, str):
            call["function"]["arguments"] += delta


def _validator(schema: Mapping[str, Any]) -> Draft202012Validator | None:
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError:
        return None
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def _example(schema: Any) -> Any:  # noqa: PLR0911 - one case per JSON Schema keyword
    """A small instance of a schema: the first ``const``/``enum``/``default``, ``true`` for a
    boolean (an approval approves), the required properties of an object."""
    if not isinstance(schema, Mapping):
        return {}
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    for choice in ("oneOf", "anyOf"):
        if isinstance(schema.get(choice), list) and schema[choice]:
            return _example(schema[choice][0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "boolean":
        return True
    if kind in {"integer", "number"}:
        return schema.get("minimum", 1)
    if kind == "string":
        return "conformance".ljust(int(schema.get("minLength", 0)), "x")
    if kind == "array":
        return [_example(schema.get("items", {}))] * int(schema.get("minItems", 0))
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    required = schema.get("required")
    required = required if isinstance(required, list) else []
    return {name: _example(properties.get(name, {})) for name in required}


def valid_answer(interrupt: Mapping[str, Any], given: Any | None) -> Any:
    """The payload that answers a question: the scenario's, else one made from its schema,
    else ``{"approved": true}``. None when the made one does not satisfy the schema."""
    schema = interrupt.get("responseSchema")
    if given is not None:
        return given
    if not isinstance(schema, Mapping):
        return {"approved": True}
    answer = _example(schema)
    validator = _validator(schema)
    if validator is not None and not validator.is_valid(answer):
        return None
    return answer


def breaking_answer(interrupt: Mapping[str, Any], given: Any | None) -> Any | None:
    """A payload the question's ``responseSchema`` refuses (the scenario's, else the first of
    a few plain shapes that it refuses); None when it has no usable schema."""
    schema = interrupt.get("responseSchema")
    if not isinstance(schema, Mapping):
        return None
    validator = _validator(schema)
    if validator is None:
        return None
    if given is not None:
        return given if not validator.is_valid(given) else None
    return next((c for c in _BREAKING_CANDIDATES if not validator.is_valid(c)), None)
