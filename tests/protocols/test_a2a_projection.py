"""A2A 1.0 task and message projections at TypeScript-reference parity (§4), checked by a2a-sdk."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec
import pytest
from a2a.types import SendMessageRequest, SendMessageResponse, Task, TaskState
from a2a.utils.proto_utils import validate_proto_required_fields
from google.protobuf.json_format import (  # type: ignore[import-untyped]
    MessageToDict,
    ParseDict,
)

from pausemesh.a2a.task import (
    A2ATaskBinding,
    decode_a2a_task_binding,
    to_a2a_authorization_control_message,
    to_a2a_input_message,
    to_a2a_interrupted_task,
)
from pausemesh.core.errors import ProtocolAdapterError
from pausemesh.core.model import ContinuationStatus
from tests.support.continuations import make_continuation

BINDING = A2ATaskBinding(task_id="task-1", context_id="thread-1")


INPUT = make_continuation({"kind": "input", "message": "Which flight?", "responseSchema": {}})
AUTH = make_continuation({"kind": "authorization", "message": "Sign in", "secret": "hunter2"})


def code_of(call: Any, *args: Any) -> str:
    with pytest.raises(ProtocolAdapterError) as caught:
        call(*args)
    return caught.value.code


def sdk_task(response: dict[str, Any]) -> Task:
    parsed = ParseDict(response, SendMessageResponse())
    validate_proto_required_fields(parsed)
    # Nothing was dropped: the SDK's own rendering is what we produced (protobuf renders
    # whole-second timestamps without the ".000", so those compare as instants).
    rendered = MessageToDict(parsed)
    ours = msgspec.json.decode(msgspec.json.encode(response))
    stamps = [doc["task"]["status"].pop("timestamp") for doc in (rendered, ours)]
    assert rendered == ours
    assert datetime.fromisoformat(stamps[0]) == datetime.fromisoformat(stamps[1])
    task: Task = parsed.task
    return task


def test_an_input_pause_is_an_input_required_task_the_sdk_accepts() -> None:
    response = to_a2a_interrupted_task(INPUT, BINDING)

    assert response == {
        "task": {
            "id": "task-1",
            "contextId": "thread-1",
            "status": {
                "state": "TASK_STATE_INPUT_REQUIRED",
                "message": {
                    "role": "ROLE_AGENT",
                    "messageId": "cont-1",
                    "contextId": "thread-1",
                    "taskId": "task-1",
                    "parts": [{"text": "Which flight?"}],
                },
                "timestamp": "2026-11-29T12:00:00.000Z",
            },
            "metadata": {
                "pausemesh": {
                    "continuationId": "cont-1",
                    "expiresAt": "2026-11-29T12:15:00.000Z",
                    "schemaVersion": 1,
                }
            },
        }
    }
    task = sdk_task(response)
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED


def test_an_authorization_pause_is_auth_required_and_carries_only_the_explanation() -> None:
    response = to_a2a_interrupted_task(AUTH, BINDING)

    task = sdk_task(response)
    assert task.status.state == TaskState.TASK_STATE_AUTH_REQUIRED
    assert response["task"]["status"]["message"]["parts"] == [{"text": "Sign in"}]
    assert "hunter2" not in msgspec.json.encode(response).decode()


def test_a_payload_without_kind_is_an_input_pause() -> None:
    response = to_a2a_interrupted_task(make_continuation({"message": "Go?"}), BINDING)
    assert response["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


def test_the_task_id_is_always_the_server_issued_one() -> None:
    continuation = make_continuation(
        {"message": "x", "taskId": "from-payload"}, continuation_id="task-from-id"
    )
    response = to_a2a_interrupted_task(continuation, BINDING)
    assert response["task"]["id"] == "task-1"


@pytest.mark.parametrize("status", ["resumed", "cancelled", "expired"])
def test_terminal_continuations_are_not_projected_or_answered(status: ContinuationStatus) -> None:
    continuation = make_continuation({"message": "x"}, status=status)
    assert code_of(to_a2a_interrupted_task, continuation, BINDING) == "INVALID_PROTOCOL_TRANSITION"
    assert code_of(to_a2a_input_message, continuation, BINDING, {}, "m1") == (
        "INVALID_PROTOCOL_TRANSITION"
    )


@pytest.mark.parametrize(
    "payload",
    [None, "text", {"message": ""}, {"message": 1}, {"kind": "other", "message": "x"}, {}],
)
def test_a_malformed_payload_is_an_invalid_message(payload: Any) -> None:
    assert code_of(to_a2a_interrupted_task, make_continuation(payload), BINDING) == (
        "INVALID_PROTOCOL_MESSAGE"
    )


def test_a_continuation_id_with_edge_whitespace_is_an_invalid_message() -> None:
    continuation = make_continuation({"message": "x"}, continuation_id="cont-1 ")
    assert code_of(to_a2a_interrupted_task, continuation, BINDING) == "INVALID_PROTOCOL_MESSAGE"


@pytest.mark.parametrize(
    "body",
    [
        {"taskId": "task-1"},
        {"contextId": "thread-1"},
        {"taskId": "task-1", "contextId": "thread-1", "continuationId": "cont-1"},
        {"taskId": " task-1", "contextId": "thread-1"},
        {"taskId": "", "contextId": "thread-1"},
        {"taskId": 1, "contextId": "thread-1"},
        [],
    ],
)
def test_a_malformed_binding_is_an_invalid_binding(body: Any) -> None:
    assert code_of(decode_a2a_task_binding, body) == "INVALID_PROTOCOL_BINDING"


def test_a_binding_decodes_from_camel_case() -> None:
    body = {"taskId": "task 1", "contextId": "thread-1"}
    assert decode_a2a_task_binding(body) == A2ATaskBinding(task_id="task 1", context_id="thread-1")


def test_the_context_must_be_the_continuations_correlation_id() -> None:
    other = A2ATaskBinding(task_id="task-1", context_id="thread-2")
    assert code_of(to_a2a_interrupted_task, INPUT, other) == "INVALID_PROTOCOL_BINDING"
    assert code_of(to_a2a_input_message, INPUT, other, {}, "m1") == "INVALID_PROTOCOL_BINDING"


@pytest.mark.parametrize(
    "response",
    [{"flight": "PM202"}, ["a", 1], "PM202", 3, 2.5, True, None],
    ids=["object", "array", "string", "int", "float", "bool", "null"],
)
def test_an_input_message_carries_any_json_answer_as_a_data_part(response: Any) -> None:
    request = to_a2a_input_message(INPUT, BINDING, response, "msg-1")

    assert request == {
        "message": {
            "taskId": "task-1",
            "contextId": "thread-1",
            "role": "ROLE_USER",
            "messageId": "msg-1",
            "parts": [{"data": response}],
            "metadata": {"pausemesh": {"continuationId": "cont-1", "schemaVersion": 1}},
        }
    }
    parsed = ParseDict(request, SendMessageRequest())
    validate_proto_required_fields(parsed)
    assert parsed.message.task_id == "task-1"


def test_authorization_credentials_never_travel_in_an_input_message() -> None:
    assert code_of(to_a2a_input_message, AUTH, BINDING, {"token": "x"}, "m1") == (
        "INVALID_PROTOCOL_TRANSITION"
    )


@pytest.mark.parametrize("message_id", ["", " m1", "m1\n", 5])
def test_a_bad_message_id_is_an_invalid_message(message_id: Any) -> None:
    assert code_of(to_a2a_input_message, INPUT, BINDING, {}, message_id) == (
        "INVALID_PROTOCOL_MESSAGE"
    )
    assert code_of(to_a2a_authorization_control_message, AUTH, BINDING, "retry", message_id) == (
        "INVALID_PROTOCOL_MESSAGE"
    )


@pytest.mark.parametrize("response", [{1, 2}, float("nan"), {"a": object()}])
def test_a_non_json_answer_is_an_invalid_message(response: Any) -> None:
    assert code_of(to_a2a_input_message, INPUT, BINDING, response, "m1") == (
        "INVALID_PROTOCOL_MESSAGE"
    )


@pytest.mark.parametrize("action", ["reject", "retry"])
def test_the_authorization_control_message_carries_only_the_action(action: str) -> None:
    request = to_a2a_authorization_control_message(AUTH, BINDING, action, "msg-2")
    assert request["message"]["parts"] == [{"data": {"action": action}}]
    validate_proto_required_fields(ParseDict(request, SendMessageRequest()))


def test_the_control_message_needs_an_authorization_pause_and_a_known_action() -> None:
    assert code_of(to_a2a_authorization_control_message, INPUT, BINDING, "retry", "m1") == (
        "INVALID_PROTOCOL_TRANSITION"
    )
    assert code_of(to_a2a_authorization_control_message, AUTH, BINDING, "approve", "m1") == (
        "INVALID_PROTOCOL_MESSAGE"
    )
