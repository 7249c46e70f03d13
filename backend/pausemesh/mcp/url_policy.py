"""URL-mode elicitation links: static checks and the trusted host policy that fails closed.

MCP URL mode sends the user to a page outside the client (a third-party sign-in, a payment
form). The server must not send a pre-authenticated link or one carrying sensitive state, and
the page must verify that whoever opens it is the user the pause was made for. Static checks
catch the mistakes a machine can see; the host's ``validate_authorization_url`` attests the
rest. Without that policy URL mode is refused: a generic server cannot vouch for a link.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

from pausemesh.core.errors import ProtocolAdapterError
from pausemesh.core.hosts import is_loopback_host
from pausemesh.core.urls import has_unsafe_characters

__all__ = ("McpProjectionPolicy", "check_authorization_url")

_BINDING = "INVALID_PROTOCOL_BINDING"

# Query keys that look like credentials, compared after lower-casing and keeping [a-z0-9].
_EXACT_CREDENTIAL_KEYS = frozenset({"token", "auth", "code", "jwt", "session", "sig", "ticket"})
_CREDENTIAL_FRAGMENTS = (
    "accesstoken",
    "authtoken",
    "assertion",
    "authorization",
    "bearer",
    "credential",
    "idtoken",
    "apikey",
    "password",
    "passwd",
    "privatekey",
    "refreshtoken",
    "secret",
    "sessionid",
    "signature",
)
_NOT_ALNUM = re.compile(r"[^a-z0-9]")


@dataclass(frozen=True, slots=True, kw_only=True)
class McpProjectionPolicy:
    """Trusted, host-only settings for MCP projections; never read from a request.

    ``validate_authorization_url`` receives the exact link and must return ``True`` to attest
    that it is not pre-authenticated, carries no user-sensitive state and is bound to the
    initiating client and user. Anything else, including an exception, refuses the link.
    """

    allow_insecure_loopback_http: bool = False
    validate_authorization_url: Callable[[str], bool] | None = None


def _fail(message: str) -> ProtocolAdapterError:
    return ProtocolAdapterError(message, code=_BINDING)


def _is_credential_key(key: str) -> bool:
    normalized = _NOT_ALNUM.sub("", key.lower())
    return normalized in _EXACT_CREDENTIAL_KEYS or any(
        fragment in normalized for fragment in _CREDENTIAL_FRAGMENTS
    )


def _check_static(url: str, policy: McpProjectionPolicy | None) -> None:
    # Browsers silently drop tabs and newlines and trim spaces; refuse them instead so the
    # link the user sees is the link that was checked (the one rule of ``core.urls``).
    if has_unsafe_characters(url):
        raise _fail("Authorization URL must not contain whitespace or control characters")
    try:
        parts = urlsplit(url)
        hostname = parts.hostname
        _ = parts.port  # raises on a malformed port
    except ValueError:
        raise _fail("Authorization URL is not a valid absolute URL") from None
    if not parts.scheme or not parts.netloc or not hostname:
        raise _fail("Authorization URL must be an absolute URL with a host")
    if "@" in parts.netloc:
        raise _fail("Authorization URL must not carry user information")
    if "#" in url:
        raise _fail("Authorization URL must not have a fragment")
    if any(_is_credential_key(key) for key, _ in parse_qsl(parts.query, keep_blank_values=True)):
        raise _fail("Authorization URL must not carry credential-like query parameters")
    scheme = parts.scheme.lower()
    if scheme == "http":
        allowed = policy is not None and policy.allow_insecure_loopback_http
        if not (allowed and is_loopback_host(hostname)):
            raise _fail("Authorization URL must use https (http only for a trusted loopback host)")
    elif scheme != "https":
        raise _fail("Authorization URL must use https")


def check_authorization_url(url: str, policy: McpProjectionPolicy | None) -> str:
    """Run the static checks in order, then the host policy; return ``url`` unchanged."""
    _check_static(url, policy)
    if policy is None or policy.validate_authorization_url is None:
        raise _fail("URL mode requires a trusted authorization-URL validation policy")
    try:
        verdict = policy.validate_authorization_url(url)
    except Exception:  # noqa: BLE001 - any failure of the host's check refuses the link
        raise _fail("Authorization URL validation policy failed") from None
    if verdict is not True:
        raise _fail("Authorization URL was rejected by trusted host policy")
    return url
