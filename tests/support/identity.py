"""A local identity provider for tests: signing keys, a JWKS (a file or served over loopback
HTTP) and access tokens signed by the test, plus an agent that reports who it runs for.

Real cryptography throughout (``cryptography`` keys, PyJWT signatures): the server under test
verifies exactly what an identity provider would send it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

from pausemesh.agui.agent import AgentOutput, PauseRequest, RunContext
from pausemesh.agui.events import StateSnapshotEvent

__all__ = (
    "AUDIENCE",
    "FORGERIES",
    "ISSUER",
    "JwksServer",
    "SigningKey",
    "jwt_env",
    "whoami",
    "write_jwks",
)

ISSUER = "https://idp.test.example/realms/pausemesh"
AUDIENCE = "pausemesh-api"
QUESTION = "Which flight should I book?"


@dataclass(frozen=True)
class SigningKey:
    """One identity-provider key: its ``kid``, algorithm and private half."""

    kid: str
    algorithm: str
    private: Any = field(repr=False)

    @classmethod
    def rsa(cls, kid: str | None = None) -> SigningKey:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        return cls(kid or f"rsa-{uuid.uuid4().hex[:8]}", "RS256", key)

    @classmethod
    def ec(cls, kid: str | None = None) -> SigningKey:
        return cls(
            kid or f"ec-{uuid.uuid4().hex[:8]}", "ES256", ec.generate_private_key(ec.SECP256R1())
        )

    @classmethod
    def ed25519(cls, kid: str | None = None) -> SigningKey:
        return cls(
            kid or f"ed-{uuid.uuid4().hex[:8]}", "EdDSA", ed25519.Ed25519PrivateKey.generate()
        )

    def public_jwk(self) -> dict[str, Any]:
        public = self.private.public_key()
        algorithms: dict[str, type[RSAAlgorithm | ECAlgorithm | OKPAlgorithm]] = {
            "RS256": RSAAlgorithm,
            "ES256": ECAlgorithm,
            "EdDSA": OKPAlgorithm,
        }
        jwk: dict[str, Any] = algorithms[self.algorithm].to_jwk(public, as_dict=True)
        return {**jwk, "kid": self.kid, "use": "sig", "alg": self.algorithm}

    def token(
        self,
        subject: str = "alice",
        *,
        roles: list[str] | None = None,
        lifetime: float = 300.0,
        headers: dict[str, Any] | None = None,
        **claims: Any,
    ) -> str:
        """An access token as an OIDC provider issues it (``iss``, ``aud``, ``exp``...)."""
        now = int(time.time())
        body: dict[str, Any] = {
            "iss": ISSUER,
            "aud": AUDIENCE,
            "sub": subject,
            "iat": now,
            "exp": now + int(lifetime),
        }
        if roles is not None:
            body["realm_access"] = {"roles": roles}
        body.update(claims)
        return jwt.encode(
            body,
            self.private,
            algorithm=self.algorithm,
            headers={"kid": self.kid, **(headers or {})},
        )


def jwks_document(*keys: SigningKey) -> bytes:
    return json.dumps({"keys": [k.public_jwk() for k in keys]}).encode()


def write_jwks(path: Path, *keys: SigningKey) -> None:
    """Replace the JWKS file in one rename, as a deploy script would."""
    temp = path.with_suffix(".tmp")
    temp.write_bytes(jwks_document(*keys))
    temp.replace(path)


def jwt_env(jwks_url: str, **extra: str) -> dict[str, str]:
    """The ``PAUSEMESH_AUTH_*`` settings for the local identity provider."""
    return {
        "PAUSEMESH_AUTH_JWKS_URL": jwks_url,
        "PAUSEMESH_AUTH_ISSUER": ISSUER,
        "PAUSEMESH_AUTH_AUDIENCE": AUDIENCE,
        "PAUSEMESH_AUTH_ROLES_CLAIM": "realm_access.roles",
        **extra,
    }


class JwksServer:
    """The JWKS over loopback HTTP, from a thread; ``keys`` can change while it runs and
    ``requests`` counts the fetches it answered."""

    def __init__(self, *keys: SigningKey) -> None:
        self.keys = list(keys)
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests += 1
                body = jwks_document(*server.keys)
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}/jwks.json"

    @contextmanager
    def running(self) -> Iterator[JwksServer]:
        self._thread.start()
        try:
            yield self
        finally:
            self._http.shutdown()
            self._http.server_close()


# -- tokens an attacker (or a clock) makes: each must be refused ----------------------------


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def segments(header: dict[str, Any], claims: dict[str, Any]) -> str:
    return b64(json.dumps(header).encode()) + "." + b64(json.dumps(claims).encode())


def claims(**changes: Any) -> dict[str, Any]:
    now = int(time.time())
    return {"iss": ISSUER, "aud": AUDIENCE, "sub": "mallory", "exp": now + 300, **changes}


def expired(key: SigningKey) -> str:
    return key.token(exp=int(time.time()) - 3600)


def _not_yet_valid(key: SigningKey) -> str:
    return key.token(nbf=int(time.time()) + 3600)


def _wrong_issuer(key: SigningKey) -> str:
    return key.token(iss="https://evil.example")


def _wrong_audience(key: SigningKey) -> str:
    return key.token(aud="another-api")


def _unknown_kid(_: SigningKey) -> str:
    return SigningKey.rsa("never-published").token()


def _alg_none(key: SigningKey) -> str:
    return segments({"alg": "none", "typ": "JWT", "kid": key.kid}, claims()) + "."


def _hs256_with_the_public_key(key: SigningKey) -> str:
    # The algorithm-confusion attack: the public key, which anyone has, as an HMAC secret.
    secret = key.private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    signing_input = segments({"alg": "HS256", "typ": "JWT", "kid": key.kid}, claims())
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return signing_input + "." + b64(signature)


def _tampered_payload(key: SigningKey) -> str:
    header, _, signature = key.token("alice").split(".")
    forged = b64(json.dumps(claims(sub="admin")).encode())
    return f"{header}.{forged}.{signature}"


def _without_exp(key: SigningKey) -> str:
    return key.token(exp=None)


def _without_subject(key: SigningKey) -> str:
    return key.token(sub=None)


FORGERIES = [
    expired,
    _not_yet_valid,
    _wrong_issuer,
    _wrong_audience,
    _unknown_kid,
    _alg_none,
    _hs256_with_the_public_key,
    _tampered_payload,
    _without_exp,
    _without_subject,
]


async def whoami(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """Puts who it runs for in the state (principal and ``ctx.roles``), then asks a question
    unless this run answers one."""
    yield StateSnapshotEvent(
        snapshot={
            "principal": ctx.principal,
            "roles": sorted(ctx.roles),
            "answered": len(ctx.decisions),
        }
    )
    if not ctx.decisions:
        yield PauseRequest(
            message=QUESTION,
            response_schema={"type": "object", "properties": {"flight": {"type": "string"}}},
        )
