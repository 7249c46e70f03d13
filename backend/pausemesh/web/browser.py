"""Browser safety: which pages may call PauseMesh, and with what.

* CORS (``PAUSEMESH_CORS_ORIGINS``, none by default) goes through Litestar's own support;
  ``cors_config`` lists what a cross-origin client sends and what it must read back (the
  problem headers, ``Retry-After``, the MCP session id).
* CSRF: a browser attaches cookies to cross-site form posts and to ``fetch`` with
  ``text/plain``, which need no preflight. So a state-changing request (POST, PUT, PATCH,
  DELETE) whose ``Origin`` is neither the server's own (the scheme, ``Host`` and port this
  request came in with) nor allowed is refused (403 ``ORIGIN_NOT_ALLOWED``), and a body sent
  to a JSON endpoint under another content type, or under none, is refused (415
  ``UNSUPPORTED_MEDIA_TYPE``): neither runs anything. Clients that are not browsers send no
  ``Origin`` and are not affected.
* DNS rebinding (a foreign page posing as the server's own origin) is ``web.host_guard``'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from litestar.config.cors import CORSConfig
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Receive, Scope, Send

from pausemesh.core.errors import (
    OriginNotAllowedError,
    PauseMeshError,
    UnsupportedMediaTypeError,
)
from pausemesh.settings import Settings
from pausemesh.web.problems import problem_for, send_encoded

__all__ = ("BrowserGuard", "browser_refusal", "cors_config")

_STATE_CHANGING: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_WITH_BODY: Final = frozenset({"POST", "PUT", "PATCH"})
_REQUEST_HEADERS: Final = [
    "Accept",
    "Authorization",
    "Content-Type",
    "Idempotency-Key",
    "Last-Event-ID",
    "Mcp-Protocol-Version",
    "Mcp-Session-Id",
    "PauseMesh-Token",
]
_EXPOSED_HEADERS: Final = ["Mcp-Session-Id", "Retry-After", "WWW-Authenticate"]


def cors_config(settings: Settings) -> CORSConfig | None:
    """Litestar's CORS for the configured origins; None (no CORS headers at all) by default."""
    origins = list(settings.allowed_origins)
    if not origins:
        return None
    return CORSConfig(
        allow_origins=origins,
        allow_methods=["GET", "POST", "PATCH", "DELETE", "OPTIONS"],
        allow_headers=_REQUEST_HEADERS,
        expose_headers=_EXPOSED_HEADERS,
        # Listed origins only (never "*"), so a host resolving principals from a cookie works.
        allow_credentials=True,
        max_age=600,
    )


# The only headers the guard reads. ASGI servers send names lower-cased already; the guard
# still lower-cases them (a hand-built scope may not), and only these are kept.
_WANTED: Final = frozenset({b"origin", b"host", b"content-length", b"content-type"})
_CHUNKED: Final = b"transfer-encoding"


def _headers(scope: Mapping[str, Any]) -> dict[bytes, bytes]:
    """The guard's headers in one pass; of a repeated name the last is kept, as before."""
    raw: Iterable[tuple[bytes, bytes]] = scope.get("headers", ())
    found: dict[bytes, bytes] = {}
    for name, value in raw:
        key = name if name.islower() else name.lower()
        if key in _WANTED or key == _CHUNKED:
            found[key] = value
    return found


_DEFAULT_PORTS: Final = {"http": ":80", "https": ":443"}


def _without_default_port(origin: str, scheme: str) -> str:
    port = _DEFAULT_PORTS[scheme]
    return origin.removesuffix(port) if origin.endswith(port) else origin


def _own_origin(origin: str, host: bytes | None, scheme: str) -> bool:
    """``origin`` is this request's own: the same scheme, host and port (a default port
    written out or left off alike). ``https://127.0.0.1:P`` is not ``http://127.0.0.1:P``."""
    if host is None:
        return False
    scheme = "https" if scheme in {"https", "wss"} else "http"
    own = f"{scheme}://{host.decode('latin-1').strip().lower()}"
    return _without_default_port(origin, scheme) == _without_default_port(own, scheme)


def _is_json(content_type: bytes) -> bool:
    media = content_type.split(b";", 1)[0].strip().lower()
    return media == b"application/json" or media.endswith(b"+json")


def browser_refusal(
    scope: Mapping[str, Any], allowed_origins: tuple[str, ...]
) -> PauseMeshError | None:
    """Why this request must not run (a foreign origin, a non-JSON body), or None."""
    method = scope.get("method", "GET")
    if method not in _STATE_CHANGING:
        return None
    headers = _headers(scope)
    origin = headers.get(b"origin")
    if origin is not None:
        text = origin.decode("latin-1").strip().lower()
        scheme = scope.get("scheme", "http")
        if text not in allowed_origins and not _own_origin(text, headers.get(b"host"), scheme):
            return OriginNotAllowedError()
    if method in _WITH_BODY:
        length = headers.get(b"content-length", b"").strip()
        has_body = b"transfer-encoding" in headers or (length not in {b"", b"0"})
        content_type = headers.get(b"content-type")
        # An unlabeled body is refused too: nothing is parsed as JSON that did not say so.
        if has_body and (content_type is None or not _is_json(content_type)):
            return UnsupportedMediaTypeError()
    return None


class BrowserGuard:
    """ASGI middleware applying ``browser_refusal`` before a route runs."""

    __slots__ = ("allowed_origins", "app")

    def __init__(self, app: ASGIApp, allowed_origins: tuple[str, ...] = ()) -> None:
        self.app = app
        self.allowed_origins = allowed_origins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == ScopeType.HTTP:
            refusal = browser_refusal(scope, self.allowed_origins)
            if refusal is not None:
                await send_encoded(send, problem_for(refusal))
                return
        await self.app(scope, receive, send)
