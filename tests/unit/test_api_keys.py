"""API keys (``pausemesh.credentials.api_keys``): shown once, kept as hashes, revocable live."""

from __future__ import annotations

import hashlib
import json
import stat
from pathlib import Path

import pytest

from pausemesh.core.errors import SettingsError, UnauthenticatedError
from pausemesh.core.identity import Identity, caller_identity
from pausemesh.credentials.api_keys import ApiKeyFile, create_api_key, revoke_api_key
from pausemesh.credentials.bearer import BearerAuth


def test_a_created_key_identifies_its_principal_and_roles(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    key, record = create_api_key(path, principal="billing-bot", roles=["refunds", "agent"])
    assert key.startswith(f"pmk_{record.id}_")
    # The key's own namespace: the server calls it key:billing-bot (``caller_identity``).
    identity = Identity(
        principal="billing-bot", roles=frozenset({"refunds", "agent"}), namespace="key"
    )
    assert ApiKeyFile(path).identify(key) == identity
    assert caller_identity(identity) == Identity(
        principal="key:billing-bot", roles=frozenset({"refunds", "agent"})
    )
    assert record.caller == "key:billing-bot"


def test_an_exact_principal_key_calls_as_the_principal_itself(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    key, record = create_api_key(path, principal="alice", exact_principal=True)
    assert record.caller == "alice"
    assert json.loads(path.read_text())["keys"][0]["exact_principal"] is True
    assert ApiKeyFile(path).identify(key) == Identity(principal="alice")


@pytest.mark.parametrize(
    "principal", ["role:manager", "operation:op-1", "key:billing-bot", "ROLE:manager"]
)
@pytest.mark.parametrize("exact", [False, True])
def test_a_reserved_principal_is_refused_at_creation_and_nothing_is_written(
    tmp_path: Path, principal: str, exact: bool
) -> None:
    path = tmp_path / "keys.json"
    with pytest.raises(SettingsError, match="reserved") as info:
        create_api_key(path, principal=principal, exact_principal=exact)
    assert "\n" not in str(info.value)
    assert not path.exists()


def test_a_hand_written_reserved_principal_is_named_as_written_and_refused_where_identities_are(
    tmp_path: Path,
) -> None:
    path = tmp_path / "keys.json"
    key, _ = create_api_key(path, principal="placeholder")
    document = json.loads(path.read_text())
    document["keys"][0]["principal"] = "role:manager"
    path.write_text(json.dumps(document))
    identity = ApiKeyFile(path).identify(key)
    assert identity == Identity(principal="role:manager", namespace="key")
    assert caller_identity(identity) is None


def test_the_file_holds_the_keys_hash_never_the_key(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    key, record = create_api_key(path, principal="alice")
    text = path.read_text()
    secret = key.split("_", 2)[2]
    assert secret not in text
    assert json.loads(text)["keys"][0]["sha256"] == hashlib.sha256(secret.encode()).hexdigest()
    assert record.sha256 in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_revoked_key_is_refused_by_a_reader_that_loaded_the_file_before(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    key, record = create_api_key(path, principal="alice")
    other, _ = create_api_key(path, principal="bob")
    reader = ApiKeyFile(path)
    assert reader.identify(key) is not None

    revoked = revoke_api_key(path, f"pmk_{record.id}")
    assert revoked.revoked_at is not None
    assert reader.identify(key) is None
    assert reader.identify(other) == Identity(principal="bob", namespace="key")


@pytest.mark.parametrize("name", ["id", "prefix", "whole key"])
def test_a_key_can_be_revoked_by_its_id_its_prefix_or_itself(tmp_path: Path, name: str) -> None:
    path = tmp_path / "keys.json"
    key, record = create_api_key(path, principal="alice")
    given = {"id": record.id, "prefix": f"pmk_{record.id}", "whole key": key}[name]
    assert revoke_api_key(path, given).id == record.id
    assert ApiKeyFile(path).identify(key) is None


def test_revoking_an_unknown_key_says_so(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    create_api_key(path, principal="alice")
    with pytest.raises(SettingsError, match="no API key"):
        revoke_api_key(path, "pmk_000000000000")


def test_a_key_with_a_right_id_and_a_wrong_secret_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    key, _ = create_api_key(path, principal="alice")
    forged = key[:-4] + ("AAAA" if not key.endswith("AAAA") else "BBBB")
    assert ApiKeyFile(path).identify(forged) is None


async def test_the_bearer_resolver_refuses_an_unknown_key_with_an_invalid_token_challenge(
    tmp_path: Path,
) -> None:
    path = tmp_path / "keys.json"
    key, _ = create_api_key(path, principal="alice", roles=["ops"])
    auth = BearerAuth(api_keys=ApiKeyFile(path))
    expected = Identity("alice", frozenset({"ops"}), namespace="key")
    assert await auth.identify(f"Bearer {key}") == expected
    for bad in ("pmk_nothing", "eyJhbGciOi.JIUzI1NiJ9.e30", "opaque-token"):
        with pytest.raises(UnauthenticatedError) as refused:
            await auth.identify(f"Bearer {bad}")
        assert 'error="invalid_token"' in (refused.value.challenge or "")


def test_a_role_with_spaces_is_refused_at_creation(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="role"):
        create_api_key(tmp_path / "keys.json", principal="alice", roles=["two words"])
