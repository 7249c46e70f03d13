"""Settings: environment, .env file and CLI overrides, validated with the setting's name."""

from __future__ import annotations

import os
import stat
from dataclasses import fields
from pathlib import Path
from typing import get_args, get_type_hints

import pytest

from pausemesh.bootstrap import build_service
from pausemesh.core.errors import InvalidInputError, SettingsError
from pausemesh.core.hosts import is_loopback_host
from pausemesh.core.resume import Resume, TrustedHost
from pausemesh.server_key import resolve_key_ring, resolve_secret_key
from pausemesh.settings import Settings, load_settings
from pausemesh.stores.sqlite import open_sqlite_storage


def test_defaults_match_the_documented_ones() -> None:
    settings = load_settings(environ={}, env_file=None)
    assert settings == Settings()
    assert (settings.host, settings.port) == ("127.0.0.1", 8787)
    assert settings.database_path == "./data/pausemesh.db"
    assert settings.token_ttl_seconds == 900
    assert settings.max_payload_bytes == 65_536
    assert settings.max_thread_bytes == 8 * 1024 * 1024
    assert settings.log_level == "info"


def test_cli_overrides_environment_which_overrides_the_env_file(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("PAUSEMESH_PORT=1111\nPAUSEMESH_LOG_LEVEL=debug\nPAUSEMESH_HOST=::1\n")
    settings = load_settings(
        environ={"PAUSEMESH_PORT": "2222", "PAUSEMESH_TOKEN_TTL_SECONDS": "60", "OTHER": "x"},
        env_file=env_file,
        overrides={"port": "3333", "host": None},
    )
    assert settings.port == 3333
    assert settings.log_level == "debug"
    assert settings.host == "::1"
    assert settings.token_ttl_seconds == 60


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("PAUSEMESH_PORT", "http", "PAUSEMESH_PORT must be an integer between 1 and 65535"),
        ("PAUSEMESH_PORT", "0", "PAUSEMESH_PORT must be an integer between 1 and 65535"),
        ("PAUSEMESH_TOKEN_TTL_SECONDS", "5", "PAUSEMESH_TOKEN_TTL_SECONDS must be an integer"),
        ("PAUSEMESH_MAX_PAYLOAD_BYTES", "1e9", "PAUSEMESH_MAX_PAYLOAD_BYTES must be an integer"),
        (
            "PAUSEMESH_MAX_THREAD_BYTES",
            "1024",
            "PAUSEMESH_MAX_THREAD_BYTES must be an integer between 65536 and 268435456",
        ),
        ("PAUSEMESH_MAX_THREAD_BYTES", "8MiB", "PAUSEMESH_MAX_THREAD_BYTES must be an integer"),
        (
            "PAUSEMESH_IDLE_CONNECTION_SECONDS",
            "0.5",
            "PAUSEMESH_IDLE_CONNECTION_SECONDS must be an",
        ),
        ("PAUSEMESH_LOG_LEVEL", "loud", "PAUSEMESH_LOG_LEVEL must be one of"),
        ("PAUSEMESH_SQLITE_SYNC", "sometimes", "PAUSEMESH_SQLITE_SYNC must be one of"),
        ("PAUSEMESH_DATABASE_PATH", "  ", "PAUSEMESH_DATABASE_PATH must not be empty"),
        ("PAUSEMESH_DATABASE_PATH", ":memory:", "PAUSEMESH_DATABASE_PATH must be a file path"),
        ("PAUSEMESH_DATABASE_URL", "mysql://x", "PAUSEMESH_DATABASE_URL must be a postgresql://"),
        ("PAUSEMESH_DATABASE_SCHEMA", "a;drop", "PAUSEMESH_DATABASE_SCHEMA must be a plain SQL"),
        ("PAUSEMESH_SECRET_KEY", "short", "PAUSEMESH_SECRET_KEY must be at least 32 bytes"),
        ("PAUSEMESH_INSECURE_NO_AUTH", "maybe", "PAUSEMESH_INSECURE_NO_AUTH must be a boolean"),
        ("PAUSEMESH_ALLOWED_HOSTS", "api.example.com:443", "PAUSEMESH_ALLOWED_HOSTS must be comma"),
        ("PAUSEMESH_ALLOWED_HOSTS", "https://api.example.com", "PAUSEMESH_ALLOWED_HOSTS must be"),
        ("PAUSEMESH_ALLOWED_HOSTS", "a.example, *.", "PAUSEMESH_ALLOWED_HOSTS must be comma"),
        ("PAUSEMESH_METRICS_TOKEN", "short", "PAUSEMESH_METRICS_TOKEN must be a bearer token"),
        ("PAUSEMESH_METRICS_TOKEN", "x" * 20 + " y", "PAUSEMESH_METRICS_TOKEN must be a bearer"),
    ],
)
def test_a_bad_value_is_reported_with_the_setting_name(name: str, value: str, message: str) -> None:
    with pytest.raises(SettingsError, match=message.replace("(", r"\(")):
        load_settings(environ={name: value}, env_file=None)


