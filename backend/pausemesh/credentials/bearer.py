"""``Authorization: Bearer <credential>``: a JWT goes to the JWT verifier, a ``pmk_`` key to
the API key file; the result is an ``Identity`` or a 401 with a ``Bearer`` challenge.

Built from settings (``bearer_auth``), it is the principal resolver of the app, the native
Starlette routes and the protocol mounts alike: anything with ``request.headers.get`` will do.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from pausemesh.core.errors import SettingsError, UnauthenticatedError
from pausemesh.core.identity import Identity
from pausemesh.credentials.api_keys import ApiKeyFile, looks_like_api_key
from pausemesh.credentials.jwks import JwksCache
from pausemesh.credentials.jwt_bearer import JwtRejectedError, JwtVerifier, looks_like_jwt
from pausemesh.settings import Settings

__all__ = ("BearerAuth", "bearer_auth", "bearer_challenge")

REALM = "pausemesh"
_BEARER_RE = re.compile(r"^Bearer[ \t]+(\S+)[ \t]*$", re.IGNORECASE)
# RFC 6750 §3: error_description is limited to these characters.
_DESCRIPTION_UNSAFE = re.compile(r"[^\x20-\x21\x23-\x5b\x5d-\x7e]")

_log = logging.getLogger("pausemesh.credentials")


def bearer_challenge(error: str | None = None, description: str | None = None) -> str:
    """A ``WWW-Authenticate: Bearer`` value (RFC 6750 §3): no error code when no credential
    was sent, ``invalid_token`` when one was and it did not verify."""
    parts = [f'Bearer realm="{REALM}"']
    if error is not None:
        parts.append(f'error="{error}"')
    if description is not None:
        parts.append(f'error_description="{_DESCRIPTION_UNSAFE.sub("", description)}"')
    return ", ".join(parts)


def _rejected(reason: str, error: str = "invalid_token") -> UnauthenticatedError:
    return UnauthenticatedError(reason, challenge=bearer_challenge(error, reason))


class BearerAuth:
    """The built-in resolver: a verifier for JWTs, a key file for API keys, or both."""

    def __init__(self, *, jwt: JwtVerifier | None = None, api_keys: ApiKeyFile | None = None):
        if jwt is None and api_keys is None:
            msg = "BearerAuth needs a JWT verifier, an API key file or both"
            raise ValueError(msg)
        self.jwt = jwt
        self.api_keys = api_keys

    async def __call__(self, request: Any) -> Identity:
        """A principal resolver: any framework's request (only ``request.headers`` is read)."""
        return await self.identify(request.headers.get("authorization"))

    async def identify(self, authorization: str | None) -> Identity:
        """The caller named by an ``Authorization`` header value; ``UnauthenticatedError``
        (with its ``Bearer`` challenge) for a missing, malformed or refused credential."""
        if not authorization:
            raise UnauthenticatedError(challenge=bearer_challenge())
        match = _BEARER_RE.match(authorization)
        if match is None:
            raise _rejected(
                "Send the credential as 'Authorization: Bearer <token>'", "invalid_request"
            )
        credential = match.group(1)
        if self.jwt is not None and looks_like_jwt(credential):
            try:
                return await self.jwt.verify(credential)
            except JwtRejectedError as error:
                _log.info("bearer token refused: %s", error.reason)
                raise _rejected(error.reason) from None
        if self.api_keys is not None and looks_like_api_key(credential):
            identity = self.api_keys.identify(credential)
            if identity is not None:
                return identity
            _log.info("API key refused (unknown, revoked or malformed)")
            raise _rejected("The API key is unknown or revoked")
        raise _rejected("The bearer credential is not one this server accepts")


def bearer_auth(settings: Settings) -> BearerAuth | None:
    """The resolver ``settings`` configure (``PAUSEMESH_AUTH_*``), or None if they name none."""
    if not settings.uses_bearer_auth:
        return None
    verifier = None
    if settings.auth_jwks_url is not None:
        issuer, audience = settings.auth_issuer, settings.auth_audience
        if issuer is None or audience is None:  # load_settings already refuses this
            msg = "PAUSEMESH_AUTH_ISSUER and PAUSEMESH_AUTH_AUDIENCE are required"
            raise SettingsError(msg)
        verifier = JwtVerifier(
            keys=JwksCache(
                settings.auth_jwks_url,
                refresh_interval=settings.auth_jwks_refresh_seconds,
                max_age=settings.auth_jwks_cache_seconds,
            ),
            issuer=issuer,
            audience=audience,
            principal_claim=settings.auth_principal_claim,
            roles_claim=settings.auth_roles_claim,
            leeway_seconds=settings.auth_leeway_seconds,
        )
    api_keys = None
    if settings.auth_api_keys_file is not None:
        api_keys = ApiKeyFile(settings.auth_api_keys_file)
    return BearerAuth(jwt=verifier, api_keys=api_keys)
