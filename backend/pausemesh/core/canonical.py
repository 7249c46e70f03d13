"""Canonical JSON: one byte string per JSON value, whatever the key order.

Used to compare idempotent replays and to content-address receipts. Object keys are
sorted by UTF-16 code units (the order JavaScript's ``sort`` gives, so hashes agree
with the TypeScript reference), arrays keep their order, integral floats are written
as integers (``1.0`` and ``1`` are the same JSON number), and NaN/Infinity are refused.
"""

from __future__ import annotations

import hashlib
import math
import re
from json.encoder import encode_basestring
from typing import Any

from pausemesh.core.errors import InvalidInputError

__all__ = ("JSONValue", "canonical_json", "canonical_sha256", "check_json_value", "sha256_hex")

JSONValue = Any
"""Any value JSON can carry: None, bool, int, float, str, list, dict[str, ...]."""

_MAX_DEPTH = 256
# The C string encoder, without ASCII escaping (JavaScript keeps non-ASCII as is too).
_encode_string = encode_basestring


# A code point in U+D800..U+DFFF inside a Python str is always a lone surrogate (a valid pair
# decodes to one astral code point); UTF-8 cannot encode it, so it is not JSON text.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_text(text: str) -> None:
    if not text.isascii() and _LONE_SURROGATE.search(text) is not None:
        msg = "JSON strings must not contain lone surrogates"
        raise InvalidInputError(msg, code="INVALID_PAYLOAD")


def _utf16_key(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def _sorted_keys(value: dict[Any, Any]) -> list[str]:
    try:
        keys = sorted(value)
    except TypeError:
        keys = list(value)  # mixed key types: the check below names the problem
    for key in keys:
        if type(key) is not str:
            msg = "JSON object keys must be strings"
            raise InvalidInputError(msg, code="INVALID_PAYLOAD")
        _check_text(key)
    # Code-point order equals UTF-16 order unless a key holds U+E000..U+FFFF and an
    # astral character; only then pay for the re-sort.
    if keys and max(keys) >= "\ue000":
        keys.sort(key=_utf16_key)
    return keys


def _encode(value: Any, out: list[str], depth: int) -> None:  # noqa: PLR0912, PLR0915 - one branch per JSON type
    kind = type(value)
    if kind is str:
        _check_text(value)
        out.append(_encode_string(value))
    elif kind is dict:
        if depth >= _MAX_DEPTH:
            _too_deep()
        out.append("{")
        first = True
        for key in _sorted_keys(value):
            if not first:
                out.append(",")
            first = False
            out.append(_encode_string(key))
            out.append(":")
            _encode(value[key], out, depth + 1)
        out.append("}")
    elif kind is list or kind is tuple:
        if depth >= _MAX_DEPTH:
            _too_deep()
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _encode(item, out, depth + 1)
        out.append("]")
    elif kind is int:
        out.append(int.__repr__(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif kind is float:
        if not math.isfinite(value):
            msg = "JSON numbers must be finite"
            raise InvalidInputError(msg, code="INVALID_PAYLOAD")
        if value.is_integer() and abs(value) < 2**53:
            out.append(str(int(value)))
        else:
            out.append(float.__repr__(value))
    # Subclasses (str/int enums, custom dicts) encode as their JSON base type.
    elif isinstance(value, str):
        _encode(str(value), out, depth)
    elif isinstance(value, int):
        _encode(int(value), out, depth)
    elif isinstance(value, float):
        _encode(float(value), out, depth)
    elif isinstance(value, dict):
        _encode(dict(value), out, depth)
    elif isinstance(value, list):
        _encode(list(value), out, depth)
    else:
        msg = f"{type(value).__name__} is not a JSON value"
        raise InvalidInputError(msg, code="INVALID_PAYLOAD")


def _too_deep() -> None:
    msg = "JSON value is nested too deeply"
    raise InvalidInputError(msg, code="INVALID_PAYLOAD")


def canonical_json(value: JSONValue) -> str:
    """Return the canonical text of ``value``; raise ``InvalidInputError`` if it is not JSON."""
    out: list[str] = []
    _encode(value, out, 0)
    return "".join(out)


class _NotPlain(Exception):  # noqa: N818 - a signal inside this module, never raised out
    """``_check_plain`` met something only ``_encode`` may judge."""


def _check_plain(value: Any, depth: int) -> None:
    """Raise ``_NotPlain`` unless ``value`` is JSON made of the exact built-in types, finite
    numbers, string keys and text without lone surrogates, nested at most ``_MAX_DEPTH``.

    The check of ``_encode`` without building the text (no sorting, no escaping), for the
    callers that only validate; anything else goes to ``_encode``, which names the problem.
    """
    kind = type(value)
    if kind is str:
        if not value.isascii() and _LONE_SURROGATE.search(value) is not None:
            raise _NotPlain
    elif kind is dict:
        if depth >= _MAX_DEPTH:
            raise _NotPlain
        for key, item in value.items():
            if type(key) is not str or (
                not key.isascii() and _LONE_SURROGATE.search(key) is not None
            ):
                raise _NotPlain
            _check_plain(item, depth + 1)
    elif kind is list or kind is tuple:
        if depth >= _MAX_DEPTH:
            raise _NotPlain
        for item in value:
            _check_plain(item, depth + 1)
    elif kind is float:
        if not math.isfinite(value):
            raise _NotPlain
    elif not (kind is int or kind is bool or value is None):
        raise _NotPlain  # a subclass or another type: ``_encode`` decides


def check_json_value(value: object) -> None:
    """Raise ``InvalidInputError(INVALID_PAYLOAD)`` unless ``value`` is a JSON value.

    The same verdict and error as ``canonical_json``, without building the text.
    """
    try:
        _check_plain(value, 0)
    except (_NotPlain, RecursionError):
        canonical_json(value)  # raises the error ``canonical_json`` names (or accepts it)


def sha256_hex(text: str | bytes) -> str:
    data = text.encode() if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()


def canonical_sha256(value: JSONValue) -> str:
    return sha256_hex(canonical_json(value))
