"""Store adapters: in-memory (tests), SQLite (embedded default), PostgreSQL (replicas)."""

from pausemesh.stores.memory import InMemoryEventStore
from pausemesh.stores.sqlite import SqliteDatabase, SqliteEventStore, open_sqlite_store

__all__ = ("InMemoryEventStore", "SqliteDatabase", "SqliteEventStore", "open_sqlite_store")
