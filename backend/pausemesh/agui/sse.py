"""All of AG-UI's SSE framing, shared by the Litestar route and the Starlette binding.

Frames are LF only (the official client does not parse CRLF frames): one event per
``id: <sequence>\\ndata: <json>\\n\\n`` frame, and ``: keep-alive\\n\\n`` comments while idle.
A reconnecting client names the last frame it saw with ``Last-Event-ID`` (or ``?after=``).
The web bindings only move these bytes; nothing else in the package writes SSE.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from typing import Final

import msgspec

from pausemesh.agui.events import Event
from pausemesh.core.errors import InvalidInputError
from pausemesh.observability.telemetry import SSE_STREAMS_OPEN, gauge_add

__all__ = (
    "KEEPALIVE_FRAME",
    "LINE_SEPARATOR",
    "MEDIA_TYPE",
    "SSE_HEADERS",
    "counted_stream",
    "encode_frame",
    "replay_cursor",
)

MEDIA_TYPE: Final = "text/event-stream"
LINE_SEPARATOR: Final = "\n"
KEEPALIVE_FRAME: Final = b": keep-alive\n\n"
# No caching anywhere, and no proxy buffering (nginx honours X-Accel-Buffering).
SSE_HEADERS: Final = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_MAX_SEQUENCE = 2**63 - 1
_encoder = msgspec.json.Encoder()


def encode_frame(event: Event | bytes | str, sequence: int | None = None) -> bytes:
    """One SSE frame: ``id: <sequence>\\ndata: <json>\\n\\n`` (no ``id`` line without a sequence).

    ``event`` may be an already-encoded JSON text (bytes or str, e.g. from the thread log), so
    a replay sends the logged bytes as they were.
    """
    if isinstance(event, str):
        data = event.encode()
    elif isinstance(event, bytes):
        data = event
    else:
        data = _encoder.encode(event)
    if b"\n" in data or b"\r" in data:
        # A raw line break would end the data line early; compact JSON never has one.
        msg = "an SSE data line must not contain a line break"
        raise ValueError(msg)
    if sequence is None:
        return b"data: " + data + b"\n\n"
    return b"id: %d\ndata: %s\n\n" % (sequence, data)


def replay_cursor(last_event_id: str | None, after: str | None) -> int:
    """The replay cursor: ``Last-Event-ID`` (what a reconnecting client sends) wins over ``?after=``."""
    raw = last_event_id if last_event_id is not None else after
    text = "" if raw is None else raw.strip()
    if text == "":
        return 0
    # isdigit alone accepts "²" and other non-ASCII digits that int() then refuses.
    if not (text.isascii() and text.isdigit()) or int(text) > _MAX_SEQUENCE:
        msg = "Last-Event-ID / after must be a non-negative integer thread sequence"
        raise InvalidInputError(msg, code="INVALID_CURSOR")
    return int(text)


async def counted_stream(
    frames: AsyncGenerator[bytes, None], route: str
) -> AsyncGenerator[bytes, None]:
    """``frames``, counted in ``pausemesh_sse_streams_open{route}`` while the response is open."""
    gauge_add(SSE_STREAMS_OPEN, 1, route)
    try:
        async with contextlib.aclosing(frames) as inner:
            async for chunk in inner:
                yield chunk
    finally:
        gauge_add(SSE_STREAMS_OPEN, -1, route)
