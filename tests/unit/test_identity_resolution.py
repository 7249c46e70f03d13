"""The one resolver rule: a principal id or an Identity, anything else is 401."""

from __future__ import annotations

import pytest

from pausemesh.core.errors import UnauthenticatedError
from pausemesh.core.identity import Identity
from pausemesh.web.auth import resolve_identity, resolve_principal


async def test_a_plain_principal_id_becomes_an_identity_without_roles() -> None:
    async def resolver(_: object) -> str:
        return "alice"

    assert await resolve_identity(resolver, object()) == Identity(principal="alice")
    assert await resolve_principal(resolver, object()) == "alice"


async def test_an_identity_keeps_its_roles() -> None:
    async def resolver(_: object) -> Identity:
        return Identity(principal="mia", roles=frozenset({"manager"}))

    identity = await resolve_identity(resolver, object())
    assert identity is not None
    assert identity.has_role("manager")
    assert not identity.has_role("admin")


@pytest.mark.parametrize("returned", [None, "", Identity(principal=""), 42])
async def test_nobody_or_an_empty_id_is_unauthenticated(returned: object) -> None:
    async def resolver(_: object) -> object:
        return returned

    with pytest.raises(UnauthenticatedError):
        await resolve_identity(resolver, object())  # type: ignore[arg-type]


async def test_a_resolver_that_raises_is_unauthenticated_not_an_error() -> None:
    async def resolver(_: object) -> str:
        raise RuntimeError("identity provider down")

    with pytest.raises(UnauthenticatedError):
        await resolve_identity(resolver, object())


async def test_no_resolver_means_no_identity() -> None:
    assert await resolve_identity(None, object()) is None
