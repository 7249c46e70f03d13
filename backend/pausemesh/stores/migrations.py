"""Versioned schema migrations with checksums, shared by the SQLite and PostgreSQL stores."""

from __future__ import annotations

import hashlib

import msgspec

__all__ = ("Migration",)


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
