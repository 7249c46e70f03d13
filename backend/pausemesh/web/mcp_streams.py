"""What the MCP mounts (``/mcp``, the gateway) add to a request and to its SSE streams.

* **Header values trimmed.** HTTP field values carry no surrounding whitespace (RFC 9110
  §5.5): a client that sends ``Mcp-Name:   book_flight  `` means ``book_flight``. The SDK
  compares the raw value with the body (``Mcp-Name``, ``Mcp-Method``,
  ``MCP-Protocol-Version``), so the values are trimmed before it sees them.
* **Priming event and ``retry``** (SEP-1699, streamable HTTP "Sending Messages" item 6): every
  SSE stream an MCP mount opens, the response of a POST or the GET stream, starts with an event
  that carries an event id, a ``retry`` field and an empty ``data`` field, for clients of
  2025-11-25 or later (an older client cannot read an empty event, the SDK's own rule).
* **No replay.** The streams are not replayed (the SDK would need an event store, and then
  answer nothing at all for an id it does not hold). A client that lost a request's stream
  and reconnects with its priming id in ``Last-Event-ID`` is answered 409
  ``STREAM_NOT_RESUMABLE`` at once, so it gives up on that request instead of waiting on a
  stream that will never carry its answer (a 2025-11-25 task outlives its stream:
  ``tasks/result`` again). A GET that names any other id gets a fresh GET stream, as a
  reconnection without the header does.
"""

from __future__ import annotations

import secrets
from typing import Any

from litestar.types import Message, Scope, Send

from pausemesh.web.problems import encode_problem, send_encoded

__all__ = (
    "PRIMING_ID_PREFIX",
    "SSE_RETRY_MS",
    "primed",
    "resume_or_refuse",
    "trim_header_values",
)

SSE_RETRY_MS = 2000
"""The ``retry`` every MCP stream announces: how long a client waits before reconnecting."""
PRIMING_ID_PREFIX = "pausemesh-prime-"
_REQUEST_STREAM = PRIMING_ID_PREFIX + "r-"
_GET_STREAM = PRIMING_ID_PREFIX + "g-"
_FIRST_PRIMED_VERSION = "2025-11-25"
_WHITESPACE = b" \t"


def trim_header_values(scope: Scope) -> None:
    """Strip the whitespace around every header value of the request (in ``scope``)."""
    headers = scope.get("headers", ())
    if any(value[:1] in (b" ", b"\t") or value[-1:] in (b" ", b"\t") for _, value in headers):
        scope["headers"] = [(name, value.strip(_WHITESPACE)) for name, value in headers]


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return str(value.decode("latin-1"))
    return None


def _protocol_version(scope: Scope, message: Any) -> str | None:
    """The request's MCP revision: its header, else an ``initialize`` request's own."""
    version = _header(scope, b"mcp-protocol-version")
    if version is None and isinstance(message, dict) and message.get("method") == "initialize":
        params = message.get("params")
        offered = params.get("protocolVersion") if isinstance(params, dict) else None
        version = offered if isinstance(offered, str) else None
    return version


def _priming_event(prefix: str) -> bytes:
    event_id = prefix + secrets.token_hex(8)
    return f"id: {event_id}\nretry: {SSE_RETRY_MS}\ndata: \n\n".encode()


def primed(send: Send, scope: Scope, message: Any) -> Send:
    """``send``, with the priming event put first into an SSE response (2025-11-25 or later)."""
    version = _protocol_version(scope, message)
    # Revisions are dates, so they compare as text.
    if version is None or version < _FIRST_PRIMED_VERSION:
        return send

    async def send_primed(event: Message) -> None:
        if event["type"] != "http.response.start":
            await send(event)
            return
        headers = list(event.get("headers", ()))
        content_type = next((v for k, v in headers if k.lower() == b"content-type"), b"")
        if not content_type.lower().startswith(b"text/event-stream"):
            await send(event)
            return
        priming = _priming_event(_GET_STREAM if scope.get("method") == "GET" else _REQUEST_STREAM)
        headers = [
            (k, str(int(v) + len(priming)).encode()) if k.lower() == b"content-length" else (k, v)
            for k, v in headers
        ]
        await send({**event, "headers": headers})
        await send({"type": "http.response.body", "body": priming, "more_body": True})

    return send_primed


async def resume_or_refuse(scope: Scope, send: Send) -> bool:
    """A GET naming a ``Last-Event-ID``: 409 for a request stream's priming id (True: answered),
    else the header dropped so the SDK opens a fresh GET stream (False)."""
    if scope.get("method") != "GET":
        return False
    last = _header(scope, b"last-event-id")
    if last is None:
        return False
    if last.startswith(_REQUEST_STREAM):
        detail = "MCP request streams are not replayed here; send the request again"
        await send_encoded(send, encode_problem(409, "STREAM_NOT_RESUMABLE", detail))
        return True
    scope["headers"] = [(k, v) for k, v in scope.get("headers", ()) if k != b"last-event-id"]
    return False
