"""The browser demo's built assets, served at ``/`` by ``pausemesh demo``.

The bundle is built from ``frontend-demo/`` (``make frontend``) and committed here, so running
the demo needs no Node; ``tests/e2e/test_demo_bundle.py`` proves it is what the source builds.

The page and its assets carry the headers a page that changes state needs: no framing by
another site (``frame-ancestors 'none'``, clickjacking), no content sniffing, no referrer to
other sites. ``Referrer-Policy: same-origin``, not ``no-referrer``: with the latter a browser
sends ``Origin: null`` on the page's own POSTs, which the Origin check refuses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from litestar import Router
from litestar.config.app import AppConfig
from litestar.datastructures import CacheControlHeader
from litestar.enums import ScopeType
from litestar.plugins import InitPlugin
from litestar.static_files import create_static_files_router
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from pausemesh.demo.people import demo_people

__all__ = ("PAGE_HEADERS", "STATIC_DIR", "DemoSitePlugin", "PageHeaders", "demo_site_router")

STATIC_DIR = Path(__file__).resolve().parent / "static"

PAGE_HEADERS: Final = (
    (
        b"content-security-policy",
        b"frame-ancestors 'none'; base-uri 'self'; object-src 'none'; form-action 'self'",
    ),
    # For browsers that predate frame-ancestors.
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
)


class PageHeaders:
    """ASGI middleware adding ``PAGE_HEADERS`` to every response of the routes it wraps."""

    __slots__ = ("app",)

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *PAGE_HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)


def demo_site_router(path: str = "/") -> Router:
    """A router serving the demo UI (``index.html`` for ``/``) under ``path``."""
    if not (STATIC_DIR / "index.html").is_file():
        msg = f"the demo UI is missing from {STATIC_DIR}; rebuild it with `make frontend`"
        raise RuntimeError(msg)
    return create_static_files_router(
        path=path,
        directories=[STATIC_DIR],
        html_mode=True,
        name="pausemesh-demo-site",
        include_in_schema=False,
        # Asset names carry a content hash; index.html is small and must never go stale.
        cache_control=CacheControlHeader(no_cache=True),
    )


class DemoSitePlugin(InitPlugin):
    """Adds the demo UI to an app: ``create_app(settings, agent=..., plugins=[DemoSitePlugin()])``."""

    __slots__ = ("path",)

    def __init__(self, path: str = "/") -> None:
        self.path = path

    def on_app_init(self, app_config: AppConfig) -> AppConfig:
        app_config.route_handlers.append(
            Router(
                path="/",
                route_handlers=[demo_people, demo_site_router(self.path)],
                middleware=[PageHeaders],
            )
        )
        return app_config
