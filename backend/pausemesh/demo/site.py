"""The browser demo's built assets, served at ``/`` by ``pausemesh demo``.

The bundle is built from ``frontend-demo/`` (``make frontend``) and committed here, so running
the demo needs no Node; ``tests/e2e/test_demo_bundle.py`` proves it is what the source builds.
"""

from __future__ import annotations

from pathlib import Path

from litestar import Router
from litestar.config.app import AppConfig
from litestar.datastructures import CacheControlHeader
from litestar.plugins import InitPlugin
from litestar.static_files import create_static_files_router

from pausemesh.demo.people import demo_people

__all__ = ("STATIC_DIR", "DemoSitePlugin", "demo_site_router")

STATIC_DIR = Path(__file__).resolve().parent / "static"


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
        app_config.route_handlers.extend([demo_people, demo_site_router(self.path)])
        return app_config
