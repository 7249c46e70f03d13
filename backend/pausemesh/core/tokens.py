"""Resume tokens (docs/security.md, "Threat model"). Only ``sha256(token)`` is ever persisted.

* ``RandomTokenIssuer``: 32 random bytes; the caller keeps the token.
* ``KeyedTokenIssuer``: ``HMAC-SHA256(key[key_id], continuation_id ‖ nonce)``. A trusted
  in-process host re-derives the token, so neither the browser nor the database holds it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping

import msgspec

from pausemesh.core.errors import InvalidInputError

__all__ = (
    "IssuedTokenValue",
    "KeyedTokenIssuer",
    "RandomTokenIssuer",
    "hash_token",
    "is_well_formed_token",
    "tokens_match",
)

_TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]{16,512}$")
_HASH_RE = re.compile(r"^[0-9a-f]{64}$")
_KEY_ID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
MIN_KEY_BYTES = 32


class IssuedTokenValue(msgspec.Struct, frozen=True, kw_only=True):
    token: str
    token_hash: str
    key_id: str | None = None
    nonce: str | None = None


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def is_well_formed_token(token: object) -> bool:
    return isinstance(token, str) and _TOKEN_RE.fullmatch(token) is not None


def tokens_match(token: str, stored_hash: str) -> bool:
    """Constant-time comparison of ``sha256(token)`` with the stored hash."""
    if not is_well_formed_token(token) or _HASH_RE.fullmatch(stored_hash) is None:
        return False
    return hmac.compare_digest(hash_token(token), stored_hash)


class RandomTokenIssuer:
    def __init__(self, token_bytes: int = 32) -> None:
        if token_bytes < 16:
            msg = "token_bytes must be at least 16"
            raise ValueError(msg)
        self._token_bytes = token_bytes

    def issue(self, continuation_id: str) -> IssuedTokenValue:  # noqa: ARG002 - port shape
        token = _b64(secrets.token_bytes(self._token_bytes))
        return IssuedTokenValue(token=token, token_hash=hash_token(token))


class KeyedTokenIssuer:
    """Derives tokens from a server key ring; new tokens use ``active_key_id``."""

    def __init__(self, keys: Mapping[str, bytes], active_key_id: str) -> None:
        if active_key_id not in keys:
            msg = f"active key id {active_key_id!r} is not in the key ring"
            raise ValueError(msg)
        for key_id, key in keys.items():
            if _KEY_ID_RE.fullmatch(key_id) is None:
                msg = f"key id {key_id!r} must be 1-64 characters of [A-Za-z0-9_.-]"
                raise ValueError(msg)
            if len(key) < MIN_KEY_BYTES:
                msg = f"key {key_id!r} must be at least {MIN_KEY_BYTES} bytes"
                raise ValueError(msg)
        self._keys = dict(keys)
        self.active_key_id = active_key_id

    def _derive(self, key_id: str, continuation_id: str, nonce: str) -> str:
        key = self._keys.get(key_id)
        if key is None:
            msg = "The token key is not in this server's key ring"
            raise InvalidInputError(msg, code="TOKEN_KEY_UNKNOWN")
        message = continuation_id.encode() + b"\x00" + nonce.encode()
        return _b64(hmac.new(key, message, hashlib.sha256).digest())

    def issue(self, continuation_id: str) -> IssuedTokenValue:
        nonce = secrets.token_hex(16)
        token = self._derive(self.active_key_id, continuation_id, nonce)
        return IssuedTokenValue(
            token=token, token_hash=hash_token(token), key_id=self.active_key_id, nonce=nonce
        )

    def derive(self, continuation_id: str, key_id: str, nonce: str) -> str:
        return self._derive(key_id, continuation_id, nonce)

    def sign(self, message: bytes) -> str:
        """HMAC a host message with the active key (sealed MCP request state and the like)."""
        return _b64(hmac.new(self._keys[self.active_key_id], message, hashlib.sha256).digest())

    def verify(self, message: bytes, signature: str, key_id: str | None = None) -> bool:
        key = self._keys.get(key_id or self.active_key_id)
        if key is None:
            return False
        expected = _b64(hmac.new(key, message, hashlib.sha256).digest())
        return hmac.compare_digest(expected, signature)
