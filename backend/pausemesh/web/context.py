"""``PauseMeshCaller``: what a PauseMesh route needs about the request, in one dependency.

One dependency rather than several on purpose: Litestar resolves sibling dependencies
concurrently in a task group, which costs more than the work itself on the hot path.
"""

from __future__ import annotations

from dataclasses import dataclass

from pausemesh.core.service import ContinuationService
from pausemesh.web.config import PauseMeshConfig

__all__ = ("PauseMeshCaller",)


@dataclass(frozen=True, slots=True)
class PauseMeshCaller:
    service: ContinuationService
    principal: str | None
    """The host resolver's principal; ``None`` on servers without one."""
    config: PauseMeshConfig
    roles: frozenset[str] = frozenset()
    """The roles the resolver gave the principal (empty for a plain principal id)."""
