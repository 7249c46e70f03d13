"""Principal resolvers for tests (importable by a server process: ``module:function``)."""

from __future__ import annotations

from typing import Any

from litestar import Request

__all__ = ("header_principal",)


async def header_principal(request: Request[Any, Any, Any]) -> str | None:
    """A trusted proxy puts the user in ``x-user``; anything else is anonymous (401)."""
    return request.headers.get("x-user") or None
