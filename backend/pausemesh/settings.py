"""Settings: ``PAUSEMESH_*`` environment variables, a ``.env`` file and CLI overrides.

Precedence, highest first: CLI flags (``overrides``), the process environment, the
``.env`` file, the defaults. Everything is validated once, at start, and a bad value is
reported with the name of the setting (``SettingsError``).

Secret key (DESIGN §3.3, §8): ``PAUSEMESH_SECRET_KEY`` or ``PAUSEMESH_SECRET_KEY_FILE``.
Without either, the single-machine SQLite default creates a private key file (mode 0600)
in the data directory on first start; with ``PAUSEMESH_DATABASE_URL`` (PostgreSQL, several
replicas) there is no default, because a per-process key would strand other replicas' pauses.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from dotenv import dotenv_values

__all__ = (
    "ENV_PREFIX",
    "LOG_LEVELS",
    "SecretKey",
    "Settings",
    "SettingsError",
    "load_settings",
    "resolve_key_ring",
    "resolve_secret_key",
    "with_overrides",
)

ENV_PREFIX = "PAUSEMESH_"
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
MIN_SECRET_KEY_BYTES = 32
_KEY_FILE_NAME = "secret.key"


class SettingsError(ValueError):
    """A setting is missing or malformed; the message names it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Settings:
    """Validated runtime settings (one instance per process, never mutated)."""

    host: str = "127.0.0.1"
    port: int = 8787
    database_path: str = "./data/pausemesh.db"
    # A PostgreSQL DSN; when set it wins over ``database_path``.
    database_url: str | None = None
    database_schema: str = "pausemesh"
    secret_key: str | None = None
    secret_key_file: str | None = None
    # Retired keys, comma-separated: tokens issued under them can still be re-derived.
    previous_secret_keys: str | None = None
    token_ttl_seconds: int = 900
    max_payload_bytes: int = 65_536
    log_level: str = "info"
    # Where the generated key file lives; defaults to the database file's directory.
    data_dir: str | None = None
    sweep_interval_seconds: float = 1.0
    # "module:attribute" of an async principal resolver (see pausemesh.web.auth).
    principal_resolver: str | None = None
    insecure_no_auth: bool = False

    @property
    def uses_postgres(self) -> bool:
        return self.database_url is not None

    @property
    def resolved_data_dir(self) -> Path:
        if self.data_dir is not None:
            return Path(self.data_dir)
        return Path(self.database_path).parent

    def __repr__(self) -> str:
        # Settings end up in logs and tracebacks; the key and the DSN's password must not.
        shown = {
            f.name: "[REDACTED]"
            if f.name in {"secret_key", "previous_secret_keys", "database_url"}
            and getattr(self, f.name)
            else getattr(self, f.name)
            for f in fields(self)
        }
        return "Settings(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"


def _env_name(field_name: str) -> str:
    return ENV_PREFIX + field_name.upper()


def _as_int(name: str, raw: object, low: int, high: int) -> int:
    problem = f"{name} must be an integer between {low} and {high}"
    if isinstance(raw, bool):
        raise SettingsError(problem)
    try:
        value = raw if isinstance(raw, int) else int(str(raw).strip(), 10)
    except ValueError:
        raise SettingsError(problem) from None
    if not low <= value <= high:
        raise SettingsError(problem)
    return value


def _as_float(name: str, raw: object, low: float, high: float) -> float:
    try:
        value = float(raw) if isinstance(raw, (int, float, str)) else float("nan")
    except ValueError:
        value = float("nan")
    if not low <= value <= high:
        raise SettingsError(f"{name} must be a number between {low} and {high}")
    return value


