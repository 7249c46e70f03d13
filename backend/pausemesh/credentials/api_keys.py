"""API keys: ``pmk_<id>_<secret>``, of which the server keeps only a hash.

The secret is 32 random bytes (256 bits). The file stores ``sha256(secret)``: a plain,
unsalted, fast hash is the right tool for a key of that entropy. Salts and slow hashes
(bcrypt, argon2) exist to make *guessing* a low-entropy password expensive; nobody can
guess or precompute 2^256 secrets, so they would add only per-request CPU. The public ``id``
finds the record (revocation names it; logs may show it); the hashes are compared in constant
time.

The file is JSON written by ``pausemesh keys`` (atomically: a temp file renamed over it,
under an advisory lock so two commands never lose each other's change). The server re-reads
it when it changes on disk, so a revocation takes effect on the next request, without a
restart, on every replica that shares the file.

A key's caller is ``key:<principal>``: API keys have their own namespace, apart from the
identity provider's subjects (``core/identity.py``), unless its record sets
``exact_principal`` (``pausemesh keys create --exact-principal``), an explicit mapping to that
principal itself. Records written before have no such field: their keys call as ``key:<name>``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from pausemesh.core.errors import InvalidInputError, SettingsError
from pausemesh.core.identity import (
    KEY_NAMESPACE,
    RESERVED_PRINCIPAL_PREFIXES,
    Identity,
    reserved_prefix,
)
from pausemesh.core.validation import check_id

__all__ = (
    "KEY_PREFIX",
    "ApiKeyFile",
    "ApiKeyRecord",
    "KeyFileDocument",
    "check_key_principal",
    "create_api_key",
    "list_api_keys",
    "looks_like_api_key",
    "revoke_api_key",
)

KEY_PREFIX = "pmk_"
_ID_HEX = 12  # 48 bits: unique enough to name a key, never enough to use one
_KEY_RE = re.compile(rf"^{KEY_PREFIX}([0-9a-f]{{{_ID_HEX}}})_([A-Za-z0-9_-]{{43}})$")
_ROLE_RE = re.compile(r"^[A-Za-z0-9._:-]{1,100}$")


class ApiKeyRecord(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    id: str
    # The key's name for its caller: the server calls it ``key:<principal>`` (API keys have
    # their own namespace), or exactly ``principal`` when ``exact_principal`` maps it there.
    principal: str
    sha256: str
    created_at: datetime
    roles: list[str] = msgspec.field(default_factory=list)
    label: str | None = None
    revoked_at: datetime | None = None
    exact_principal: bool = False

    @property
    def caller(self) -> str:
        """The principal id the server names this key's caller by."""
        return self.principal if self.exact_principal else KEY_NAMESPACE + self.principal


class KeyFileDocument(msgspec.Struct, kw_only=True):
    version: int = 1
    keys: list[ApiKeyRecord] = msgspec.field(default_factory=list)


def looks_like_api_key(credential: str) -> bool:
    return credential.startswith(KEY_PREFIX)


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class _Loaded:
    stamp: tuple[int, int, int]
    records: Mapping[str, ApiKeyRecord]


class ApiKeyFile:
    """The server's view of the key file: verifies a presented key, re-reading on change."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._loaded: _Loaded | None = None

    def identify(self, credential: str) -> Identity | None:
        """The key's identity, or None for an unknown, revoked or malformed key."""
        match = _KEY_RE.match(credential)
        if match is None:
            return None
        record = self._records().get(match.group(1))
        if record is None or record.revoked_at is not None:
            return None
        if not hmac.compare_digest(record.sha256, _digest(match.group(2))):
            return None
        # Checked and put in its namespace where every identity is (``caller_identity``): a
        # hand-written record naming ``role:manager`` is refused there like any resolver's.
        return Identity(
            principal=record.principal,
            roles=frozenset(record.roles),
            namespace=None if record.exact_principal else "key",
        )

    def _records(self) -> Mapping[str, ApiKeyRecord]:
        # One stat per request (microseconds, no I/O wait on a local file) buys revocation
        # without a restart; the file is parsed again only when it changed.
        try:
            info = self.path.stat()
        except OSError:
            return {}
        stamp = (info.st_ino, info.st_mtime_ns, info.st_size)
        loaded = self._loaded
        if loaded is None or loaded.stamp != stamp:
            try:
                document = _read(self.path)
            except SettingsError:
                return {} if loaded is None else loaded.records
            loaded = self._loaded = _Loaded(stamp, {r.id: r for r in document.keys})
        return loaded.records


