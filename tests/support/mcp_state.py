"""Test-only peeking into a sealed MCP ``requestState`` (signed, not encrypted)."""

from __future__ import annotations

import base64
import json

__all__ = ("continuation_of",)


def continuation_of(state: str) -> str:
    """The continuation id inside ``pm1.<key>.<payload>.<mac>`` (the SDK envelope's ``s``)."""
    envelope = json.loads(base64.urlsafe_b64decode(state.split(".")[2] + "=="))
    inner: str = json.loads(envelope["s"])["continuation_id"]
    return inner
