"""A seeded hypothesis pass over the protocol routes of a real ``pausemesh demo`` process.

Five families, 300 requests each (1,500 in all; and the push family below): ``/agui`` (runs
and connect), the thread snapshot and its tail, ``/mcp`` (JSON-RPC), ``/a2a`` JSON-RPC and
``/a2a`` REST. Each request is a valid one that hypothesis changes (a fixed seed, no example
database, so every run sends the same requests): members dropped, added or given values of
other types (lone surrogates, ``NaN``, huge numbers and strings, nested containers), the
bytes truncated, spoiled with invalid UTF-8, ``NaN`` or deep nesting, batched, and odd
content types, ``Last-Event-ID`` values and path segments. (The REST API is fuzzed from its OpenAPI document by
``test_openapi_fuzz.py``.)

Every answer must be a clear one: no 5xx, no dropped connection or cut stream, no internal
error text. Afterwards the server log holds no traceback and a valid conversation still books
exactly once. Findings are pinned in ``test_fuzz_regressions.py``.

A sixth family registers A2A push webhooks (JSON-RPC and REST, on their own and with the
message that opens a task) whose URL always carries whitespace or a control character (CR,
LF, TAB, space, NUL, ESC, DEL, C1, Unicode spaces) somewhere: a request left otherwise intact
is refused saying so, and afterwards no stored webhook holds such a URL.

A seventh family sends the requests of the first five, changed the same way (the path kept, so
each still names a route), from a DNS-rebinding page: ``Host`` is a name that is not loopback
(an attacker's domain in any case, with a trailing dot, ``*.nip.io``, ``evil.localhost``,
``127.1``, a decimal or IPv4-mapped address, random names), with any port and, half the time,
that page's own ``Origin``. Every answer is 421 ``MISDIRECTED_REQUEST``, whatever the body.

A family of deadlines past ``PAUSEMESH_MAX_PAUSE_TTL_SECONDS`` (its own test): REST
``expiresAt`` up to the year 9999 in any zone, MCP task ``ttl`` up to 2**63 ms or negative.
Alone, each is refused saying so (400 ``INVALID_EXPIRY``, -32602); changed further, answered
clearly; no continuation is ever created with a deadline past the cap.
"""

from __future__ import annotations

import json
import re
import sqlite3
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, note, seed, settings
from hypothesis import strategies as st

from pausemesh.core.urls import has_unsafe_characters
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
    # The answer must refuse it, saying so (a push URL with control characters, nothing else
    # changed).
    refused_with: str | None = None
    # Sent with a rebinding Host: the answer must be 421 MISDIRECTED_REQUEST.
    misdirected: bool = False


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


_PUSH_URL = "http://93.184.215.14/hook"
_URL_CONTROLS = st.sampled_from(
    [
        *("\r\n", "\r", "\n", "\t", " ", "\x00", "\x01", "\x1b", "\x7f", "\x85"),
        *("\u00a0", "\u2028", "\u3000", "\r\nX-Injected: 1", "\n\n<html>"),
    ]
)
_URL_REFUSED = "must not contain whitespace or control characters"


def _spoil_url(data: st.DataObject) -> str:
    spot = data.draw(st.integers(0, len(_PUSH_URL)))
    return _PUSH_URL[:spot] + data.draw(_URL_CONTROLS) + _PUSH_URL[spot:]


def _replace_url(value: Any, url: str) -> Any:
    if isinstance(value, dict):
        return {k: url if k == "url" else _replace_url(v, url) for k, v in value.items()}
    return value


def _mutate_push(data: st.DataObject, base: Request) -> Request:
    """The push URL spoiled with whitespace or a control character; then, half the time,
    the usual changes on top (and no refusal expected of that answer)."""
    assert base.body is not None
    spoiled = replace(base, body=_encode(_replace_url(json.loads(base.body), _spoil_url(data))))
    if data.draw(st.booleans()):
        return _mutate(data, spoiled)
    return replace(spoiled, refused_with=_URL_REFUSED)


_REBINDING_NAMES = st.sampled_from(
    [
        "rebind.attacker.example",
        "REBIND.Attacker.Example",
        "rebind.attacker.example.",
        "127.0.0.1.nip.io",
        "localhost.attacker.example",
        "evil.localhost",
        "127.1",
        "127.0.0.2",
        "2130706433",
        "0.0.0.0",  # noqa: S104 - a Host header, not a bind
        "[::ffff:127.0.0.1]",
        "[::2]",
    ]
) | st.from_regex(r"[a-z][a-z0-9-]{0,15}(\.[a-z0-9-]{1,15}){1,3}", fullmatch=True)


