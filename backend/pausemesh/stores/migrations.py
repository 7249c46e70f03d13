"""Versioned schema migrations with checksums, shared by the SQLite and PostgreSQL stores."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

import msgspec

from pausemesh.core.errors import StoreError

__all__ = ("Migration", "check_ledger")


class Migration(msgspec.Struct, frozen=True, kw_only=True):
    version: int
    name: str
    # Statements may use ``{schema}`` for the schema name; the checksum covers the template,
    # so it does not depend on which schema a deployment chose.
    statements: tuple[str, ...]

    @property
    def checksum(self) -> str:
        text = "\n;\n".join(s.strip() for s in self.statements)
        return hashlib.sha256(f"{self.version}:{self.name}\n{text}".encode()).hexdigest()


def check_ledger(
    applied: Mapping[int, tuple[str, str]], migrations: Sequence[Migration]
) -> list[Migration]:
    """Compare a ledger (version -> (name, checksum)) with ``migrations``; return what is missing.

    A version this code does not know means the database is ahead of it; a known version with
    another name or checksum means a migration was altered after it was applied. Both are
    refused: nothing may run against a schema whose history it cannot vouch for.
    """
    known = {m.version: m for m in migrations}
    ahead = sorted(v for v in applied if v not in known)
    if ahead:
        msg = f"database schema version {ahead[-1]} is newer than this PauseMesh"
        raise StoreError(msg, code="MIGRATION_VERSION_AHEAD")
    for version, (name, checksum) in sorted(applied.items()):
        migration = known[version]
        if (name, checksum) != (migration.name, migration.checksum):
            msg = f"migration {version} ({migration.name}) was altered after it was applied"
            raise StoreError(msg, code="MIGRATION_CHECKSUM_MISMATCH")
    return [m for m in sorted(migrations, key=lambda m: m.version) if m.version not in applied]
