"""Sealed MCP ``requestState`` (2026-07-28 multi-round-trip) under the PauseMesh server key.

Two layers, both fail closed:

* ``KeyedRequestStateCodec`` plugs into the SDK's ``RequestStateSecurity``: the SDK stamps its
  envelope (method, tool, argument digest, principal, audience, expiry) and this codec HMACs
  it with the server key (``KeyedTokenIssuer.sign``), so every replica sharing the key and
  every restart accepts it, and any edit is refused with the SDK's invalid-state error.
* ``PauseState`` is what the tool itself puts inside: the continuation it references and the
  same bindings again (principal, tool, argument digest) with the continuation's own deadline,
  so a state cannot be moved to another call even if the SDK policy were loosened.

The state references the continuation and carries no answer and no token: the continuation
is the single source of truth and single use is enforced by the continuation service.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any

import msgspec
from mcp.server.request_state import InvalidRequestState
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from pausemesh.core.canonical import canonical_sha256
from pausemesh.core.tokens import KeyedTokenIssuer

__all__ = (
    "KeyedRequestStateCodec",
    "PauseState",
    "arguments_digest",
    "decode_pause_state",
    "encode_pause_state",
    "invalid_request_state",
    "new_pause_state",
)

_PREFIX = "pm1"
_STATE_VERSION = 1


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise InvalidRequestState("malformed") from None
    if _b64(raw) != text:
        raise InvalidRequestState("malformed")
    return raw


class KeyedRequestStateCodec:
    """``pm1.<key id>.<payload>.<HMAC>``: integrity under the server key ring, keys rotate by id.

    Sign-only on purpose: the envelope holds ids and digests, never an answer or a secret.
    The issuer is looked up per call, so the codec can exist before the app's lifespan runs.
    """

    def __init__(self, issuer: Callable[[], KeyedTokenIssuer]) -> None:
        self._issuer = issuer

    def seal(self, payload: bytes) -> str:
        issuer = self._issuer()
        signed = f"{_PREFIX}.{issuer.active_key_id}.{_b64(payload)}"
        return f"{signed}.{issuer.sign(signed.encode())}"

    def unseal(self, token: str) -> bytes:
        parts = token.split(".")
        if len(parts) != 4 or parts[0] != _PREFIX:
            raise InvalidRequestState("malformed")
        prefix, key_id, body, signature = parts
        if not self._issuer().verify(f"{prefix}.{key_id}.{body}".encode(), signature, key_id):
            raise InvalidRequestState("signature")
        return _unb64(body)

    def continuation_in(self, token: str) -> str | None:
        """The continuation a sealed state names (checked under the key), else None.

        The SDK's envelope keeps the tool's own state under ``s`` (``RequestStateBoundary``).
        """
        try:
            envelope = msgspec.json.decode(self.unseal(token))
            inner = envelope.get("s") if isinstance(envelope, dict) else None
            state = _state_decoder.decode(inner) if isinstance(inner, str) else None
        except (InvalidRequestState, msgspec.DecodeError):
            return None
        return state.continuation_id if state is not None else None


class PauseState(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    v: int
    continuation_id: str
    principal: str | None
    tool: str
    arguments: str
    expires_at: float


_state_decoder = msgspec.json.Decoder(PauseState)


def arguments_digest(arguments: Any) -> str:
    return canonical_sha256(["pausemesh-mcp-arguments-v1", arguments])


def encode_pause_state(state: PauseState) -> str:
    return msgspec.json.encode(state).decode()


def invalid_request_state() -> MCPError:
    """The SDK's own rejection, byte for byte, so clients see one invalid-state error."""
    return MCPError(
        code=INVALID_PARAMS,
        message="Invalid or expired requestState",
        data={"reason": "invalid_request_state"},
    )


def decode_pause_state(
    raw: str, *, principal: str | None, tool: str, arguments: Any, now: float
) -> PauseState:
    """Decode and check the bindings; every failure is the invalid-state error."""
    try:
        state = _state_decoder.decode(raw)
    except msgspec.DecodeError:
        raise invalid_request_state() from None
    if (
        state.v != _STATE_VERSION
        or state.principal != principal
        or state.tool != tool
        or state.arguments != arguments_digest(arguments)
        or not now < state.expires_at
    ):
        raise invalid_request_state()
    return state


def new_pause_state(
    continuation_id: str, *, principal: str | None, tool: str, arguments: Any, expires_at: float
) -> PauseState:
    return PauseState(
        v=_STATE_VERSION,
        continuation_id=continuation_id,
        principal=principal,
        tool=tool,
        arguments=arguments_digest(arguments),
        expires_at=expires_at,
    )