def _rebinding(port: int) -> Callable[[st.DataObject, Request], Request]:
    """A request changed as ``_mutate`` does (but on its own route), sent by a page whose name
    was made to resolve to this server."""

    def mutate(data: st.DataObject, base: Request) -> Request:
        changed = replace(_mutate(data, base), path=base.path)
        name = data.draw(_REBINDING_NAMES)
        chosen = data.draw(st.sampled_from([None, port, 80, 1, 65535]))
        host = name if chosen is None else f"{name}:{chosen}"
        headers = {**changed.headers, "host": host}
        if data.draw(st.booleans()):
            headers["origin"] = f"http://{host}"
        return replace(changed, headers=headers, misdirected=True)

    return mutate


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


def _a2a_push(task_id: str) -> list[Request]:
    def rpc(method: str, params: dict[str, Any]) -> bytes:
        return _encode({"jsonrpc": "2.0", "id": "req-1", "method": method, "params": params})

    json_headers = {"content-type": "application/json", **_A2A_VERSION}
    config = {"taskId": task_id, "id": "hook-1", "url": _PUSH_URL, "token": "t"}
    opening = {
        **_message("Hi"),
        "configuration": {"taskPushNotificationConfig": {"url": _PUSH_URL}},
    }
    return [
        Request(
            "POST", "/a2a/jsonrpc", rpc("CreateTaskPushNotificationConfig", config), json_headers
        ),
        Request("POST", "/a2a/jsonrpc", rpc("SendMessage", opening), json_headers),
        Request(
            "POST",
            f"/a2a/rest/tasks/{task_id}/pushNotificationConfigs",
            _encode(config),
            json_headers,
        ),
        Request("POST", "/a2a/rest/message:send", _encode(opening), json_headers),
    ]


def _stored_push_urls(database: Path) -> list[str]:
    """Every webhook URL the server stored (read beside it)."""
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=10) as conn:
        rows = conn.execute("SELECT config_json FROM a2a_push_configs").fetchall()
    return [str(json.loads(row[0]).get("url")) for row in rows]


# -- the pass -------------------------------------------------------------------------


@pytest.fixture(name="data", scope="module")
def data_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("protocol-fuzz")


@pytest.fixture(name="server", scope="module")
def server_fixture(data: Path) -> Iterator[ServerProcess]:
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
    if request.refused_with is not None:
        # JSON-RPC refuses inside a 200 (error -32602), REST with a 400.
        refused = status == 400 or (status == 200 and '"code":-32602' in text.replace(" ", ""))
        if not (refused and request.refused_with in text):
            return f"not refused: {status} {text[:300]}"
    if request.misdirected and not (status == 421 and '"MISDIRECTED_REQUEST"' in text):
        return f"answered a rebinding Host: {status} {text[:300]}"
    return None


Mutation = Callable[[st.DataObject, Request], Request]


def _fuzz(http: httpx.Client, seeds: list[Request], mutate: Mutation = _mutate) -> None:
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
        request = mutate(data, data.draw(st.sampled_from(seeds)))
        note(repr(request)[:2000])
        sent.append(request)
        finding = _finding(http, request)
        assert finding is None, finding

    sent: list[Request] = []
    answered_clearly()
    # Hypothesis stops early when it runs out of distinct cases: the pass must be whole.
    assert len(sent) == CASES_PER_FAMILY


def test_mutated_protocol_requests_get_clear_answers_and_a_booking_still_happens_once(
    server: ServerProcess, data: Path
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
        _fuzz(http, [r for seeds in families.values() for r in seeds], _rebinding(server.port))
        _fuzz(http, _a2a_push(task_id), _mutate_push)
        stored = _stored_push_urls(data / "pausemesh.db")
        assert not [url for url in stored if has_unsafe_characters(url)], stored

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


# -- deadlines past the cap -----------------------------------------------------------


_CAP = timedelta(days=90)  # PAUSEMESH_MAX_PAUSE_TTL_SECONDS' default
_CAP_MS = int(_CAP.total_seconds()) * 1000
_CAP_SETTING = "PAUSEMESH_MAX_PAUSE_TTL_SECONDS"
_OFFSETS = [UTC, timezone(timedelta(hours=14)), timezone(-timedelta(hours=12))]
_FAR_AHEAD = timedelta(days=2_900_000)
_FAR_TTLS = st.integers(min_value=_CAP_MS + 1, max_value=2**63) | st.integers(
    min_value=-(2**63), max_value=-1
)


def _far_deadline(data: st.DataObject) -> str:
    """An ``expiresAt`` past now + the cap: the year 9999 in any zone, or any moment between."""
    if data.draw(st.booleans()):
        return data.draw(
            st.sampled_from(
                [
                    "9999-12-31T23:59:59Z",
                    "9999-12-31T23:59:59.999999-12:00",
                    "9999-12-31T23:59:59+14:00",
                    "5000-01-01T00:00:00Z",
                ]
            )
        )
    # Drawn as a distance from now (a strategy must not move with the clock): at least a day
    # past the cap, at most some 7,900 years (still before the year 9999).
    ahead = data.draw(st.timedeltas(min_value=_CAP + timedelta(days=1), max_value=_FAR_AHEAD))
    return (datetime.now(UTC) + ahead).astimezone(data.draw(st.sampled_from(_OFFSETS))).isoformat()


def _deadline_seeds() -> list[Request]:
    mcp_headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2025-11-25",
    }
    call = {"name": "book_flight", "arguments": {"destination": "Paris"}, "task": {"ttl": 1000}}
    payload = {"kind": "input", "message": "Which flight?"}
    return [
        Request("POST", "/v1/continuations", _encode({"payload": payload, "expiresAt": None})),
        Request(
            "POST",
            "/mcp",
            _encode({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}),
            mcp_headers,
        ),
    ]


