"""An ASGI app (Litestar's) as the plain ASGI callable that httpx and asgi-lifespan are typed for.

Litestar types its ``__call__`` with its own scope and message TypedDicts; httpx's
``ASGITransport`` and ``LifespanManager`` name plain dicts, so the type checker refuses the
same object it runs fine with. ``asgi(app)`` is the app itself, typed loosely once here.
"""

from __future__ import annotations

from typing import Any

__all__ = ("asgi",)


def asgi(app: object) -> Any:
    return app
