"""Reading an answer out of an A2A follow-up message, and checking it against its pause.

An input pause is answered with a ``data`` part (any JSON value) or a text part holding JSON;
the answer must satisfy the pause's ``responseSchema`` (Draft 2020-12, format checks on). A
generic client (or a person typing in a generic A2A chat) sends plain text: where the question
has exactly one field (an object with one property, or a bare value), text that reads as a valid
value of it is the answer (``text_answer``: an enum value, yes/no for a boolean, a number, any
text for a free string), wrapped in the field's object; anything else is refused naming the
expected answers.
An authorization pause only accepts the narrow ``{"action": "reject" | "retry"}`` control (as
data, JSON text, or the plain word ``retry`` / ``reject``, any case: ``control_answer``):
credentials never travel in A2A messages (A2A §7.6). Violations are the A2A
``InvalidParamsError`` so the client sees the protocol's own error and the task stays
interrupted.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from a2a.types import Message
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
from jsonschema.exceptions import best_match

from pausemesh.core.model import Continuation
from pausemesh.core.pause import parse_pause_payload
from pausemesh.core.schema import SchemaValidatorCache

__all__ = (
    "NO_DATA",
    "answer_of",
    "checked_answer",
    "control_answer",
    "data_answer",
    "input_answer",
    "text_answer",
)


_NO_ANSWER = "Answer with a data part (JSON) that fits the question"
_YES = frozenset({"yes", "y", "true"})
_NO = frozenset({"no", "n", "false"})
_INTEGER = re.compile(r"^[+-]?\d+$")
NO_DATA = object()


def data_answer(message: Message | None) -> Any:
    """The first ``data`` part's value (``None`` is a valid one), or ``NO_DATA`` without one."""
    if message is None:
        return NO_DATA
    for part in message.parts:
        if part.HasField("data"):
            return MessageToDict(part)["data"]
    return NO_DATA


def _text_of(message: Message | None) -> str:
    if message is None:
        return ""
    return "".join(part.text for part in message.parts if part.HasField("text")).strip()


def answer_of(message: Message | None) -> Any:
    """The first ``data`` part's value, else the JSON in the text; InvalidParams if neither."""
    if message is None:
        raise InvalidParamsError(message="The follow-up message carries no answer")
    data = data_answer(message)
    if data is not NO_DATA:
        return data
    text = _text_of(message)
    if text:
        try:
            return json.loads(text)
        except ValueError:
            pass
    raise InvalidParamsError(message=_NO_ANSWER)


_CONTROLS = frozenset({"retry", "reject"})
_CONTROL_ONLY = (
    "Authorization is completed out of band; only"
    ' {"action": "reject" | "retry"} (or the word retry or reject) may be sent here'
)


def control_answer(message: Message | None) -> Any:
    """An authorization pause's control: a data part, JSON text, or the word retry / reject."""
    if data_answer(message) is NO_DATA:
        word = _text_of(message).casefold()
        if word in _CONTROLS:
            return {"action": word}
    try:
        return answer_of(message)
    except InvalidParamsError:
        raise InvalidParamsError(message=_CONTROL_ONLY) from None


def input_answer(
    message: Message | None,
    schema: Mapping[str, Any] | None,
    validators: SchemaValidatorCache,
) -> Any:
    """The answer a follow-up gives to an input pause asking with ``schema``: its data part,
    else its text read against the question (``text_answer``)."""
    data = data_answer(message)
    if data is not NO_DATA:
        return data
    text = _text_of(message)
    if not text:
        raise InvalidParamsError(message="The follow-up message carries no answer")
    return text_answer(text, schema, validators)


def _one_field(schema: Mapping[str, Any] | None) -> tuple[str | None, Mapping[str, Any]] | None:
    """(name, schema) of a one-field question: an object with exactly one property (name), or
    a bare value (no name); None for anything else."""
    if schema is None:
        return None
    properties = schema.get("properties")
    if schema.get("type") == "object" or isinstance(properties, Mapping):
        if isinstance(properties, Mapping) and len(properties) == 1:
            ((name, field),) = properties.items()
            if isinstance(field, Mapping):
                return str(name), field
        return None
    if "enum" in schema or schema.get("type") in {"string", "boolean", "integer", "number"}:
        return None, schema
    return None


