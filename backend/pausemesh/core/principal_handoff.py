"""Where the web layer hands the resolved principal to a protocol SDK's request.

A protocol mount (``/mcp``, ``/a2a``) resolves the caller through the host's resolver, then
leaves the principal in the ASGI scope under ``PRINCIPAL_SCOPE_KEY``; the framework-free
protocol code reads it back with ``principal_in_scope``. One key, so writer and readers agree.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ("PRINCIPAL_SCOPE_KEY", "ROLES_SCOPE_KEY", "principal_in_scope", "roles_in_scope")

PRINCIPAL_SCOPE_KEY = "pausemesh.principal"
"""ASGI scope key where a protocol mount leaves the resolved principal."""
ROLES_SCOPE_KEY = "pausemesh.roles"
"""ASGI scope key where a protocol mount leaves the principal's roles (a frozenset)."""


def principal_in_scope(scope: object) -> str | None:
    """The principal a mount left in this ASGI scope (None: anonymous, or not behind a mount)."""
    principal = scope.get(PRINCIPAL_SCOPE_KEY) if isinstance(scope, Mapping) else None
    return principal if isinstance(principal, str) else None


def roles_in_scope(scope: object) -> frozenset[str]:
    """The roles a mount left in this ASGI scope (empty: none, or not behind a mount)."""
    roles = scope.get(ROLES_SCOPE_KEY) if isinstance(scope, Mapping) else None
    return roles if isinstance(roles, frozenset) else frozenset()
