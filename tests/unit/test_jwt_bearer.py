"""JWT bearer identity (``pausemesh.credentials``): tokens signed by a local identity provider,
verified against its JWKS (a real file, or served over loopback HTTP), as the server does.

Every refusal is an ``UnauthenticatedError`` whose challenge is ``Bearer`` with
``error="invalid_token"``; a request with no credential gets the bare ``Bearer`` challenge.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from pathlib import Path
from typing import Any

import pytest

from pausemesh.core.errors import SettingsError, UnauthenticatedError
from pausemesh.core.identity import Identity
from pausemesh.credentials.bearer import BearerAuth, bearer_auth
from pausemesh.settings import Settings, load_settings
from tests.support.identity import (
    FORGERIES,
    JwksServer,
    SigningKey,
    b64,
    claims,
    expired,
    jwt_env,
    segments,
    write_jwks,
)


def _auth(jwks_url: str, **extra: str) -> BearerAuth:
    settings = load_settings(environ=jwt_env(jwks_url, **extra), env_file=None)
    auth = bearer_auth(settings)
    assert auth is not None
    return auth


async def _refusal(auth: BearerAuth, token: str) -> UnauthenticatedError:
    with pytest.raises(UnauthenticatedError) as refused:
        await auth.identify(f"Bearer {token}")
    return refused.value


@pytest.fixture(name="key")
def key_fixture() -> SigningKey:
    return SigningKey.rsa("rsa-1")


@pytest.fixture(name="jwks_file")
def jwks_file_fixture(tmp_path: Path, key: SigningKey) -> Path:
    path = tmp_path / "jwks.json"
    write_jwks(path, key, SigningKey.ec("ec-1"), SigningKey.ed25519("ed-1"))
    return path


@pytest.fixture(name="auth")
def auth_fixture(jwks_file: Path) -> BearerAuth:
    return _auth(jwks_file.as_uri())


@pytest.mark.parametrize("make", [SigningKey.rsa, SigningKey.ec, SigningKey.ed25519])
async def test_a_token_signed_by_a_published_key_names_its_subject_and_roles(
    tmp_path: Path, make: Any
) -> None:
    key = make()
    path = tmp_path / "jwks.json"
    write_jwks(path, key)
    auth = _auth(path.as_uri())
    identity = await auth.identify(f"Bearer {key.token('alice', roles=['agent', 'approver'])}")
    assert identity == Identity(principal="alice", roles=frozenset({"agent", "approver"}))


@pytest.mark.parametrize("forge", FORGERIES, ids=lambda f: f.__name__.lstrip("_"))
async def test_a_token_that_does_not_verify_is_refused_with_an_invalid_token_challenge(
    auth: BearerAuth, key: SigningKey, forge: Any
) -> None:
    refused = await _refusal(auth, forge(key))
    assert refused.code == "UNAUTHENTICATED"
    assert refused.challenge is not None
    assert refused.challenge.startswith('Bearer realm="pausemesh", error="invalid_token"')


async def test_an_expired_token_says_so_in_the_challenge(auth: BearerAuth, key: SigningKey) -> None:
    refused = await _refusal(auth, expired(key))
    assert 'error_description="The access token has expired"' in (refused.challenge or "")


async def test_a_request_without_a_credential_gets_the_bare_bearer_challenge(
    auth: BearerAuth,
) -> None:
    with pytest.raises(UnauthenticatedError) as refused:
        await auth.identify(None)
    assert refused.value.challenge == 'Bearer realm="pausemesh"'


@pytest.mark.parametrize(
    "header", ["Basic YWxpY2U6c2VjcmV0", "Bearer", "Bearer a b", "PauseMesh x"]
)
async def test_a_malformed_authorization_header_is_refused(auth: BearerAuth, header: str) -> None:
    with pytest.raises(UnauthenticatedError) as refused:
        await auth.identify(header)
    assert 'error="invalid_request"' in (refused.value.challenge or "")


async def test_a_symmetric_key_in_the_jwks_is_never_used(tmp_path: Path, key: SigningKey) -> None:
    secret = b"a-shared-secret-someone-published-by-mistake"
    path = tmp_path / "jwks.json"
    published = {"kty": "oct", "kid": "oct-1", "k": b64(secret)}
    path.write_text(json.dumps({"keys": [key.public_jwk(), published]}))
    signing_input = segments({"alg": "HS256", "typ": "JWT", "kid": "oct-1"}, claims())
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    await _refusal(_auth(path.as_uri()), signing_input + "." + b64(signature))


async def test_a_key_signing_with_another_algorithm_than_its_own_is_refused(
    tmp_path: Path,
) -> None:
    # An ES256 key's kid on a token whose header claims RS256: the key decides the algorithm.
    rsa_key, ec_key = SigningKey.rsa("rsa-x"), SigningKey.ec("ec-x")
    path = tmp_path / "jwks.json"
    write_jwks(path, ec_key)
    confused = SigningKey(kid="ec-x", algorithm="RS256", private=rsa_key.private).token()
    await _refusal(_auth(path.as_uri()), confused)


async def test_a_new_kid_in_the_jwks_file_is_accepted_without_a_restart(
    tmp_path: Path, key: SigningKey
) -> None:
    path = tmp_path / "jwks.json"
    write_jwks(path, key)
    auth = _auth(path.as_uri(), PAUSEMESH_AUTH_JWKS_REFRESH_SECONDS="0")
    assert (await auth.identify(f"Bearer {key.token('alice')}")).principal == "alice"

    rotated = SigningKey.ec("ec-rotated")
    await _refusal(auth, rotated.token("bob"))
    write_jwks(path, key, rotated)
    assert (await auth.identify(f"Bearer {rotated.token('bob')}")).principal == "bob"


async def test_a_rotated_key_served_over_http_is_fetched_once_and_unknown_kids_are_rate_limited(
    key: SigningKey,
) -> None:
    with JwksServer(key).running() as idp:
        auth = _auth(idp.url, PAUSEMESH_AUTH_JWKS_REFRESH_SECONDS="0")
        for _ in range(3):
            await auth.identify(f"Bearer {key.token()}")
        assert idp.requests == 1  # parsed once, cached

        rotated = SigningKey.ed25519("ed-rotated")
        idp.keys.append(rotated)
        assert (await auth.identify(f"Bearer {rotated.token('carol')}")).principal == "carol"
        assert idp.requests == 2

        limited = _auth(idp.url, PAUSEMESH_AUTH_JWKS_REFRESH_SECONDS="3600")
        await limited.identify(f"Bearer {key.token()}")
        before = idp.requests
        for _ in range(5):
            await _refusal(limited, SigningKey.rsa().token())  # a flood of forged kids
        assert idp.requests == before


async def test_an_unreachable_jwks_refuses_tokens_instead_of_failing(key: SigningKey) -> None:
    auth = _auth("http://127.0.0.1:9/jwks.json")  # discard port: nothing listens
    refused = await _refusal(auth, key.token())
    assert "signing key is unknown" in refused.message


@pytest.mark.parametrize(
    ("claim", "value", "roles"),
    [
        ("scope", "read:threads answer:pauses", {"read:threads", "answer:pauses"}),
        ("https://app.example.com/roles", ["admin"], {"admin"}),
        ("groups", "not-a-list-of-roles", {"not-a-list-of-roles"}),
        ("groups", {"nested": "object"}, set()),
    ],
)
async def test_the_roles_claim_may_be_a_list_a_scope_string_or_a_namespaced_name(
    jwks_file: Path, key: SigningKey, claim: str, value: Any, roles: set[str]
) -> None:
    auth = _auth(jwks_file.as_uri(), PAUSEMESH_AUTH_ROLES_CLAIM=claim)
    identity = await auth.identify(f"Bearer {key.token(**{claim: value})}")
    assert identity.roles == roles


async def test_the_principal_claim_is_configurable(jwks_file: Path, key: SigningKey) -> None:
    auth = _auth(jwks_file.as_uri(), PAUSEMESH_AUTH_PRINCIPAL_CLAIM="email")
    identity = await auth.identify(f"Bearer {key.token(email='alice@example.com')}")
    assert identity.principal == "alice@example.com"


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"PAUSEMESH_AUTH_JWKS_URL": "https://idp.example/jwks"}, "PAUSEMESH_AUTH_ISSUER"),
        (jwt_env("http://idp.example/jwks"), "https://"),
        (jwt_env("ftp://idp.example/jwks"), "PAUSEMESH_AUTH_JWKS_URL"),
        (
            jwt_env("https://idp.example/jwks", PAUSEMESH_PRINCIPAL_RESOLVER="m:f"),
            "exclusive",
        ),
        (
            {"PAUSEMESH_AUTH_API_KEYS_FILE": "k.json", "PAUSEMESH_PRINCIPAL_RESOLVER": "m:f"},
            "exclusive",
        ),
    ],
)
def test_inconsistent_auth_settings_are_refused_at_start(
    environ: dict[str, str], message: str
) -> None:
    with pytest.raises(SettingsError, match=message):
        load_settings(environ=environ, env_file=None)


def test_no_auth_settings_mean_no_bearer_resolver() -> None:
    assert bearer_auth(Settings()) is None


async def test_a_remembered_token_is_refused_once_it_expires(
    jwks_file: Path, key: SigningKey
) -> None:
    auth = _auth(jwks_file.as_uri(), PAUSEMESH_AUTH_LEEWAY_SECONDS="0")
    token = key.token("alice", exp=int(time.time()) + 2)
    assert (await auth.identify(f"Bearer {token}")).principal == "alice"
    assert (await auth.identify(f"Bearer {token}")).principal == "alice"  # remembered
    await asyncio.sleep(3.1)  # past exp: no assertion on time, only on the outcome
    refused = await _refusal(auth, token)
    assert refused.message == "The access token has expired"


async def test_a_remembered_token_is_refused_once_its_key_leaves_the_jwks(
    tmp_path: Path, key: SigningKey
) -> None:
    path = tmp_path / "jwks.json"
    write_jwks(path, key)
    auth = _auth(path.as_uri(), PAUSEMESH_AUTH_JWKS_REFRESH_SECONDS="0")
    token = key.token("alice")
    assert (await auth.identify(f"Bearer {token}")).principal == "alice"

    successor = SigningKey.ec("successor")
    write_jwks(path, successor)  # the provider withdrew the old key
    assert (await auth.identify(f"Bearer {successor.token('bob')}")).principal == "bob"
    refused = await _refusal(auth, token)
    assert refused.message == "The access token's signing key is unknown"
