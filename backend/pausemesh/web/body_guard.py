"""The request body of a protocol mount, read and checked before its SDK sees it.

The SDKs behind ``/mcp`` and ``/a2a`` parse JSON their own way: Python's ``json`` takes
``NaN``, lone surrogates and any nesting until the interpreter's stack gives out, and a
failure there leaks Python text or ends in a 500. So the mount reads the body itself, within
``PAUSEMESH_MAX_PAYLOAD_BYTES``, checks that it is JSON text (UTF-8, no lone surrogate, no
``NaN``, bounded nesting) and hands the SDK the same bytes again.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec
from litestar.types import HTTPRequestEvent, Receive, ReceiveMessage, Scope

__all__ = (
    "MAX_JSON_DEPTH",
    "BodyTooLarge",
    "MalformedJsonError",
    "declared_length",
    "decode_json",
    "has_body",
    "read_body",
    "replay_body",
)

MAX_JSON_DEPTH: Final = 256
"""The deepest nesting a protocol body may have (the core refuses deeper payloads anyway)."""

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


class BodyTooLarge(Exception):  # noqa: N818 - a signal between two functions, never surfaced
    """The body went past the limit while it was read."""


def has_body(scope: Scope) -> bool:
    return scope.get("method", "GET") in _BODY_METHODS


def declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def read_body(receive: Receive, limit: int) -> bytes:
    """The whole body, counted while it streams in; ``BodyTooLarge`` past ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break  # the client went away; what arrived is all there is
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def replay_body(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that yields ``body`` once, then whatever the client sends next."""
    delivered = False

    async def replayed() -> ReceiveMessage:
        nonlocal delivered
        if delivered:
            return await receive()
        delivered = True
        event: HTTPRequestEvent = {"type": "http.request", "body": body, "more_body": False}
        return event

    return replayed


def _too_deep(value: object) -> bool:
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: list[object] = list(item.values())
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > MAX_JSON_DEPTH:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


class MalformedJsonError(ValueError):
    """A body that is not acceptable JSON text; its message is fit for a client."""


def decode_json(body: bytes) -> Any:
    """``body`` decoded, once; ``MalformedJsonError`` when it is not acceptable JSON text."""
    try:
        value = msgspec.json.decode(body)
    except RecursionError:
        raise MalformedJsonError("The request body is nested too deeply") from None
    except (msgspec.DecodeError, UnicodeDecodeError):
        # msgspec also refuses NaN/Infinity and escaped lone surrogates here.
        raise MalformedJsonError("The request body is not valid UTF-8 JSON") from None
    if _too_deep(value):
        raise MalformedJsonError("The request body is nested too deeply")
    return value
