"""Shipped migrations never change: a database that applied one refuses code whose text for it
differs (``MIGRATION_CHECKSUM_MISMATCH``). These are the checksums as shipped, so a refactor of
``stores/*/schema.py`` that alters a statement's text fails here, not on a user's database."""

from __future__ import annotations

import pytest

from pausemesh.stores.migrations import Migration
from pausemesh.stores.postgres.schema import POSTGRES_MIGRATIONS
from pausemesh.stores.sqlite.schema import SQLITE_MIGRATIONS

# version -> the first 16 hex digits of its checksum. A new migration adds a line here.
SHIPPED = {
    "sqlite": {
        1: "f7b67214776ea391", 2: "fb50c12c74de0f24", 3: "021e5fc96bb8310f",
        4: "952691691f453078", 5: "037666ac7854cfc5", 6: "73bc8e2bd2402eaf",
        8: "155afefb0456efa0", 9: "0e38b6300e7c8c8d", 10: "3e6a10e50d9bba9f",
        11: "350cd162fbb9852d", 12: "579db78953dbb4ef", 13: "f89fa25e8bceba5b",
        14: "9b5399980313fed9", 15: "637ea140ffe46237", 20: "0ee0ab6373d8b7f6",
        42: "2b1c98446577e81b", 44: "d94c02b673cc7a82", 45: "839f0ef718d91ee5",
        46: "d38e38f8caaf9b9d", 48: "a2c7a78ec71641bf",
    },
    "postgres": {
        1: "7884936be914fd6e", 2: "ea3da3f33053b6d3", 3: "6b238671b93c13ee",
        4: "083cc44d49cd77c2", 5: "9b61d23b799a3624", 6: "646420a9887ac495",
        7: "6d5d4544af6cb482", 8: "b8e4a6d8a73720f8", 9: "afc6eea140157671",
        11: "4480ccf46691c1b5", 12: "7670a1866dd7ae2f", 13: "d185e5c1d265db5b",
        14: "cc2bc265294d6f3e", 20: "e11927e5195b4c94",
        42: "26577241a4e4e7c6", 44: "98b8894a61f98d3b", 45: "3ed1372d3107ecdc",
        46: "f9bb9941e842edba", 48: "78c72c7fd77eadbc",
    },
}  # fmt: skip
MIGRATIONS: dict[str, tuple[Migration, ...]] = {
    "sqlite": SQLITE_MIGRATIONS,
    "postgres": POSTGRES_MIGRATIONS,
}


@pytest.mark.parametrize("store", sorted(SHIPPED))
def test_every_shipped_migration_keeps_its_checksum(store: str) -> None:
    assert {m.version: m.checksum[:16] for m in MIGRATIONS[store]} == SHIPPED[store]
