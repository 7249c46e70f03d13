"""The PostgreSQL stores (asyncpg): several app replicas on one database and schema.

Names load lazily so that ``pausemesh.stores.postgres.schema`` (read by the CLI at start) does
not import asyncpg in a process that never talks to PostgreSQL. ``migrate()`` and
``grant_runtime_role()`` stay in ``pausemesh.stores.postgres.migrate`` (the submodule's name).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pausemesh.stores.postgres.database import PostgresDatabase
    from pausemesh.stores.postgres.events import PostgresEventStore, open_postgres_store
    from pausemesh.stores.postgres.fencing import PostgresFencedOperations
    from pausemesh.stores.postgres.operations import PostgresOperationLedger
    from pausemesh.stores.postgres.schema import DEFAULT_SCHEMA, POSTGRES_MIGRATIONS
    from pausemesh.stores.postgres.storage import open_postgres_storage, postgres_storage
    from pausemesh.stores.postgres.threads import PostgresThreadStore

__all__ = (
    "DEFAULT_SCHEMA",
    "POSTGRES_MIGRATIONS",
    "PostgresDatabase",
    "PostgresEventStore",
    "PostgresFencedOperations",
    "PostgresOperationLedger",
    "PostgresThreadStore",
    "open_postgres_storage",
    "open_postgres_store",
    "postgres_storage",
)

_HOMES = {
    "DEFAULT_SCHEMA": "schema",
    "POSTGRES_MIGRATIONS": "schema",
    "PostgresDatabase": "database",
    "PostgresEventStore": "events",
    "PostgresFencedOperations": "fencing",
    "PostgresOperationLedger": "operations",
    "PostgresThreadStore": "threads",
    "open_postgres_storage": "storage",
    "open_postgres_store": "events",
    "postgres_storage": "storage",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