def _choice(text: str, choices: list[Any]) -> Any:
    """The enum value ``text`` names (exactly, else ignoring case), or ``NO_DATA``."""
    shown = [(c if isinstance(c, str) else json.dumps(c), c) for c in choices]
    exact = [choice for name, choice in shown if name == text]
    loose = [choice for name, choice in shown if name.casefold() == text.casefold()]
    return (exact or loose or [NO_DATA])[0]


def _boolean(text: str) -> Any:
    lowered = text.casefold()
    return True if lowered in _YES else False if lowered in _NO else NO_DATA


def _integer(text: str) -> Any:
    return int(text) if _INTEGER.match(text) else NO_DATA


def _number(text: str) -> Any:
    if _INTEGER.match(text):
        return int(text)
    try:
        number = float(text)
    except ValueError:
        return NO_DATA
    return number if math.isfinite(number) else NO_DATA


_READERS: dict[str, Callable[[str], Any]] = {
    "boolean": _boolean,
    "integer": _integer,
    "number": _number,
    "string": lambda text: text,
}


def _read_value(text: str, field: Mapping[str, Any]) -> Any:
    """``text`` as a value of ``field`` (``NO_DATA`` if it reads as none)."""
    choices = field.get("enum")
    if isinstance(choices, list):
        return _choice(text, choices)
    reader = _READERS.get(str(field.get("type")))
    return NO_DATA if reader is None else reader(text)


def _expected(field: Mapping[str, Any]) -> str:
    choices = field.get("enum")
    if isinstance(choices, list):
        shown = (c if isinstance(c, str) else json.dumps(c) for c in choices)
        return "one of: " + ", ".join(shown)
    return {
        "boolean": "yes or no",
        "integer": "an integer",
        "number": "a number",
        "string": "a text",
    }.get(str(field.get("type")), "a value")


def text_answer(
    text: str,
    schema: Mapping[str, Any] | None,
    validators: SchemaValidatorCache | None = None,
) -> Any:
    """The answer a text follow-up gives to the question ``schema`` asks.

    JSON text that fits the question is the answer as it stands; otherwise, for a one-field
    question, the text read as that field's value (wrapped in the field's object); anything
    else is ``InvalidParamsError`` naming the expected answers.
    """
    validators = validators or SchemaValidatorCache()
    text = text.strip()
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = NO_DATA
    if parsed is not NO_DATA and (schema is None or _fits(validators, schema, parsed)):
        return parsed
    one = _one_field(schema)
    if schema is None or one is None:
        raise InvalidParamsError(message=_NO_ANSWER)
    name, field = one
    value = _read_value(text, field)
    expected = _expected(field) + ("" if name is None else f" for {name!r}")
    if value is NO_DATA:
        raise InvalidParamsError(
            message=f"Answer with {expected} (or a data part with the JSON answer)"
        )
    answer = value if name is None else {name: value}
    fault = _fault(validators, schema, answer)
    if fault is not None:
        raise InvalidParamsError(message=f"{fault}; answer with {expected}")
    return answer


def _fits(validators: SchemaValidatorCache, schema: Mapping[str, Any], answer: Any) -> bool:
    return _fault(validators, schema, answer) is None


def _fault(validators: SchemaValidatorCache, schema: Mapping[str, Any], answer: Any) -> str | None:
    """Why ``answer`` does not fit ``schema`` (None when it does)."""
    error = best_match(validators.validator_for(schema).iter_errors(answer))
    if error is None:
        return None
    where = "/".join(str(step) for step in error.absolute_path) or "(root)"
    return f"The answer does not fit the question at {where}: {error.message}"


def checked_answer(
    continuation: Continuation, message: Message | None, validators: SchemaValidatorCache
) -> Any:
    """The answer ``message`` gives to ``continuation``'s pause; InvalidParams if it does not
    fit (an input pause: its question; an authorization pause: the narrow control)."""
    try:
        pause = parse_pause_payload(continuation.payload)
    except (TypeError, ValueError):
        raise InvalidParamsError(message="This task's pause cannot be answered") from None
    if pause.kind == "authorization":
        answer = control_answer(message)
        if not (
            isinstance(answer, dict) and set(answer) == {"action"} and answer["action"] in _CONTROLS
        ):
            raise InvalidParamsError(message=_CONTROL_ONLY)
        return answer
    schema = pause.response_schema
    answer = input_answer(message, schema, validators)
    fault = None if schema is None else _fault(validators, schema, answer)
    if fault is not None:
        raise InvalidParamsError(message=fault)
    return answer
