"""The SQLite stores (aiosqlite): every store of a process on one ``SqliteDatabase`` file."""

from pausemesh.stores.sqlite.database import SqliteDatabase
from pausemesh.stores.sqlite.events import SqliteEventStore, open_sqlite_store
from pausemesh.stores.sqlite.fencing import SqliteFencedOperations
from pausemesh.stores.sqlite.operations import SqliteOperationLedger, open_sqlite_operation_ledger
from pausemesh.stores.sqlite.schema import SQLITE_MIGRATIONS
from pausemesh.stores.sqlite.storage import open_sqlite_storage
from pausemesh.stores.sqlite.threads import SqliteThreadStore

__all__ = (
    "SQLITE_MIGRATIONS",
    "SqliteDatabase",
    "SqliteEventStore",
    "SqliteFencedOperations",
    "SqliteOperationLedger",
    "SqliteThreadStore",
    "open_sqlite_operation_ledger",
    "open_sqlite_storage",
    "open_sqlite_store",
)
