"""What a seeded fuzz pass over every route family found, each pinned as a named regression.

Each case once ended in a 500, a cut stream or an error message carrying Python text; each is
now a clear refusal. They run against one real ``pausemesh demo`` process (AG-UI, REST, MCP
and A2A on one SQLite file), and the server log must stay free of tracebacks.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from tests.support.agui import run_body
from tests.support.rest import assert_problem
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

_PYTHON_TEXT = ("codec", "recursion", "Traceback", "Error executing tool", "utf-8")
_MCP_HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
}


@pytest.fixture(name="server", scope="module")
def server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data: Path = tmp_path_factory.mktemp("fuzz-regressions")
    server = ServerProcess(
        ["demo", "--no-browser", "--database-path", str(data / "pausemesh.db")],
        env={"PAUSEMESH_DATA_DIR": str(data)},
    )
    with server:
        yield server
        assert "Traceback" not in server.output()
        assert " ERROR " not in server.output()


@pytest.fixture(name="http")
def http_fixture(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        yield client


def _no_python_text(text: str) -> None:
    for fragment in _PYTHON_TEXT:
        assert fragment not in text, text


def test_a_non_ascii_digit_in_last_event_id_is_a_400(http: httpx.Client) -> None:
    # "²".isdigit() is True, int("²") raises: the header once reached int() and made a 500.
    response = http.get("/agui/threads/t-1/events", headers={b"last-event-id": b"\xb2"})
    assert_problem(response, 400, "INVALID_CURSOR")


def test_a_non_ascii_digit_in_after_is_a_400(http: httpx.Client) -> None:
    response = http.get("/agui/threads/t-1/events?after=%C2%B2")
    assert_problem(response, 400, "INVALID_CURSOR")


def test_a_thread_id_with_a_slash_is_refused_before_the_run(http: httpx.Client) -> None:
    response = http.post("/agui", json=run_body("a/b", "r-1", messages=[]))
    assert_problem(response, 400, "INVALID_ID")


def test_a_continuation_id_with_a_slash_is_refused_at_creation(http: httpx.Client) -> None:
    response = http.post("/v1/continuations", json={"payload": 1, "continuationId": "pay/42"})
    assert_problem(response, 400, "INVALID_ID")
    # The same id without the slash is fine, and reachable afterwards.
    created = http.post("/v1/continuations", json={"payload": 1, "continuationId": "pay-42"})
    assert created.status_code == 201, created.text
    assert http.get("/v1/continuations/pay-42").status_code == 200


def _mcp_call(arguments_json: bytes) -> bytes:
    return (
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book_flight",'
        b'"arguments":' + arguments_json + b"}}"
    )


def test_a_lone_surrogate_in_an_mcp_tool_argument_is_a_parse_error(http: httpx.Client) -> None:
    response = http.post(
        "/mcp", content=_mcp_call(b'{"destination":"\\ud800"}'), headers=_MCP_HEADERS
    )
    assert response.status_code == 400
    body = response.json()
    assert body["id"] is None
    assert body["error"]["code"] == -32700
    _no_python_text(response.text)


def _jsonrpc(http: httpx.Client, content: bytes) -> dict[str, Any]:
    response = http.post(
        "/a2a/jsonrpc", content=content, headers={"content-type": "application/json"}
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    _no_python_text(response.text)
    body: dict[str, Any] = response.json()
    return body


def _send_message(method: str, request_id: bytes) -> bytes:
    message = {
        "message": {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [{"text": "Book me a flight to Paris"}],
        }
    }
    params = msgspec.json.encode(message)
    return (
        b'{"jsonrpc":"2.0","id":'
        + request_id
        + b',"method":"'
        + method.encode()
        + b'","params":'
        + params
        + b"}"
    )


@pytest.mark.parametrize("method", ["SendMessage", "SendStreamingMessage"])
def test_an_a2a_jsonrpc_id_with_a_lone_surrogate_is_a_parse_error(
    http: httpx.Client, method: str
) -> None:
    body = _jsonrpc(http, _send_message(method, b'"\\ud800"'))
    assert body["error"]["code"] == -32700
    assert body["id"] is None


@pytest.mark.parametrize(
    "content",
    [
        _send_message("SendMessage", b"1").replace(b"Paris", b"Par\xffis"),
        b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":'
        + b"[" * 10_000
        + b"]" * 10_000
        + b"}",
    ],
    ids=["invalid-utf8", "nested-10000-deep"],
)
def test_an_a2a_jsonrpc_body_that_is_not_json_text_is_a_parse_error(
    http: httpx.Client, content: bytes
) -> None:
    body = _jsonrpc(http, content)
    assert body["error"]["code"] == -32700


@pytest.mark.parametrize(
    "content",
    [
        msgspec.json.encode(
            {
                "message": {
                    "messageId": "m-1",
                    "role": "ROLE_USER",
                    "parts": [{"text": "Paris"}],
                }
            }
        ).replace(b"Paris", b"Par\xffis"),
        (
            b'{"message":{"messageId":"m-2","role":"ROLE_USER","parts":[{"text":"Paris"}]},'
            b'"metadata":{"score":NaN}}'
        ),
    ],
    ids=["invalid-utf8", "nan-in-metadata"],
)
def test_an_a2a_rest_body_that_is_not_json_text_is_a_400(
    http: httpx.Client, content: bytes
) -> None:
    response = http.post(
        "/a2a/rest/message:send", content=content, headers={"content-type": "application/json"}
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["status"] == "INVALID_ARGUMENT"
    _no_python_text(response.text)


@pytest.mark.parametrize(
    "content",
    [
        b"null",
        b'"a/b"',
        b"{}",
        b'{"id": 1, "method": "tools/list"}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": "x"}',
        b'{"jsonrpc": "2.0", "id": true, "method": "tools/list"}',
    ],
    ids=["null", "a-string", "empty-object", "no-jsonrpc", "params-not-an-object", "bool-id"],
)
def test_mcp_json_that_is_not_a_jsonrpc_message_is_an_invalid_request_in_plain_words(
    http: httpx.Client, content: bytes
) -> None:
    # The SDK's answer echoed pydantic's validation report (types, input values, a URL).
    response = http.post("/mcp", content=content, headers=_MCP_HEADERS)
    assert response.status_code == 400
    body = response.json()
    assert body["error"]["code"] == -32600
    assert "pydantic" not in response.text
    assert "validation error" not in response.text.lower()
    _no_python_text(response.text)


@pytest.mark.parametrize(
    ("content", "expected_id"),
    [
        (b'{"jsonrpc": "1.0", "id": 7, "method": "tools/list"}', 7),
        (b'{"jsonrpc": "2.0", "id": "req-1", "method": "tools/call", "params": "x"}', "req-1"),
        (b'{"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}', None),
    ],
    ids=["version-1.0", "params-not-an-object", "unreadable-id"],
)
def test_an_invalid_mcp_request_echoes_its_readable_id(
    http: httpx.Client, content: bytes, expected_id: object
) -> None:
    response = http.post("/mcp", content=content, headers=_MCP_HEADERS)
    assert response.json()["error"]["code"] == -32600
    assert response.json()["id"] == expected_id


def test_an_a2a_jsonrpc_request_whose_params_are_not_an_object_is_an_invalid_request(
    http: httpx.Client,
) -> None:
    # The SDK answered -32600 too, but logged an ERROR with a traceback first.
    body = _jsonrpc(
        http, b'{"jsonrpc":"2.0","id":"req-1","method":"SendMessage","params":"\\u202e"}'
    )
    assert body["error"]["code"] == -32600


@pytest.mark.parametrize("content", [b"4.2e307", b"true", b"[]", b'"x"'])
def test_an_a2a_rest_body_that_is_json_but_not_an_object_is_a_400_in_plain_words(
    http: httpx.Client, content: bytes
) -> None:
    # The SDK answered "Failed to parse JSON: TypeError: 'float' object is not iterable."
    response = http.post(
        "/a2a/rest/message:send",
        content=content,
        headers={"content-type": "application/json", "A2A-Version": "1.0"},
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert "TypeError" not in response.text
    _no_python_text(response.text)


def test_an_a2a_jsonrpc_request_whose_params_do_not_parse_is_invalid_params_without_an_error_log(
    http: httpx.Client, server: ServerProcess
) -> None:
    # The SDK logged this client mistake as an ERROR with a protobuf traceback.
    message = b'{"messageId":"m-1","role":' + b"9" * 400 + b',"parts":[{"text":"Hi"}]}'
    body = _jsonrpc(
        http,
        b'{"jsonrpc":"2.0","id":"req-1","method":"SendMessage","params":{"message":'
        + message
        + b"}}",
    )
    assert body["error"]["code"] == -32602
    assert "Failed to parse request params" in server.wait_for_output("Failed to parse")