def _read(path: Path) -> KeyFileDocument:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return KeyFileDocument()
    except OSError as error:
        raise SettingsError(f"cannot read the API key file {path}: {error.strerror}") from None
    try:
        return msgspec.json.decode(raw, type=KeyFileDocument)
    except msgspec.DecodeError as error:
        raise SettingsError(f"the API key file {path} is not valid ({error})") from None


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[KeyFileDocument]:
    """Read-modify-write under an advisory lock; the body's changes are saved atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock_path = path.with_name(path.name + ".lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        document = _read(path)
        yield document
        temp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        out = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(out, "wb") as handle:
                handle.write(msgspec.json.format(msgspec.json.encode(document), indent=2))
                handle.write(b"\n")
                handle.flush()
                os.fsync(handle.fileno())
            temp.replace(path)
        finally:
            temp.unlink(missing_ok=True)
    finally:
        os.close(fd)


def check_key_principal(principal: str, *, exact: bool = False) -> str:
    """The principal id a key for ``principal`` calls as; ``SettingsError`` (one line, for the
    CLI) when the server would refuse it at every request."""
    if not principal.strip():
        raise SettingsError("--principal must not be empty")
    prefix = reserved_prefix(principal)
    if prefix is not None:
        msg = (
            f"--principal {principal!r}: principal ids starting with {prefix!r} are reserved"
            f" ({', '.join(RESERVED_PRINCIPAL_PREFIXES)}); the server would refuse the key"
        )
        raise SettingsError(msg)
    caller = principal if exact else KEY_NAMESPACE + principal
    try:
        check_id(caller, "principal")
    except InvalidInputError as error:
        raise SettingsError(f"--principal {principal!r}: {error.message}") from None
    return caller


def create_api_key(
    path: str | Path,
    *,
    principal: str,
    roles: Sequence[str] = (),
    label: str | None = None,
    exact_principal: bool = False,
) -> tuple[str, ApiKeyRecord]:
    """A new key for ``principal``: returns the key (shown once, never stored) and its record.

    The key calls as ``key:<principal>``; ``exact_principal`` maps it to ``principal`` itself,
    the principal an identity provider's token with that subject names too.
    """
    check_key_principal(principal, exact=exact_principal)
    for role in roles:
        if not _ROLE_RE.match(role):
            raise SettingsError(f"role {role!r}: letters, digits and . _ : - (at most 100)")
    secret = secrets.token_urlsafe(32)  # 32 bytes -> 43 base64url characters
    with _locked(Path(path)) as document:
        taken = {r.id for r in document.keys}
        key_id = secrets.token_hex(_ID_HEX // 2)
        while key_id in taken:
            key_id = secrets.token_hex(_ID_HEX // 2)
        record = ApiKeyRecord(
            id=key_id,
            principal=principal,
            sha256=_digest(secret),
            created_at=datetime.now(UTC).replace(microsecond=0),
            roles=sorted(set(roles)),
            label=label,
            exact_principal=exact_principal,
        )
        document.keys.append(record)
    return f"{KEY_PREFIX}{key_id}_{secret}", record


def revoke_api_key(path: str | Path, name: str) -> ApiKeyRecord:
    """Revoke the key ``name`` designates: its id, ``pmk_<id>``, or the whole key."""
    key_id = name.removeprefix(KEY_PREFIX)[:_ID_HEX]
    with _locked(Path(path)) as document:
        for index, found in enumerate(document.keys):
            if found.id != key_id:
                continue
            if found.revoked_at is not None:
                return found
            # Kept, marked: the file stays an audit trail of every key ever issued.
            revoked = msgspec.structs.replace(
                found, revoked_at=datetime.now(UTC).replace(microsecond=0)
            )
            document.keys[index] = revoked
            return revoked
    raise SettingsError(f"no API key with id {key_id!r} in {path}")


def list_api_keys(path: str | Path) -> list[ApiKeyRecord]:
    return list(_read(Path(path)).keys)
