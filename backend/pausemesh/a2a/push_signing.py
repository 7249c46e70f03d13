"""How webhook receivers know a push notification came from this server.

Each delivery carries a JWT (ES256) signed with a key derived from the server key, so every
replica sharing ``PAUSEMESH_SECRET_KEY`` signs with the same key and publishes the same JSON
Web Key Set (``/a2a/.well-known/jwks.json``, named in the agent card). As the A2A push
notification guidance describes, the receiver fetches the JWKS, picks the key by the token's
``kid``, checks the signature, ``iat``/``exp``, ``aud`` (its own webhook URL) and that
``request_body_sha256`` is the SHA-256 of the body it received; ``jti`` is the delivery id
(the same on every retry of one delivery), so a receiver drops duplicates by it.
"""

from __future__ import annotations

import base64
import hashlib
from datetime import datetime, timedelta
from typing import Any

import jwt
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

__all__ = ("PushSigner",)

_INFO = b"pausemesh a2a push notification signing key v1"
# P-256's group order: the derived scalar must be in [1, n - 1].
_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
_TTL = timedelta(minutes=5)


def _b64(number: int) -> str:
    return base64.urlsafe_b64encode(number.to_bytes(32, "big")).decode().rstrip("=")


class PushSigner:
    """Signs deliveries with the key derived from ``server_key``; ``issuer`` is the A2A URL."""

    __slots__ = ("_key", "issuer", "jwk", "kid")

    def __init__(self, server_key: bytes, *, issuer: str) -> None:
        material = HKDF(algorithm=hashes.SHA256(), length=48, salt=None, info=_INFO).derive(
            server_key
        )
        scalar = int.from_bytes(material, "big") % (_ORDER - 1) + 1
        self._key = ec.derive_private_key(scalar, ec.SECP256R1())
        public = self._key.public_key().public_numbers()
        x, y = _b64(public.x), _b64(public.y)
        self.kid = "push-" + hashlib.sha256(f"{x}.{y}".encode()).hexdigest()[:16]
        self.jwk: dict[str, str] = {
            "kty": "EC",
            "crv": "P-256",
            "x": x,
            "y": y,
            "use": "sig",
            "alg": "ES256",
            "kid": self.kid,
        }
        self.issuer = issuer

    def jwks(self) -> dict[str, Any]:
        return {"keys": [self.jwk]}

    def sign(self, *, delivery_id: str, task_id: str, url: str, body: bytes, now: datetime) -> str:
        claims = {
            "iss": self.issuer,
            "aud": url,
            "iat": int(now.timestamp()),
            "exp": int((now + _TTL).timestamp()),
            "jti": delivery_id,
            "task_id": task_id,
            "request_body_sha256": hashlib.sha256(body).hexdigest(),
        }
        return jwt.encode(claims, self._key, algorithm="ES256", headers={"kid": self.kid})
