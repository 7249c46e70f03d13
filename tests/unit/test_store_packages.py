"""The store backends are packages: each re-exports its public names from its own modules."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

BACKENDS = {
    "pausemesh.stores.memory": {
        "InMemoryEventStore",
        "InMemoryOperationLedger",
        "InMemoryThreadStore",
    },
    "pausemesh.stores.sqlite": {
        "SQLITE_MIGRATIONS",
        "SqliteDatabase",
        "SqliteEventStore",
        "SqliteFencedOperations",
        "SqliteOperationLedger",
        "SqliteThreadStore",
        "open_sqlite_operation_ledger",
        "open_sqlite_storage",
        "open_sqlite_store",
    },
    "pausemesh.stores.postgres": {
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
    },
}


@pytest.mark.parametrize("package", sorted(BACKENDS))
def test_each_backend_package_exports_its_public_names_from_its_own_modules(package: str) -> None:
    module = importlib.import_module(package)
    assert set(module.__all__) == BACKENDS[package]
    for name in module.__all__:
        value = getattr(module, name)
        home = getattr(value, "__module__", None)
        if home is not None and home != "builtins":
            assert home.startswith(f"{package}."), (name, home)


def test_an_unknown_name_of_the_postgres_package_is_an_attribute_error() -> None:
    postgres = importlib.import_module("pausemesh.stores.postgres")
    with pytest.raises(AttributeError, match="no_such_store"):
        _ = postgres.no_such_store


def test_a_sqlite_process_never_loads_asyncpg() -> None:
    # The CLI reads the PostgreSQL schema defaults at start; that must not pull in the driver.
    script = (
        "import sys\n"
        "import pausemesh.cli, pausemesh.bootstrap, pausemesh.stores.postgres.schema\n"
        "import pausemesh.stores.memory, pausemesh.stores.sqlite\n"
        "print('asyncpg' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_each_sql_backend_assembles_its_storage_in_its_own_storage_module(backend: str) -> None:
    # The composition root picks one from settings; the openers are named for their backend, so
    # no two functions share a name across the layers.
    module = importlib.import_module(f"pausemesh.stores.{backend}.storage")
    bootstrap = importlib.import_module("pausemesh.bootstrap")
    for name in (f"open_{backend}_storage", f"open_{backend}_read_only"):
        opener = getattr(module, name)
        assert opener.__module__ == module.__name__
        assert getattr(bootstrap, name, opener) is opener, name
