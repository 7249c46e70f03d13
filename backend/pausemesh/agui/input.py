"""Decoding AG-UI ``RunAgentInput`` (what a client POSTs to start or resume a run).

``decode_run_input`` bounds the JSON before typing it (depth and node count), tolerates
what real clients send — ``null`` for an absent optional field (the official Python SDK
and older clients do this), unknown members (ignored) — and raises ``InvalidInputError``
with code ``INVALID_RUN_INPUT`` and a message naming the offending path otherwise.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from pausemesh.agui.messages import Message
from pausemesh.agui.preflight import DEFAULT_MAX_DEPTH, DEFAULT_MAX_NODES, passes_preflight
from pausemesh.core.errors import InvalidInputError
from pausemesh.core.threads import PROTOCOL_THREAD_PREFIXES
from pausemesh.core.validation import check_id, check_routable_id

__all__ = (
    "Context",
    "ResumeEntry",
    "ResumeStatus",
    "RunAgentInput",
    "Tool",
    "check_thread_id",
    "convert_run_input",
    "decode_run_input",
    "read_run_input",
)

ResumeStatus = Literal["resolved", "cancelled"]


class _Wire(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    pass


class Tool(_Wire, frozen=True, kw_only=True):
    """A frontend tool the client offers."""

    name: str
    description: str
    parameters: Any | UnsetType = UNSET
    metadata: dict[str, Any] | UnsetType = UNSET


class Context(_Wire, frozen=True, kw_only=True):
    description: str
    value: str


class ResumeEntry(_Wire, frozen=True, kw_only=True):
    """One answer to one interrupt. ``payload`` is UNSET when absent (``null`` is a value)."""

    interrupt_id: str
    status: ResumeStatus
    payload: Any | UnsetType = UNSET
    metadata: dict[str, Any] | UnsetType = UNSET


class RunAgentInput(_Wire, frozen=True, kw_only=True, omit_defaults=False):
    """The body of ``POST /agui``. Absent ``state``/``tools``/``context`` mean ``{}``/``[]``.

    Encoded (as the ``RUN_STARTED.input`` echo) with those three always present, as the
    official TS client sends them and its schema fills them in; other optionals are omitted.

    ``resume`` stays UNSET when absent, which is not the same as an empty list: a run on a
    thread with open interrupts and no ``resume`` at all is a different refusal.
    """

    thread_id: str
    run_id: str
    messages: list[Message]
    protocol_version: str | UnsetType = UNSET
    parent_run_id: str | UnsetType = UNSET
    state: Any = msgspec.field(default_factory=dict)
    tools: list[Tool] = msgspec.field(default_factory=list)
    context: list[Context] = msgspec.field(default_factory=list)
    forwarded_props: Any | UnsetType = UNSET
    resume: list[ResumeEntry] | UnsetType = UNSET


# Optional members whose ``null`` means "absent" (clients that serialise None).
_NULLABLE_TOP = frozenset(
    ("protocolVersion", "parentRunId", "state", "tools", "context", "forwardedProps", "resume")
)
_NULLABLE_MESSAGE = frozenset(
    ("name", "encryptedValue", "metadata", "subagentRunId", "toolCalls", "error")
)
# An assistant message with ``content: null`` (tool calls only) means no content.
_NULLABLE_ASSISTANT = _NULLABLE_MESSAGE | {"content"}


def _drop_message_nulls(message: dict[str, Any]) -> dict[str, Any]:
    nullable = _NULLABLE_ASSISTANT if message.get("role") == "assistant" else _NULLABLE_MESSAGE
    return {k: v for k, v in message.items() if not (v is None and k in nullable)}


def _drop_nulls(raw: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in raw.items() if not (v is None and k in _NULLABLE_TOP)}
    messages = out.get("messages")
    if isinstance(messages, list):
        out["messages"] = [_drop_message_nulls(m) if isinstance(m, dict) else m for m in messages]
    return out


def convert_run_input(
    raw: object,
    *,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_nodes: int = DEFAULT_MAX_NODES,
) -> RunAgentInput:
    """Type an already-parsed JSON value as ``RunAgentInput`` (bounded first)."""
    if not passes_preflight((raw,), max_depth=max_depth, max_nodes=max_nodes):
        msg = "AG-UI run input is nested too deeply or is too large"
        raise InvalidInputError(msg, code="INVALID_RUN_INPUT")
    if not isinstance(raw, dict):
        msg = "AG-UI run input must be a JSON object"
        raise InvalidInputError(msg, code="INVALID_RUN_INPUT")
    try:
        return msgspec.convert(_drop_nulls(raw), RunAgentInput, strict=True)
    except msgspec.ValidationError as error:
        msg = f"AG-UI run input is not valid: {error}"
        raise InvalidInputError(msg, code="INVALID_RUN_INPUT") from None


def decode_run_input(
    body: bytes | str,
    *,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_nodes: int = DEFAULT_MAX_NODES,
) -> RunAgentInput:
    """Parse and type a ``RunAgentInput`` request body; ``InvalidInputError`` if it is not one."""
    try:
        raw = msgspec.json.decode(body)
    except (msgspec.DecodeError, RecursionError):
        msg = "AG-UI run input is not valid JSON"
        raise InvalidInputError(msg, code="INVALID_RUN_INPUT") from None
    return convert_run_input(raw, max_depth=max_depth, max_nodes=max_nodes)


def check_thread_id(value: object) -> str:
    """An AG-UI thread id: an opaque id outside the prefixes other protocols reserve."""
    thread_id = check_routable_id(value, "threadId")
    if thread_id.startswith(PROTOCOL_THREAD_PREFIXES):
        msg = "threadId uses a prefix reserved for another protocol's records"
        raise InvalidInputError(msg, code="INVALID_ID", field="threadId")
    return thread_id


def read_run_input(body: bytes) -> RunAgentInput:
    """A request body as a validated ``RunAgentInput`` (4xx errors before any stream starts).

    The one place a run's input is bounded (preflight) and typed; everything after it works on
    the typed value.
    """
    run_input = decode_run_input(body)
    check_thread_id(run_input.thread_id)
    check_id(run_input.run_id, "runId")
    return run_input
