"""``PauseMeshCaller``: what a PauseMesh route needs about the request, in one dependency.

One dependency rather than several on purpose: Litestar resolves sibling dependencies
concurrently in an anyio task group (a task per dependency), which costs more than the work
itself on the hot path. So the limits and the owed runs travel here too.
"""

from __future__ import annotations

from dataclasses import dataclass

from pausemesh.core.service import ContinuationService
from pausemesh.web.config import PauseMeshConfig
from pausemesh.web.limits import Limits
from pausemesh.web.owed import OwedRuns

__all__ = ("PauseMeshCaller",)


@dataclass(frozen=True, slots=True)
class PauseMeshCaller:
    service: ContinuationService
    principal: str | None
    """The host resolver's principal; ``None`` on servers without one."""
    config: PauseMeshConfig
    limits: Limits
    """The running runtime's rate limit, stream cap and drain."""
    owed: OwedRuns
    """Continues threads decided through this route (a no-op without an agent)."""
    roles: frozenset[str] = frozenset()
    """The roles the resolver gave the principal (empty for a plain principal id)."""
