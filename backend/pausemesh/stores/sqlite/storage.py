"""Every SQLite store of a process (events, threads, operations, fencing, push) on one
``SqliteDatabase``: one file, one group writer.

Plain values in, no settings: the composition root reads the configuration and passes the path
and sync mode here (as it passes the DSN and schema to ``stores/postgres/storage.py``).
"""

from __future__ import annotations

from pausemesh.stores.file_lock import FileJobLock
from pausemesh.stores.sqlite.database import SqliteDatabase, SqliteSync
from pausemesh.stores.sqlite.events import SqliteEventStore
from pausemesh.stores.sqlite.fencing import SqliteFencedOperations
from pausemesh.stores.sqlite.operations import SqliteOperationLedger
from pausemesh.stores.sqlite.push import SqlitePushStore
from pausemesh.stores.sqlite.run_queue import SqliteRunQueue
from pausemesh.stores.sqlite.stats import SqliteStats
from pausemesh.stores.sqlite.threads import SqliteThreadStore
from pausemesh.stores.storage import Storage

__all__ = ("open_sqlite_read_only", "open_sqlite_storage")


async def open_sqlite_storage(path: str, *, sync: SqliteSync = "commit") -> Storage:
    """The process's stores on the database file ``path``, opened (and migrated) here and
    closed with the ``Storage``; ``sync``: how writes reach the disk (``SqliteSync``)."""
    database = await SqliteDatabase(path, sync=sync).open()
    try:
        return Storage(
            events=SqliteEventStore(database, owns_database=False),
            threads=SqliteThreadStore(database, owns_database=False),
            operations=SqliteOperationLedger(database, owns_database=False),
            fencing=SqliteFencedOperations(database),
            push=SqlitePushStore(database),
            jobs=FileJobLock(path),
            run_queue=SqliteRunQueue(database),
            on_close=[database.close],
        )
    except BaseException:
        await database.close()
        raise


async def open_sqlite_read_only(path: str) -> tuple[Storage, SqliteStats]:
    """The stores on ``path`` for reading only (``pausemesh inspect``): nothing is migrated,
    and a missing or unmigrated file is a ``StoreError`` (MIGRATION_*)."""
    database = await SqliteDatabase(path).open_read_only()
    storage = Storage(
        events=SqliteEventStore(database, owns_database=False),
        threads=SqliteThreadStore(database, owns_database=False),
        operations=SqliteOperationLedger(database, owns_database=False),
        fencing=SqliteFencedOperations(database),
        on_close=[database.close],
    )
    return storage, SqliteStats(database)