def _as_bool(name: str, raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in {"1", "true", "yes", "on"}:
        return True
    if text in {"0", "false", "no", "off", ""}:
        return False
    raise SettingsError(f"{name} must be a boolean (true/false)")


def _as_text(name: str, raw: object, *, optional: bool) -> str | None:
    text = str(raw).strip()
    if not text:
        if optional:
            return None
        raise SettingsError(f"{name} must not be empty")
    return text


def _as_keys(name: str, raw: object, *, many: bool) -> str | None:
    """One key (or comma-separated keys when ``many``), each ``MIN_SECRET_KEY_BYTES`` or more."""
    keys = _as_text(name, raw, optional=True)
    if keys is not None and any(
        len(k.strip().encode()) < MIN_SECRET_KEY_BYTES
        for k in (keys.split(",") if many else [keys])
    ):
        raise SettingsError(f"{name} must be at least {MIN_SECRET_KEY_BYTES} bytes per key")
    return keys


_INT_BOUNDS = {
    "port": (1, 65_535),
    "token_ttl_seconds": (30, 604_800),
    "max_payload_bytes": (1_024, 10_485_760),
}
_OPTIONAL_TEXT = {
    "database_url",
    "secret_key",
    "secret_key_file",
    "previous_secret_keys",
    "data_dir",
    "principal_resolver",
}


def _coerce(field_name: str, raw: object) -> Any:  # noqa: PLR0911 - one branch per kind
    name = _env_name(field_name)
    if field_name in _INT_BOUNDS:
        return _as_int(name, raw, *_INT_BOUNDS[field_name])
    if field_name == "sweep_interval_seconds":
        return _as_float(name, raw, 0.05, 3600.0)
    if field_name == "insecure_no_auth":
        return _as_bool(name, raw)
    if field_name == "log_level":
        level = str(raw).strip().lower()
        if level not in LOG_LEVELS:
            raise SettingsError(f"{name} must be one of: {', '.join(LOG_LEVELS)}")
        return level
    if field_name == "database_url":
        url = _as_text(name, raw, optional=True)
        if url is not None and not url.startswith(("postgresql://", "postgres://")):
            raise SettingsError(f"{name} must be a postgresql:// URL")
        return url
    if field_name == "database_path":
        path = _as_text(name, raw, optional=False)
        if path == ":memory:" or (path or "").startswith("file:"):
            # The store opens a writer and a reader connection: each would get its own
            # in-memory database. Tests that want no file use the in-memory store instead.
            raise SettingsError(f"{name} must be a file path (not :memory: or a URI)")
        return path
    if field_name == "database_schema":
        schema = _as_text(name, raw, optional=False)
        assert schema is not None  # noqa: S101 - optional=False never returns None
        if not schema.isidentifier() or not schema.isascii():
            raise SettingsError(f"{name} must be a plain SQL identifier")
        return schema.lower()
    if field_name in {"secret_key", "previous_secret_keys"}:
        return _as_keys(name, raw, many=field_name == "previous_secret_keys")
    return _as_text(name, raw, optional=field_name in _OPTIONAL_TEXT)


def load_settings(
    *,
    environ: Mapping[str, str] | None = None,
    env_file: str | Path | None = ".env",
    overrides: Mapping[str, object] | None = None,
) -> Settings:
    """Merge defaults, ``env_file``, ``environ`` and ``overrides``; validate everything.

    ``overrides`` uses field names (``port``, ``database_path``...); ``None`` values are
    ignored, so argparse namespaces can be passed through as they are.
    """
    environ = os.environ if environ is None else environ
    known = {f.name for f in fields(Settings)}
    raw: dict[str, object] = {}
    sources: list[Mapping[str, str | None]] = []
    if env_file is not None and Path(env_file).is_file():
        sources.append(dotenv_values(env_file))
    sources.append(environ)
    for source in sources:
        for key, value in source.items():
            if not key.startswith(ENV_PREFIX) or value is None:
                continue
            field_name = key[len(ENV_PREFIX) :].lower()
            if field_name in known:
                raw[field_name] = value
    for name, override in (overrides or {}).items():
        if name not in known:
            raise SettingsError(f"unknown setting {name!r}")
        if override is not None:
            raw[name] = override
    settings = Settings(**{k: _coerce(k, v) for k, v in raw.items()})
    if settings.secret_key is not None and settings.secret_key_file is not None:
        raise SettingsError(
            "PAUSEMESH_SECRET_KEY and PAUSEMESH_SECRET_KEY_FILE are exclusive; set only one"
        )
    if settings.uses_postgres and settings.secret_key is None and settings.secret_key_file is None:
        raise SettingsError(
            "PAUSEMESH_SECRET_KEY (or PAUSEMESH_SECRET_KEY_FILE) is required with"
            " PAUSEMESH_DATABASE_URL: every replica must share one server key"
        )
    return settings


@dataclass(frozen=True, slots=True)
class SecretKey:
    """The server key and its id (a digest, so every replica with the key agrees on it)."""

    key_id: str
    key: bytes = b""

    def __repr__(self) -> str:
        return f"SecretKey(key_id={self.key_id!r})"


def _key_from_bytes(material: bytes, source: str) -> SecretKey:
    material = material.strip()
    if len(material) < MIN_SECRET_KEY_BYTES:
        raise SettingsError(f"{source} must hold at least {MIN_SECRET_KEY_BYTES} bytes")
    return SecretKey(key_id="k" + hashlib.sha256(material).hexdigest()[:12], key=material)


def resolve_secret_key(settings: Settings) -> SecretKey:
    """Load the server key; on the SQLite default, create the key file on first start."""
    if settings.secret_key is not None:
        return _key_from_bytes(settings.secret_key.encode(), "PAUSEMESH_SECRET_KEY")
    if settings.secret_key_file is not None:
        path = Path(settings.secret_key_file)
        try:
            material = path.read_bytes()
        except OSError as error:
            raise SettingsError(
                f"PAUSEMESH_SECRET_KEY_FILE cannot be read: {error.strerror}"
            ) from None
        return _key_from_bytes(material, "PAUSEMESH_SECRET_KEY_FILE")
    if settings.uses_postgres:
        raise SettingsError("PAUSEMESH_SECRET_KEY is required with PAUSEMESH_DATABASE_URL")
    path = settings.resolved_data_dir / _KEY_FILE_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        # Write a private temp file, then link it into place: link fails if another
        # process won the race, and nobody ever reads a half-written key.
        temp = path.with_name(f".{_KEY_FILE_NAME}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(secrets.token_urlsafe(48).encode())
                handle.flush()
                os.fsync(handle.fileno())
            with contextlib.suppress(FileExistsError):
                os.link(temp, path)
        finally:
            temp.unlink(missing_ok=True)
    return _key_from_bytes(path.read_bytes(), str(path))


def resolve_key_ring(
    settings: Settings, active: SecretKey | None = None
) -> tuple[SecretKey, list[SecretKey]]:
    """The active key and the retired ones still accepted (``PAUSEMESH_PREVIOUS_SECRET_KEYS``).

    New tokens use the active key; a continuation keeps the key id it was created under, so
    rotating keeps every pending pause resumable while its old key stays in the ring. Pass
    ``active`` when it is already resolved, so the key is not loaded twice.
    """
    active = active or resolve_secret_key(settings)
    previous = [
        _key_from_bytes(key.encode(), "PAUSEMESH_PREVIOUS_SECRET_KEYS")
        for key in (settings.previous_secret_keys or "").split(",")
        if key.strip()
    ]
    return active, [key for key in previous if key.key_id != active.key_id]


def with_overrides(settings: Settings, **changes: Any) -> Settings:
    """A copy with ``changes`` applied (tests and embedding hosts)."""
    return replace(settings, **changes)
