"""Every PostgreSQL store of an app (events, threads, operations, fencing) on one ``PostgresDatabase``.

Plain values in, no settings: the composition root reads the configuration and passes the DSN
and schema here.
"""

from __future__ import annotations

import asyncpg

from pausemesh.stores.postgres.database import PostgresDatabase, connect_refusal
from pausemesh.stores.postgres.events import PostgresEventStore
from pausemesh.stores.postgres.fencing import PostgresFencedOperations
from pausemesh.stores.postgres.job_lock import PostgresJobLock
from pausemesh.stores.postgres.operations import PostgresOperationLedger
from pausemesh.stores.postgres.push import PostgresPushStore
from pausemesh.stores.postgres.rate_limits import PostgresRateLimiter
from pausemesh.stores.postgres.run_queue import PostgresRunQueue
from pausemesh.stores.postgres.schema import DEFAULT_SCHEMA, quote_schema
from pausemesh.stores.postgres.stats import PostgresStats
from pausemesh.stores.postgres.threads import PostgresThreadStore
from pausemesh.stores.storage import Storage

__all__ = ("open_postgres_read_only", "open_postgres_storage", "postgres_storage")


async def postgres_storage(database: PostgresDatabase, *, close_database: bool = False) -> Storage:
    """Every PostgreSQL store of an app on ``database``, after checking its migration.

    For hosts that own their asyncpg pool: ``PostgresDatabase(pool, schema=...)`` and this;
    closing the ``Storage`` then leaves the pool open unless ``close_database``. Refuses a
    schema that is not migrated exactly (``StoreError`` with a MIGRATION_* code).
    """
    await database.check_migrations()
    threads = PostgresThreadStore(database, readiness_checked_elsewhere=True)
    return Storage(
        events=PostgresEventStore(database, owns_database=False),
        threads=threads,
        operations=PostgresOperationLedger(database, readiness_checked_elsewhere=True),
        fencing=PostgresFencedOperations(database),
        rate_limiter=PostgresRateLimiter(database),
        push=PostgresPushStore(database, threads),
        jobs=PostgresJobLock(database),
        run_queue=PostgresRunQueue(database),
        # Closing the thread store returns the listener's connection either way.
        on_close=[database.close] if close_database else [],
    )


async def open_postgres_storage(
    dsn: str, *, schema: str = DEFAULT_SCHEMA, min_size: int = 2, max_size: int = 16
) -> Storage:
    """The app's stores on a pool they own (closed with the ``Storage``: the app lifespan).

    Refuses to start against a schema that is not migrated exactly: run ``pausemesh migrate``
    first.
    """
    database = await PostgresDatabase.connect(
        dsn, schema=schema, min_size=min_size, max_size=max_size
    )
    try:
        return await postgres_storage(database, close_database=True)
    except BaseException:
        await database.close()
        raise


async def open_postgres_read_only(
    dsn: str, *, schema: str = DEFAULT_SCHEMA
) -> tuple[Storage, PostgresStats]:
    """The stores on a small pool whose transactions are read-only (``pausemesh inspect``):
    nothing is migrated, and a schema that is not migrated exactly is refused."""
    quote_schema(schema)
    try:
        pool = await asyncpg.create_pool(
            dsn,
            min_size=1,
            max_size=2,
            command_timeout=30.0,
            timeout=5.0,
            server_settings={
                "application_name": "pausemesh-inspect",
                # The server itself refuses every write of this pool.
                "default_transaction_read_only": "on",
            },
        )
    except Exception as error:  # noqa: BLE001 - every driver failure becomes a StoreError
        raise connect_refusal(dsn, error) from None
    database = PostgresDatabase(pool, schema=schema, owns_pool=True)
    try:
        storage = await postgres_storage(database, close_database=True)
        return storage, PostgresStats(database)
    except BaseException:
        await database.close()
        raise
