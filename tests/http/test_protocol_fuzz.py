"""A seeded hypothesis pass over the protocol routes of a real ``pausemesh demo`` process.

Five families, 300 requests each (1,500 in all): ``/agui`` (runs and connect), the thread
snapshot and its tail, ``/mcp`` (JSON-RPC), ``/a2a`` JSON-RPC and ``/a2a`` REST. Each request is
a valid one that hypothesis changes (a fixed seed, no example database, so every run sends the
same requests): members dropped, added or given values of other types (lone surrogates,
``NaN``, huge numbers and strings, nested containers), the bytes truncated, spoiled with
invalid UTF-8, ``NaN`` or deep nesting, batched, and odd content types, ``Last-Event-ID``
values and path segments. (The REST API is fuzzed from its OpenAPI document by
``test_openapi_fuzz.py``.)

Every answer must be a clear one: no 5xx, no dropped connection or cut stream, no internal
error text. Afterwards the server log holds no traceback and a valid conversation still books
exactly once. Findings are pinned in ``test_fuzz_regressions.py``.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, note, seed, settings
from hypothesis import strategies as st

from tests.e2e.agui_helpers import ask, bookings, new_thread, resolved, resume_body
from tests.support.agui import post_run
from tests.support.server import ServerProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

SEED = 20261201
CASES_PER_FAMILY = 300

# Python's words for its own failures; none may reach a client.
_INTERNAL = re.compile(
    r"Traceback|codec|recursion|pydantic|msgspec|File \"|"
    r"\b(Value|Type|Key|Attribute|Index|Runtime|Assertion|Unicode\w*|Recursion|Lookup|"
    r"NotImplemented|Validation|JSONDecode|Decode)Error\b"
)
_SSE_PROBE_BYTES = 64_000
_A2A_VERSION = {"A2A-Version": "1.0"}


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: bytes | None = None
    headers: Mapping[str, str | bytes] = field(default_factory=dict)


# -- mutations ------------------------------------------------------------------------

_ODD_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),  # NaN and infinities too: the encoder writes them as bare words
    st.text(max_size=40),
    st.integers(min_value=1, max_value=5000).map(lambda n: "x" * n),
    st.sampled_from(["", "\ud800", "\udfff", "a/b", "²", "\u0000\u202e\U0001f600", "..", "%00"]),
)
_ODD_VALUES = st.recursive(
    _ODD_LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)
_CONTENT_TYPES = [
    "text/plain",
    "application/json; charset=latin-1",
    "application/x-www-form-urlencoded",
]
_AFTER_VALUES = ["-1", "9" * 40, "1e3", "7 7", "", "%C2%B2"]
_LAST_EVENT_IDS: list[str | bytes] = [b"\xb2", "-1", "9" * 40, "1e3", "7 7", ""]
# The thread or task id in a path (a thread id is "thread-<uuid>", a task id a uuid).
_ID = re.compile(
    r"thread-[0-9a-f-]{36}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
)
# Header bytes a client may send (visible ASCII and obs-text; no controls).
_HEADER_VALUES = st.binary(max_size=24).map(
    lambda raw: bytes(b if 0x21 <= b <= 0x7E or b >= 0x80 else 0x41 for b in raw)
)
_SEGMENT_TEXT = st.text(alphabet="abcAZ09%/.-_~+²é\u00ff", min_size=1, max_size=40)
_SEGMENTS = ["%C2%B2", "%2F", "..", "%00", "a" * 300, "%ED%A0%80", "%FF"]


def _mutate_value(data: st.DataObject, value: Any, depth: int = 0) -> Any:
    """One structural change somewhere inside ``value``."""
    containers = isinstance(value, (dict, list)) and value and depth < 6
    action = data.draw(
        st.sampled_from(["descend", "delete", "add", "replace"] if containers else ["replace"])
    )
    if action == "replace":
        return data.draw(_ODD_VALUES)
    if isinstance(value, list):
        index = data.draw(st.integers(0, len(value) - 1))
        copy_list = list(value)
        if action == "delete":
            del copy_list[index]
        elif action == "add":
            copy_list.insert(index, data.draw(_ODD_VALUES))
        else:
            copy_list[index] = _mutate_value(data, value[index], depth + 1)
        return copy_list
    key = data.draw(st.sampled_from(sorted(value)))
    copy = dict(value)
    if action == "delete":
        del copy[key]
    elif action == "add":
        copy[data.draw(st.sampled_from(["unknown", key + "X", "__proto__"]))] = data.draw(
            _ODD_VALUES
        )
    else:
        copy[key] = _mutate_value(data, value[key], depth + 1)
    return copy


def _encode(value: Any) -> bytes:
    # json keeps lone surrogates as \ud800 escapes (what a hostile client sends).
    return json.dumps(value).encode()


def _mutate_bytes(data: st.DataObject, body: bytes) -> bytes:
    kind = data.draw(st.sampled_from(["truncate", "byte", "nan", "deep", "batch"]))
    if kind == "truncate":
        return body[: data.draw(st.integers(0, len(body)))]
    if kind == "byte":
        spot = data.draw(st.integers(0, len(body)))
        byte = data.draw(st.sampled_from([0xFF, 0xC3, 0x80, 0xED, 0x00]))
        return body[:spot] + bytes([byte]) + body[spot:]
    if kind == "nan":
        return body.replace(b"1", b"NaN", 1) if b"1" in body else body + b"NaN"
    if kind == "deep":
        depth = data.draw(st.sampled_from([300, 5000, 10_000]))
        return body.replace(b"{", b"{" + b'"d":' + b"[" * depth + b"]" * depth + b",", 1)
    return b"[" + body + b"," + body + b"]"


def _mutate(data: st.DataObject, base: Request) -> Request:
    body = base.body
    headers = dict(base.headers)
    path = base.path
    if body is not None:
        if data.draw(st.booleans()):
            body = _encode(_mutate_value(data, json.loads(body)))
        if data.draw(st.booleans()):
            body = _mutate_bytes(data, body)
    where = data.draw(st.sampled_from(["none", "content-type", "last-event-id", "path", "after"]))
    if where == "content-type":
        headers["content-type"] = data.draw(st.sampled_from(_CONTENT_TYPES))
    elif where == "last-event-id":
        headers["last-event-id"] = data.draw(st.sampled_from(_LAST_EVENT_IDS) | _HEADER_VALUES)
    elif where == "path":
        path = _ID.sub(data.draw(st.sampled_from(_SEGMENTS) | _SEGMENT_TEXT), path)
    elif where == "after":
        after = data.draw(st.sampled_from(_AFTER_VALUES) | _SEGMENT_TEXT)
        path = path.split("?")[0] + "?after=" + after
    return replace(base, path=path, body=body, headers=headers)


# -- the valid requests ---------------------------------------------------------------


def _run_input(thread_id: str) -> dict[str, Any]:
    return {
        "threadId": thread_id,
        "runId": f"run-{uuid.uuid4()}",
        "messages": [{"id": "u-1", "role": "user", "content": "Book me a flight to Lisbon"}],
        "state": {"bookings": []},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


def _message(text: str, **extra: Any) -> dict[str, Any]:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    message.update(extra)
    return {"message": message, "metadata": {"score": 1}}


def _agui(thread_id: str) -> list[Request]:
    return [
        Request("POST", "/agui", _encode(_run_input(thread_id))),
        Request("POST", "/agui/connect", _encode(_run_input(thread_id))),
    ]


def _threads(thread_id: str) -> list[Request]:
    return [
        Request("GET", f"/agui/threads/{thread_id}"),
        Request("GET", f"/agui/threads/{thread_id}/events?after=1"),
        Request("GET", f"/agui/threads/{thread_id}/events", headers={"last-event-id": "1"}),
    ]


def _mcp() -> list[Request]:
    headers = {"accept": "application/json, text/event-stream"}
    calls = [
        {"name": "book_flight", "arguments": {"destination": "Paris"}},
        {"name": "unknown_tool", "arguments": {}},
    ]
    return [
        Request(
            "POST",
            "/mcp",
            _encode({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}),
            headers,
        )
        for call in calls
    ] + [
        Request(
            "POST", "/mcp", _encode({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}), headers
        ),
        Request(
            "POST",
            "/mcp",
            _encode(
                {
                    "jsonrpc": "2.0",
                    "id": 3,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {"elicitation": {}},
                        "clientInfo": {"name": "fuzz", "version": "1"},
                    },
                }
            ),
            headers,
        ),
    ]


def _a2a_jsonrpc(task_id: str) -> list[Request]:
    def rpc(method: str, params: dict[str, Any]) -> bytes:
        return _encode({"jsonrpc": "2.0", "id": "req-1", "method": method, "params": params})

    json_headers = {"content-type": "application/json", **_A2A_VERSION}
    return [
        Request("POST", "/a2a/jsonrpc", rpc("SendMessage", _message("Hi")), json_headers),
        Request(
            "POST",
            "/a2a/jsonrpc",
            rpc("SendMessage", _message("PM202", taskId=task_id)),
            json_headers,
        ),
        Request("POST", "/a2a/jsonrpc", rpc("SendStreamingMessage", _message("Hi")), json_headers),
        Request("POST", "/a2a/jsonrpc", rpc("GetTask", {"id": task_id}), json_headers),
        Request("POST", "/a2a/jsonrpc", rpc("CancelTask", {"id": task_id}), json_headers),
    ]


def _a2a_rest(task_id: str) -> list[Request]:
    json_headers = {"content-type": "application/json", **_A2A_VERSION}
    return [
        Request("POST", "/a2a/rest/message:send", _encode(_message("Hi")), json_headers),
        Request("POST", "/a2a/rest/message:stream", _encode(_message("Hi")), json_headers),
        Request("GET", f"/a2a/rest/tasks/{task_id}", headers=dict(_A2A_VERSION)),
        Request("POST", f"/a2a/rest/tasks/{task_id}:cancel", b"{}", json_headers),
    ]


# -- the pass -------------------------------------------------------------------------


@pytest.fixture(name="server", scope="module")
def server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data: Path = tmp_path_factory.mktemp("protocol-fuzz")
    server = ServerProcess(
        ["demo", "--no-browser", "--database-path", str(data / "pausemesh.db")],
        env={"PAUSEMESH_DATA_DIR": str(data), "PAUSEMESH_KEEPALIVE_SECONDS": "0.2"},
    )
    with server:
        yield server


def _send(http: httpx.Client, request: Request) -> tuple[int, str]:
    """The status and (the head of) the body; a dropped connection or a cut chunk raises."""
    given_headers = dict(request.headers)
    if request.body is not None:
        given_headers.setdefault("content-type", "application/json")
    headers = [
        (name.encode(), value if isinstance(value, bytes) else value.encode())
        for name, value in given_headers.items()
    ]
    with http.stream(request.method, request.path, content=request.body, headers=headers) as r:
        if r.headers.get("content-type", "").startswith("text/event-stream"):
            text = ""
            for chunk in r.iter_text():
                text += chunk
                # A tail never ends by itself: its first frames are enough.
                if "/events" in request.path and len(text) > 0:
                    break
                if len(text) > _SSE_PROBE_BYTES:
                    break
            return r.status_code, text
        return r.status_code, r.read().decode(errors="replace")


def _a2a_task(http: httpx.Client) -> str:
    response = http.post(
        "/a2a/rest/message:send",
        json=_message("Book me a flight to Paris"),
        headers=_A2A_VERSION,
    )
    assert response.status_code == 200, response.text
    task_id: str = response.json()["task"]["id"]
    return task_id


def _finding(http: httpx.Client, request: Request) -> str | None:
    """What is wrong with the answer to ``request`` (None: a clear one)."""
    try:
        status, text = _send(http, request)
    except httpx.TransportError as error:
        return f"dropped ({error!r})"
    if status >= 500:
        return f"{status} {text[:300]}"
    if _INTERNAL.search(text):
        return f"leaks {text[:300]}"
    return None


def _fuzz(http: httpx.Client, seeds: list[Request]) -> None:
    """``CASES_PER_FAMILY`` changed copies of ``seeds``, each answered clearly."""

    @seed(SEED)
    @settings(
        max_examples=CASES_PER_FAMILY,
        database=None,
        deadline=None,
        # Every example is a request to the server: find, report, do not shrink against it.
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def answered_clearly(data: st.DataObject) -> None:
        request = _mutate(data, data.draw(st.sampled_from(seeds)))
        note(repr(request)[:2000])
        sent.append(request)
        finding = _finding(http, request)
        assert finding is None, finding

    sent: list[Request] = []
    answered_clearly()
    # Hypothesis stops early when it runs out of distinct cases: the pass must be whole.
    assert len(sent) == CASES_PER_FAMILY


def test_mutated_protocol_requests_get_clear_answers_and_a_booking_still_happens_once(
    server: ServerProcess,
) -> None:
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        thread_id = new_thread()
        ask(http, thread_id)
        task_id = _a2a_task(http)
        families = {
            "agui": _agui(thread_id),
            "threads": _threads(thread_id),
            "mcp": _mcp(),
            "a2a-jsonrpc": _a2a_jsonrpc(task_id),
            "a2a-rest": _a2a_rest(task_id),
        }
        for seeds in families.values():
            _fuzz(http, seeds)

        log = server.output()
        assert "Traceback" not in log, log[-5000:]
        assert " ERROR " not in log, log[-5000:]

        # After the pass the server still does its job: one question, one booking.
        thread_id = new_thread()
        [interrupt] = ask(http, thread_id).interrupts
        answer = resume_body(thread_id, [resolved(interrupt["id"])])
        assert post_run(http, answer).last["type"] == "RUN_FINISHED"
        post_run(http, answer)  # the same answer again: a replay, never a second booking
        assert [b["flight"] for b in bookings(http, thread_id)] == ["PM202"]