def _with_far_deadline(data: st.DataObject, base: Request) -> tuple[Request, bool]:
    """``base`` with a deadline past the cap; then, half the time, the usual changes on top.
    Also whether the answer must be the refusal (nothing else was changed)."""
    assert base.body is not None
    body = json.loads(base.body)
    if base.path == "/v1/continuations":
        body["expiresAt"] = _far_deadline(data)
    else:
        body["params"]["task"]["ttl"] = data.draw(_FAR_TTLS)
    far = replace(base, body=_encode(body))
    if data.draw(st.booleans()):
        return _mutate(data, far), False
    return far, True


def _deadline_finding(http: httpx.Client, request: Request, *, refused: bool) -> str | None:
    try:
        status, text = _send(http, request)
    except httpx.TransportError as error:
        return f"dropped ({error!r})"
    if status >= 500 or _INTERNAL.search(text):
        return f"unclear: {status} {text[:300]}"
    rest = request.path == "/v1/continuations"
    if rest and status == 201:
        expires = datetime.fromisoformat(json.loads(text)["continuation"]["expiresAt"])
        if expires > datetime.now(UTC) + _CAP:
            return f"stored a deadline past the cap: {expires.isoformat()}"
    if refused and not _refuses_the_deadline(status, text, rest=rest):
        return f"not refused: {status} {text[:300]}"
    return None


def _refuses_the_deadline(status: int, text: str, *, rest: bool) -> bool:
    """REST: 400 ``INVALID_EXPIRY``; MCP: -32602 (inside a 200); both naming the setting."""
    if rest:
        said = status == 400 and '"INVALID_EXPIRY"' in text
    else:
        said = status == 200 and '"code":-32602' in text
    return said and _CAP_SETTING in text


