"""JWT access tokens (OIDC, RFC 9068): signature, issuer, audience, lifetime, then identity.

PyJWT does the cryptography and the registered-claim checks; this module decides which key
and which algorithm a token may use. The algorithm comes from the *key* (the JWKS entry),
never from the token: a token whose header names another algorithm, ``none`` or HS256 is
refused before any signature is computed (the classic algorithm-confusion attacks).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jwt

from pausemesh.core.identity import Identity
from pausemesh.credentials.jwks import ALGORITHMS, JwksCache

__all__ = ("JwtRejectedError", "JwtVerifier", "looks_like_jwt")

# Registered claims every access token must carry; iss/aud are checked against the settings.
_REQUIRED_CLAIMS = ["exp", "iss", "aud"]


class JwtRejectedError(Exception):
    """The token does not verify; ``reason`` is short and safe to send back to the client."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def looks_like_jwt(credential: str) -> bool:
    """Three dot-separated parts, the first a base64url JSON header (``eyJ...``)."""
    return credential.count(".") == 2 and credential.startswith("eyJ")


@dataclass(frozen=True, slots=True)
class JwtVerifier:
    """Checks one token against the JWKS and the settings, and names its caller."""

    keys: JwksCache
    issuer: str
    audience: str
    principal_claim: str = "sub"
    roles_claim: str | None = None
    leeway_seconds: int = 30

    async def verify(self, token: str) -> Identity:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.DecodeError:
            raise JwtRejectedError("The access token is malformed") from None
        algorithm = header.get("alg")
        if algorithm not in ALGORITHMS:
            raise JwtRejectedError("The access token's algorithm is not accepted")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise JwtRejectedError("The access token is malformed")
        key = await self.keys.key_for(kid)
        if key is None:
            raise JwtRejectedError("The access token's signing key is unknown")
        claims = self._decode(token, key)
        return Identity(principal=self._principal(claims), roles=self._roles(claims))

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
