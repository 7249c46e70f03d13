"""The host-supplied principal resolver: who is calling, or 401.

PauseMesh is not an identity provider. A host passes an async callable that takes the
request (Litestar's, or Starlette's for the native Starlette routes) and returns a principal
id (its user, tenant, API client...) or an ``Identity`` (the id and its roles). Returning
``None`` or an empty id, or raising, means "not authenticated". Continuations created by a
principal are visible only to that principal (others get 404). ``resolve_identity`` is the one
place this rule lives, for every binding; ``resolve_principal`` is its principal id.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from litestar import Request

from pausemesh.core.errors import SettingsError, UnauthenticatedError
from pausemesh.core.identity import Identity, caller_identity
from pausemesh.credentials.bearer import BearerAuth, bearer_auth, bearer_challenge
from pausemesh.observability.telemetry import current_request
from pausemesh.settings import Settings

__all__ = (
    "PrincipalResolver",
    "configured_resolver",
    "import_resolver",
    "resolve_identity",
    "resolve_principal",
)

PrincipalResolver = Callable[[Request[Any, Any, Any]], Awaitable[str | Identity | None]]

RequestT = TypeVar("RequestT")

_log = logging.getLogger("pausemesh.web")


async def resolve_identity(
    resolver: Callable[[RequestT], Awaitable[str | Identity | None]] | None, request: RequestT
) -> Identity | None:
    """The caller's identity; ``None`` when the server has no resolver (loopback-only).

    Raises ``UnauthenticatedError`` (401) when the resolver returns ``None``, an empty or
    non-string id, or raises: a failing resolver is an unauthenticated caller, never a 500.
    Every resolver's answer passes ``caller_identity`` here, the one place that refuses a
    reserved principal id and puts an API key's principal in its ``key:`` namespace.
    """
    if resolver is None:
        return None
    try:
        resolved = await resolver(request)
    except UnauthenticatedError:
        raise
    except Exception:  # noqa: BLE001 - any resolver failure is "not authenticated", never a 500
        _log.info("principal resolver rejected a request")
        raise UnauthenticatedError from None
    if isinstance(resolved, str):
        resolved = Identity(principal=resolved)
    if (
        not isinstance(resolved, Identity)
        or not isinstance(resolved.principal, str)
        or not resolved.principal
    ):
        raise UnauthenticatedError
    identity = caller_identity(resolved)
    if identity is None:
        # A principal id that reads as an approver entry or another namespace (role:manager,
        # key:billing-bot) would be that entry or that key: whoever named it, nobody is.
        _log.info("principal resolver named a reserved principal id; refused")
        reason = "The principal id uses a reserved prefix (role:, operation:, key:)"
        bearer = isinstance(resolver, BearerAuth)
        challenge = bearer_challenge("invalid_token", reason) if bearer else None
        raise UnauthenticatedError(reason, challenge=challenge)
    _note_principal(identity.principal)
    return identity


def _note_principal(principal: str) -> None:
    """The access log names the caller by a short hash, never by the principal itself."""
    info = current_request()
    if info is not None:
        info.principal_hash = hashlib.sha256(principal.encode()).hexdigest()[:16]


async def resolve_principal(
    resolver: Callable[[RequestT], Awaitable[str | Identity | None]] | None, request: RequestT
) -> str | None:
    """The caller's principal id (``resolve_identity`` without the roles)."""
    identity = await resolve_identity(resolver, request)
    return None if identity is None else identity.principal


def configured_resolver(
    resolver: Callable[[RequestT], Awaitable[str | Identity | None]] | None, settings: Settings
) -> Callable[[RequestT], Awaitable[str | Identity | None]] | None:
    """The resolver a binding uses: the host's, or the built-in bearer one the settings
    configure (``PAUSEMESH_AUTH_*``); both at once is a configuration error."""
    builtin = bearer_auth(settings)
    if builtin is None:
        return resolver
    if resolver is not None:
        msg = (
            "a principal resolver was passed and PAUSEMESH_AUTH_* settings configure the"
            " built-in bearer resolver: choose one"
        )
        raise SettingsError(msg)
    return builtin


def import_resolver(spec: str) -> PrincipalResolver:
    """Load ``"package.module:attribute"`` (the ``--principal-resolver`` CLI flag)."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        msg = "PAUSEMESH_PRINCIPAL_RESOLVER must look like 'package.module:function'"
        raise ValueError(msg)
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        msg = f"PAUSEMESH_PRINCIPAL_RESOLVER: cannot import {spec!r} ({error})"
        raise ValueError(msg) from None
    resolver = getattr(module, attribute, None)
    if not callable(resolver):
        msg = f"PAUSEMESH_PRINCIPAL_RESOLVER: {spec!r} is not a callable"
        raise TypeError(msg)
    return resolver  # type: ignore[no-any-return]
