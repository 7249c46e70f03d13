"""Reading an answer out of an A2A follow-up message, and checking it against its pause.

An input pause is answered with a ``data`` part (any JSON value) or a text part holding JSON;
the answer must satisfy the pause's ``responseSchema`` (Draft 2020-12, format checks on).
An authorization pause only accepts the narrow ``{"action": "reject" | "retry"}`` control:
credentials never travel in A2A messages (A2A §7.6). Violations are the A2A
``InvalidParamsError`` so the client sees the protocol's own error and the task stays
interrupted.
"""

from __future__ import annotations

import json
from typing import Any

from a2a.types import Message
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
from jsonschema.exceptions import best_match

from pausemesh.core.model import Continuation
from pausemesh.core.pause import parse_pause_payload
from pausemesh.core.schema import SchemaValidatorCache

__all__ = ("answer_of", "check_answer")


def answer_of(message: Message | None) -> Any:
    """The first ``data`` part's value, else the JSON in the text; InvalidParams if neither."""
    if message is None:
        raise InvalidParamsError(message="The follow-up message carries no answer")
    for part in message.parts:
        if part.HasField("data"):
            return MessageToDict(part)["data"]
    text = "".join(part.text for part in message.parts if part.HasField("text")).strip()
    if text:
        try:
            return json.loads(text)
        except ValueError:
            pass
    raise InvalidParamsError(message="Answer with a data part (JSON) that fits the question")


def check_answer(continuation: Continuation, answer: Any, validators: SchemaValidatorCache) -> None:
    try:
        pause = parse_pause_payload(continuation.payload)
    except (TypeError, ValueError):
        raise InvalidParamsError(message="This task's pause cannot be answered") from None
    if pause.kind == "authorization":
        if not (
            isinstance(answer, dict)
            and set(answer) == {"action"}
            and answer["action"] in {"reject", "retry"}
        ):
            raise InvalidParamsError(
                message="Authorization is completed out of band; only"
                ' {"action": "reject" | "retry"} may be sent here'
            )
        return
    schema = pause.response_schema
    if schema is None:
        return
    error = best_match(validators.validator_for(schema).iter_errors(answer))
    if error is not None:
        where = "/".join(str(step) for step in error.absolute_path) or "(root)"
        raise InvalidParamsError(
            message=f"The answer does not fit the question at {where}: {error.message}"
        )
