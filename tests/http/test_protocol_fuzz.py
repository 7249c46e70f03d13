"""A seeded fuzz pass over the protocol routes of a real ``pausemesh demo`` process.

``/agui`` (runs and connect), the thread snapshot and its tail, ``/mcp`` (JSON-RPC) and
``/a2a`` (JSON-RPC and REST), each from valid requests mutated at random (a fixed seed, a
bounded number of cases): values of other types, dropped and unknown members, lone
surrogates, NaN, deep nesting, invalid UTF-8, truncations, odd headers and path segments.
(The REST API is fuzzed from its OpenAPI document by ``test_openapi_fuzz.py``.)

Every answer must be a clear one: no 5xx, no dropped connection or cut stream, no internal
error text. Afterwards the server log holds no traceback and a valid conversation still books
exactly once. Findings are pinned in ``test_fuzz_regressions.py``.
"""

from __future__ import annotations

import json
import random
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.agui_helpers import ask, bookings, new_thread, resolved, resume_body
from tests.support.agui import post_run
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

SEED = 20261201
CASES_PER_FAMILY = 150

# Python's words for its own failures; none may reach a client.
_INTERNAL = re.compile(
    r"Traceback|codec|recursion|pydantic|msgspec|File \"|"
    r"\b(Value|Type|Key|Attribute|Index|Runtime|Assertion|Unicode\w*|Recursion|Lookup|"
    r"NotImplemented|Validation|JSONDecode|Decode)Error\b"
)
_SSE_PROBE_BYTES = 64_000
_A2A_VERSION = {"A2A-Version": "1.0"}


@dataclass
class Request:
    method: str
    path: str
    body: bytes | None = None
    headers: dict[str, str | bytes] = field(default_factory=dict)


# -- mutations ------------------------------------------------------------------------


def _odd_value(rng: random.Random) -> Any:
    choices: list[Callable[[], Any]] = [
        lambda: None,
        lambda: rng.choice([True, False]),
        lambda: rng.randint(-(2**70), 2**70),
        lambda: rng.random() * 1e308,
        lambda: "",
        lambda: "x" * rng.randint(1, 5000),
        lambda: "\ud800",  # a lone surrogate (escaped by the encoder below)
        lambda: "a/b",
        lambda: "²",
        lambda: "\u0000\u202e\U0001f600",
        list,
        dict,
        lambda: [[[[[[[[1]]]]]]]],
        lambda: {"k": {"k": {"k": None}}},
    ]
    return rng.choice(choices)()


def _mutate_value(value: Any, rng: random.Random, depth: int = 0) -> Any:
    """One structural change somewhere inside ``value``."""
    if isinstance(value, dict) and value and depth < 6 and rng.random() < 0.7:
        key = rng.choice(list(value))
        copy = dict(value)
        roll = rng.random()
        if roll < 0.2:
            del copy[key]
        elif roll < 0.3:
            copy[f"unknown{rng.randint(0, 9)}"] = _odd_value(rng)
        else:
            copy[key] = _mutate_value(value[key], rng, depth + 1)
        return copy
    if isinstance(value, list) and value and depth < 6 and rng.random() < 0.7:
        index = rng.randrange(len(value))
        copy = list(value)
        copy[index] = _mutate_value(value[index], rng, depth + 1)
        return copy
    return _odd_value(rng)


def _encode(value: Any) -> bytes:
    # json keeps lone surrogates as \ud800 escapes (what a hostile client sends).
    return json.dumps(value).encode()


def _mutate_bytes(body: bytes, rng: random.Random) -> bytes:
    roll = rng.random()
    if roll < 0.2:
        return body[: rng.randrange(len(body) + 1)]
    if roll < 0.35:
        spot = rng.randrange(len(body) + 1)
        return body[:spot] + bytes([rng.choice([0xFF, 0xC3, 0x80, 0xED, 0x00])]) + body[spot:]
    if roll < 0.5:
        return body.replace(b"1", b"NaN", 1) if b"1" in body else body + b"NaN"
    if roll < 0.6:
        depth = rng.choice([300, 5000])
        return body.replace(b"{", b"{" + b'"d":' + b"[" * depth + b"]" * depth + b",", 1)
    if roll < 0.7:
        return b"[" + body + b"," + body + b"]"
    return body


def _mutate(base: Request, rng: random.Random) -> Request:
    request = Request(base.method, base.path, base.body, dict(base.headers))
    if request.body is not None:
        if rng.random() < 0.6:
            request.body = _encode(_mutate_value(json.loads(request.body), rng))
        if rng.random() < 0.4:
            request.body = _mutate_bytes(request.body, rng)
    roll = rng.random()
    if roll < 0.08:
        request.headers["content-type"] = rng.choice(
            ["text/plain", "application/json; charset=latin-1", "application/x-www-form-urlencoded"]
        )
    elif roll < 0.14:
        request.headers["last-event-id"] = rng.choice([b"\xb2", "-1", "9" * 40, "1e3", "7 7", ""])
    elif roll < 0.2:
        segment = rng.choice(["%C2%B2", "%2F", "..", "%00", "a" * 300, "%ED%A0%80", "%FF"])
        request.path = re.sub(r"thread-[0-9a-f-]+|task-[0-9a-f-]+", segment, request.path)
    return request


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
        Request("GET", f"/agui/threads/{thread_id}"),
        Request("GET", f"/agui/threads/{thread_id}/events?after=1"),
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


def _a2a(task_id: str) -> list[Request]:
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
        Request("POST", "/a2a/jsonrpc", rpc("GetTask", {"id": task_id}), json_headers),
        Request("POST", "/a2a/jsonrpc", rpc("CancelTask", {"id": task_id}), json_headers),
        Request("POST", "/a2a/rest/message:send", _encode(_message("Hi")), json_headers),
        Request("GET", f"/a2a/rest/tasks/{task_id}", headers=dict(_A2A_VERSION)),
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
    headers = dict(request.headers)
    if request.body is not None:
        headers.setdefault("content-type", "application/json")
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


def test_mutated_protocol_requests_get_clear_answers_and_a_booking_still_happens_once(
    server: ServerProcess,
) -> None:
    rng = random.Random(SEED)
    findings: list[str] = []
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        thread_id = new_thread()
        ask(http, thread_id)
        families = {
            "agui": _agui(thread_id),
            "mcp": _mcp(),
            "a2a": _a2a(_a2a_task(http)),
        }
        for family, seeds in families.items():
            for case in range(CASES_PER_FAMILY):
                request = _mutate(rng.choice(seeds), rng)
                try:
                    status, text = _send(http, request)
                except httpx.TransportError as error:
                    findings.append(f"{family}#{case} {request}: dropped ({error!r})")
                    continue
                if status >= 500:
                    findings.append(f"{family}#{case} {request}: {status} {text[:300]}")
                elif _INTERNAL.search(text):
                    findings.append(f"{family}#{case} {request}: leaks {text[:300]}")

        assert not findings, "\n".join(findings)
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