def test_postgres_refuses_to_start_without_a_shared_key() -> None:
    with pytest.raises(SettingsError, match="PAUSEMESH_SECRET_KEY"):
        load_settings(environ={"PAUSEMESH_DATABASE_URL": "postgresql://h/db"}, env_file=None)
    settings = load_settings(
        environ={"PAUSEMESH_DATABASE_URL": "postgresql://h/db", "PAUSEMESH_SECRET_KEY": "k" * 32},
        env_file=None,
    )
    assert settings.uses_postgres
    assert "k" * 32 not in repr(settings)
    assert "postgresql://h/db" not in repr(settings)


def test_sqlite_creates_a_private_key_file_once_and_reuses_it(tmp_path: Path) -> None:
    settings = Settings(database_path=str(tmp_path / "db" / "pausemesh.db"))
    first = resolve_secret_key(settings)
    key_file = tmp_path / "db" / "secret.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert resolve_secret_key(settings) == first
    assert len(first.key) >= 32
    assert first.key.decode() not in repr(first)
    assert [p.name for p in key_file.parent.iterdir() if p.name.startswith(".")] == []


def test_a_given_key_has_a_stable_id_on_every_replica(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("z" * 40 + "\n")
    from_file = resolve_secret_key(Settings(secret_key_file=str(key_file)))
    from_env = resolve_secret_key(Settings(secret_key="z" * 40))
    assert from_file == from_env
    with pytest.raises(SettingsError, match="PAUSEMESH_SECRET_KEY_FILE cannot be read"):
        resolve_secret_key(Settings(secret_key_file=str(tmp_path / "missing")))


def test_loopback_detection() -> None:
    assert all(map(is_loopback_host, ["127.0.0.1", "::1", "localhost", "127.1.2.3", "[::1]"]))
    assert not any(map(is_loopback_host, ["0.0.0.0", "::", "10.0.0.1", "example.com"]))  # noqa: S104


def test_the_process_environment_is_the_default_source(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAUSEMESH_PORT", "4444")
    assert load_settings(env_file=os.devnull).port == 4444


def test_the_documented_settings_table_matches_the_code() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "http-api.md").read_text()
    table = doc[doc.index("## Settings") :]
    rows = [line for line in table.splitlines() if line.startswith("| `PAUSEMESH_")]
    documented = {row.split("`")[1] for row in rows}
    assert documented == {"PAUSEMESH_" + f.name.upper() for f in fields(Settings)}
    defaults = Settings()
    for row in rows:
        name = row.split("`")[1]
        value = getattr(defaults, name.removeprefix("PAUSEMESH_").lower())
        if isinstance(value, (int, float, str)) and not isinstance(value, bool):
            assert f"`{value}`" in row, row


async def test_a_rotated_key_still_resumes_pauses_issued_under_the_old_one(tmp_path: Path) -> None:
    old, new = "o" * 40, "n" * 40
    database = str(tmp_path / "rotate.db")
    storage = await open_sqlite_storage(database)
    try:
        before = build_service(Settings(database_path=database, secret_key=old), storage)
        created = await before.create(payload={"kind": "input", "message": "?"}, keyed=True)
        continuation_id = created.continuation.continuation_id

        rotated = Settings(database_path=database, secret_key=new, previous_secret_keys=old)
        after = build_service(rotated, storage)
        fresh = await after.create(payload=1, keyed=True)
        resumed = (
            await after.resume(
                Resume(
                    continuation_id=continuation_id,
                    idempotency_key="k",
                    payload={"a": 1},
                    by=TrustedHost(),
                )
            )
        ).continuation
        assert resumed.status == "resumed"
        # New pauses use the new key; without the old key in the ring, old pauses cannot be
        # re-derived any more.
        assert (await after.created_event(fresh.continuation.continuation_id)).token_key_id == (
            resolve_secret_key(Settings(secret_key=new)).key_id
        )
        third = await before.create(payload=1, keyed=True)
        forgetful = build_service(Settings(database_path=database, secret_key=new), storage)
        with pytest.raises(InvalidInputError, match="key ring"):
            await forgetful.resume(
                Resume(
                    continuation_id=third.continuation.continuation_id,
                    idempotency_key="k",
                    payload=1,
                    by=TrustedHost(),
                )
            )
    finally:
        await storage.close()


def test_previous_keys_are_validated_and_redacted() -> None:
    with pytest.raises(SettingsError, match="PAUSEMESH_PREVIOUS_SECRET_KEYS must be at least"):
        load_settings(
            environ={"PAUSEMESH_PREVIOUS_SECRET_KEYS": "x" * 40 + ",short"}, env_file=None
        )
    settings = Settings(secret_key="a" * 40, previous_secret_keys="b" * 40 + "," + "c" * 40)
    active, previous = resolve_key_ring(settings)
    assert len(previous) == 2
    assert active.key_id not in {key.key_id for key in previous}
    assert "b" * 40 not in repr(settings)


@pytest.mark.parametrize(
    "name",
    [
        "port",
        "token_ttl_seconds",
        "max_payload_bytes",
        "idle_connection_seconds",
        "max_tails_per_principal",
    ],
)
def test_an_integer_setting_accepts_its_declared_bounds_and_nothing_past_them(name: str) -> None:
    _, meta = get_args(get_type_hints(Settings, include_extras=True)[name])  # Annotated[int, Meta]
    env = "PAUSEMESH_" + name.upper()
    for edge in (meta.ge, meta.le):
        assert getattr(load_settings(environ={env: str(edge)}, env_file=None), name) == edge
    for past in (meta.ge - 1, meta.le + 1):
        with pytest.raises(SettingsError, match=f"{env} must be an integer between"):
            load_settings(environ={env: str(past)}, env_file=None)


def test_the_schema_name_is_stored_lower_cased() -> None:
    loaded = load_settings(environ={"PAUSEMESH_DATABASE_SCHEMA": "PauseMesh_2"}, env_file=None)
    assert loaded.database_schema == "pausemesh_2"


def test_allowed_hosts_are_read_lower_cased_and_the_metrics_token_is_redacted() -> None:
    token = "scrape-" + "t" * 30
    loaded = load_settings(
        environ={
            "PAUSEMESH_ALLOWED_HOSTS": " API.Example.com, *.Apps.example.com ,10.0.0.5,[::1],*",
            "PAUSEMESH_METRICS_TOKEN": token,
        },
        env_file=None,
    )
    assert loaded.allowed_host_names == (
        "api.example.com",
        "*.apps.example.com",
        "10.0.0.5",
        "[::1]",
        "*",
    )
    assert loaded.metrics_token == token
    assert token not in repr(loaded)


def test_the_pause_ttl_cap_accepts_its_bounds_and_stops_the_start_past_them() -> None:
    name = "PAUSEMESH_MAX_PAUSE_TTL_SECONDS"
    assert load_settings(environ={}, env_file=None).max_pause_ttl_seconds == 90 * 24 * 3600
    for edge in (60, 31_536_000):
        environ = {name: str(edge), "PAUSEMESH_TOKEN_TTL_SECONDS": "30"}
        assert load_settings(environ=environ, env_file=None).max_pause_ttl_seconds == edge
    for past in ("59", "31536001", "90d", "-1"):
        with pytest.raises(SettingsError, match=f"{name} must be an integer between 60 and"):
            load_settings(environ={name: past}, env_file=None)


def test_a_default_deadline_past_the_pause_ttl_cap_stops_the_start() -> None:
    environ = {"PAUSEMESH_MAX_PAUSE_TTL_SECONDS": "600", "PAUSEMESH_TOKEN_TTL_SECONDS": "900"}
    with pytest.raises(SettingsError, match="PAUSEMESH_TOKEN_TTL_SECONDS must not exceed"):
        load_settings(environ=environ, env_file=None)