def test_deadlines_past_the_pause_ttl_cap_are_refused_and_never_stored(
    server: ServerProcess,
) -> None:
    """REST ``expiresAt`` and MCP task ``ttl`` values past the cap (up to the year 9999, any
    zone; ttl up to 2**63 ms or negative): alone, refused saying so; changed further, answered
    clearly; a continuation created along the way never has a deadline past the cap."""
    sent: list[Request] = []

    @seed(SEED)
    @settings(
        max_examples=CASES_PER_FAMILY,
        database=None,
        deadline=None,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def refused_clearly(data: st.DataObject) -> None:
        request, refused = _with_far_deadline(data, data.draw(st.sampled_from(seeds)))
        note(repr(request)[:2000])
        sent.append(request)
        finding = _deadline_finding(http, request, refused=refused)
        assert finding is None, finding

    seeds = _deadline_seeds()
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        refused_clearly()
    assert len(sent) == CASES_PER_FAMILY
    log = server.output()
    assert "Traceback" not in log, log[-5000:]


# -- principals spelled like approver entries or another namespace --------------------

_RESERVED_PREFIXES = ("role:", "operation:", "key:")
# Close to a reserved prefix, but principals like any other (refused nothing, granted nothing).
_NEAR_MISSES = [
    "roles:manager",
    "role-manager",
    "role_manager",
    "manager",
    "my-role:manager",
    "operations:op-1",
    "keys:billing-bot",
    "ROLE;manager",
    "rol\u00e9:manager",
]
_NAME_TEXT = st.text(
    alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=30
) | st.sampled_from(["manager", "", "op-1", "billing-bot", "x" * 150])
# Roles that are not "manager" however they are spelled (a role is matched by kind and name).
_NOT_MANAGER = st.sampled_from(
    ["", "clerk", "role:manager", "Manager", "operation:op-1", "key:manager", "managers"]
)


def _reserved_principal(data: st.DataObject) -> str:
    prefix = data.draw(st.sampled_from(_RESERVED_PREFIXES))
    cased = "".join(c.upper() if data.draw(st.booleans()) else c for c in prefix)
    return cased + data.draw(_NAME_TEXT)


def _principal_seeds(approval_id: str, thread_id: str) -> list[Request]:
    return [
        Request("GET", "/v1/approvals"),
        Request(
            "POST",
            f"/v1/approvals/{approval_id}",
            _encode({"payload": {"decision": "approve"}}),
            {"idempotency-key": "fuzz"},
        ),
        Request("GET", f"/v1/continuations/{approval_id}"),
        Request("POST", "/v1/continuations", _encode({"payload": {"kind": "input"}})),
        Request("GET", "/agui/threads"),
        Request("GET", f"/agui/threads/{thread_id}"),
        Request("POST", "/agui", _encode(_run_input(new_thread()))),
    ]


def _principal_finding(request: Request, status: int, text: str, *, reserved: bool) -> str | None:
    if status >= 500 or _INTERNAL.search(text):
        return f"{status} {text[:300]}"
    if reserved:
        if status != 401 or '"UNAUTHENTICATED"' not in text:
            return f"a reserved principal was served: {status} {text[:300]}"
        return None
    if "/v1/approvals/" in request.path and request.method == "POST" and status != 404:
        return f"someone who is no approver decided it: {status} {text[:300]}"
    return None


@pytest.fixture(name="principal_server", scope="module")
def principal_server_fixture(data: Path) -> Iterator[ServerProcess]:
    folder = data / "principals"
    folder.mkdir()
    server = ServerProcess(
        [
            *("demo", "--no-browser", "--database-path", str(folder / "pausemesh.db")),
            *("--principal-resolver", "tests.support.agui:header_identity"),
        ],
        env={
            "PAUSEMESH_DATA_DIR": str(folder),
            "PAUSEMESH_DEMO_AIRLINE_PATH": str(folder / "airline.db"),
        },
    )
    with server:
        yield server


def test_principals_spelled_like_approver_entries_are_refused_on_every_route(
    principal_server: ServerProcess,
) -> None:
    """The resolver names the caller from ``X-Principal`` (roles from ``X-Roles``): a principal
    with a reserved prefix (``role:``, ``operation:``, ``key:`` in any letter case, any name,
    even with the role ``manager``) is 401 ``UNAUTHENTICATED`` on every route; one close to a
    prefix, without the role, is an ordinary principal and never decides the traveller's
    pending approval. Afterwards it is still pending, in a real manager's inbox."""
    traveller = {"x-principal": "traveller"}
    with httpx.Client(base_url=principal_server.base_url, timeout=30, headers=traveller) as http:
        thread_id = new_thread()
        question = ask(http, thread_id).interrupts[0]
        run = post_run(http, resume_body(thread_id, [resolved(question["id"], "PM404")]))
        [approval] = run.interrupts
        seeds = _principal_seeds(approval["id"], thread_id)
        sent: list[Request] = []

        @seed(SEED)
        @settings(
            max_examples=CASES_PER_FAMILY,
            database=None,
            deadline=None,
            phases=(Phase.generate,),
            suppress_health_check=list(HealthCheck),
        )
        @given(data=st.data())
        def refused_clearly(data: st.DataObject) -> None:
            reserved = data.draw(st.booleans())
            if reserved:
                principal = _reserved_principal(data)
                roles = data.draw(st.sampled_from(["", "manager", "manager,clerk"]))
            else:
                principal = data.draw(st.sampled_from(_NEAR_MISSES))
                roles = ",".join(data.draw(st.lists(_NOT_MANAGER, max_size=3)))
            base = data.draw(st.sampled_from(seeds))
            headers = {
                **base.headers,
                "x-principal": principal.encode(),
                "x-roles": roles.encode(),
            }
            request = replace(base, headers=headers)
            note(repr(request)[:2000])
            sent.append(request)
            try:
                status, text = _send(http, request)
            except httpx.TransportError as error:
                pytest.fail(f"dropped ({error!r})")
            finding = _principal_finding(request, status, text, reserved=reserved)
            assert finding is None, finding

        refused_clearly()
        assert len(sent) == CASES_PER_FAMILY

        inbox = http.get("/v1/approvals", headers={"x-principal": "boss", "x-roles": "manager"})
        assert approval["id"] in [a["continuationId"] for a in inbox.json()["approvals"]]
        assert [
            i["id"] for i in http.get(f"/agui/threads/{thread_id}").json()["pendingInterrupts"]
        ] == [approval["id"]]
    log = principal_server.output()
    assert "Traceback" not in log, log[-5000:]
