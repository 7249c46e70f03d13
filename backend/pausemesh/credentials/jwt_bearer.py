"""JWT access tokens (OIDC, RFC 9068): signature, issuer, audience, lifetime, then identity.

PyJWT does the cryptography and the registered-claim checks; this module decides which key
and which algorithm a token may use. The algorithm comes from the *key* (the JWKS entry),
never from the token: a token whose header names another algorithm, ``none`` or HS256 is
refused before any signature is computed (the classic algorithm-confusion attacks).
"""

from __future__ import annotations

import base64
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jwt
import msgspec

from pausemesh.core.identity import Identity
from pausemesh.credentials.jwks import ALGORITHMS, JwksCache

__all__ = ("JwtRejectedError", "JwtVerifier", "looks_like_jwt")

# Registered claims every access token must carry; iss/aud are checked against the settings.
_REQUIRED_CLAIMS = ["exp", "iss", "aud"]
# How many verified tokens are remembered (a few hundred bytes each).
_REMEMBERED_TOKENS = 10_000
_REMEMBERED_TOKEN_CHARS = 4096


class JwtRejectedError(Exception):
    """The token does not verify; ``reason`` is short and safe to send back to the client."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def looks_like_jwt(credential: str) -> bool:
    """Three dot-separated parts, the first a base64url JSON header (``eyJ...``)."""
    return credential.count(".") == 2 and credential.startswith("eyJ")


@dataclass(frozen=True, slots=True)
class _Verified:
    identity: Identity
    not_before: float
    expires: float
    generation: int


class JwtVerifier:
    """Checks one token against the JWKS and the settings, and names its caller.

    A client sends the same access token with every request until it expires, so the outcome
    of a full check is remembered for that exact token string (bounded, oldest dropped first):
    a repeat costs a dictionary lookup and the ``exp``/``nbf`` comparison. A remembered
    outcome is dropped when the JWKS changes or goes stale, so a key the provider withdrew
    stops working as soon as its refetch shows it gone.
    """

    def __init__(
        self,
        *,
        keys: JwksCache,
        issuer: str,
        audience: str,
        principal_claim: str = "sub",
        roles_claim: str | None = None,
        leeway_seconds: int = 30,
        remembered: int = _REMEMBERED_TOKENS,
    ) -> None:
        self.keys = keys
        self.issuer = issuer
        self.audience = audience
        self.principal_claim = principal_claim
        self.roles_claim = roles_claim
        self.leeway_seconds = leeway_seconds
        self._remembered = remembered
        self._verified: dict[str, _Verified] = {}

    async def verify(self, token: str) -> Identity:
        known = self._verified.get(token)
        if known is not None:
            if self._still_valid(known):
                return known.identity
            del self._verified[token]  # the full check below says why it no longer passes
        header = _header(token)
        algorithm = header.get("alg")
        if algorithm not in ALGORITHMS:
            raise JwtRejectedError("The access token's algorithm is not accepted")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise JwtRejectedError("The access token is malformed")
        key = await self.keys.key_for(kid)
        if key is None:
            raise JwtRejectedError("The access token's signing key is unknown")
        generation = self.keys.generation
        claims = self._decode(token, key)
        identity = Identity(principal=self._principal(claims), roles=self._roles(claims))
        self._remember(token, identity, claims, generation)
        return identity

    def _still_valid(self, known: _Verified) -> bool:
        # PyJWT's own rules: expired once now >= exp + leeway, immature while now < nbf - leeway.
        now = time.time()
        leeway = self.leeway_seconds
        return (
            known.generation == self.keys.generation
            and self.keys.fresh()
            and known.not_before - leeway <= now < known.expires + leeway
        )

    def _remember(
        self, token: str, identity: Identity, claims: Mapping[str, Any], generation: int
    ) -> None:
        nbf = claims.get("nbf")
        not_before = float(nbf) if isinstance(nbf, (int, float)) else float("-inf")
        verified = _Verified(identity, not_before, float(claims["exp"]), generation)
        if self._remembered <= 0 or len(token) > _REMEMBERED_TOKEN_CHARS:
            return  # an outsized token is checked every time rather than held in memory
        if len(self._verified) >= self._remembered:
            del self._verified[next(iter(self._verified))]
        self._verified[token] = verified

    def _decode(self, token: str, key: jwt.PyJWK) -> dict[str, Any]:
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key,
                algorithms=[key.algorithm_name],
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway_seconds,
                options={"require": _REQUIRED_CLAIMS},
            )
        except jwt.ExpiredSignatureError:
            raise JwtRejectedError("The access token has expired") from None
        except jwt.ImmatureSignatureError:
            raise JwtRejectedError("The access token is not valid yet") from None
        except jwt.InvalidAudienceError:
            raise JwtRejectedError("The access token is for another audience") from None
        except jwt.InvalidIssuerError:
            raise JwtRejectedError("The access token is from another issuer") from None
        except jwt.InvalidTokenError:
            # A bad signature, a disallowed algorithm, a missing claim, a malformed payload.
            raise JwtRejectedError("The access token is invalid") from None
        return claims

    def _principal(self, claims: Mapping[str, Any]) -> str:
        principal = claims.get(self.principal_claim)
        if not isinstance(principal, str) or not principal:
            raise JwtRejectedError(f"The access token has no '{self.principal_claim}' claim")
        return principal

    def _roles(self, claims: Mapping[str, Any]) -> frozenset[str]:
        if self.roles_claim is None:
            return frozenset()
        value = claim_at(claims, self.roles_claim)
        if isinstance(value, str):
            return frozenset(value.split())  # an OAuth ``scope``-style string
        if isinstance(value, list):
            return frozenset(item for item in value if isinstance(item, str) and item)
        return frozenset()


def _header(token: str) -> dict[str, Any]:
    """The JOSE header, to pick the key (PyJWT checks it again, strictly, with the signature)."""
    encoded = token.split(".", 1)[0]
    try:
        header = msgspec.json.decode(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    except (ValueError, msgspec.DecodeError):
        raise JwtRejectedError("The access token is malformed") from None
    if not isinstance(header, dict):
        raise JwtRejectedError("The access token is malformed")
    return header


def claim_at(claims: Mapping[str, Any], name: str) -> Any:
    """``name`` as a top-level claim (Auth0's ``https://app/roles`` has dots in it), else a
    dotted path into nested claims (Keycloak's ``realm_access.roles``)."""
    if name in claims:
        return claims[name]
    value: Any = claims
    for part in name.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value
