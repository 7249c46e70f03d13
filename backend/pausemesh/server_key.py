"""The server key (docs/http-api.md, "Settings"): where it comes from, the ring of retired keys.

``PAUSEMESH_SECRET_KEY`` or ``PAUSEMESH_SECRET_KEY_FILE``. Without either, the single-machine
SQLite default creates a private key file (mode 0600) in the data directory on first start;
with ``PAUSEMESH_DATABASE_URL`` (PostgreSQL, several replicas) there is no default, because a
per-process key would strand other replicas' pauses.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from pausemesh.core.errors import SettingsError
from pausemesh.settings import MIN_SECRET_KEY_BYTES, Settings

__all__ = ("SecretKey", "resolve_key_ring", "resolve_secret_key")

_KEY_FILE_NAME = "secret.key"


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


def _create_key_file(path: Path) -> None:
    """Write a new random key to ``path`` unless another process got there first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        return
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
    _create_key_file(path)
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
