"""Canonical JSON: one byte string per JSON value, whatever the key order.

Used to compare idempotent replays and to content-address receipts. Object keys are
sorted by UTF-16 code units (the order JavaScript's ``sort`` gives, so hashes agree
with the TypeScript reference), arrays keep their order, integral floats are written
as integers (``1.0`` and ``1`` are the same JSON number), and NaN/Infinity are refused.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from pausemesh.core.errors import InvalidInputError

__all__ = ("JSONValue", "canonical_json", "canonical_sha256", "check_json_value", "sha256_hex")

JSONValue = Any
"""Any value JSON can carry: None, bool, int, float, str, list, dict[str, ...]."""

_MAX_DEPTH = 256


def _utf16_key(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def _encode(value: Any, out: list[str], depth: int) -> None:  # noqa: PLR0912 - one branch per JSON type
    if depth > _MAX_DEPTH:
        msg = "JSON value is nested too deeply"
        raise InvalidInputError(msg, code="INVALID_PAYLOAD")
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(str(int(value)))
    elif isinstance(value, float):
        if not math.isfinite(value):
            msg = "JSON numbers must be finite"
            raise InvalidInputError(msg, code="INVALID_PAYLOAD")
        if value.is_integer() and abs(value) < 2**53:
            out.append(str(int(value)))
        else:
            out.append(json.dumps(value))
    elif isinstance(value, str):
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _encode(item, out, depth + 1)
        out.append("]")
    elif isinstance(value, dict):
        out.append("{")
        for index, key in enumerate(sorted(value, key=_check_key)):
            if index:
                out.append(",")
            out.append(json.dumps(key, ensure_ascii=False))
            out.append(":")
            _encode(value[key], out, depth + 1)
        out.append("}")
    else:
        msg = f"{type(value).__name__} is not a JSON value"
        raise InvalidInputError(msg, code="INVALID_PAYLOAD")


def _check_key(key: object) -> bytes:
    if not isinstance(key, str):
        msg = "JSON object keys must be strings"
        raise InvalidInputError(msg, code="INVALID_PAYLOAD")
    return _utf16_key(key)


def canonical_json(value: JSONValue) -> str:
    """Return the canonical text of ``value``; raise ``InvalidInputError`` if it is not JSON."""
    out: list[str] = []
    _encode(value, out, 0)
    return "".join(out)


def check_json_value(value: object) -> None:
    """Raise ``InvalidInputError(INVALID_PAYLOAD)`` unless ``value`` is a JSON value."""
    canonical_json(value)


def sha256_hex(text: str | bytes) -> str:
    data = text.encode() if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()


def canonical_sha256(value: JSONValue) -> str:
    return sha256_hex(canonical_json(value))
