"""``JobLock`` on PostgreSQL: a session advisory lock on one held connection.

Every process (worker or replica) on the same schema asks for the same advisory lock before a
background pass; the session that holds it runs the pass. The lock lives exactly as long as that
session: a process that dies, or whose connection drops, frees it, and another takes over at its
next pass. The connection is dedicated (like the LISTEN one): a pooled connection would carry
the lock back into the pool.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from typing import Any

import asyncpg

from pausemesh.stores.postgres.database import PostgresDatabase

__all__ = ("PostgresJobLock", "job_lock_key")

_log = logging.getLogger("pausemesh.postgres.jobs")


def job_lock_key(schema: str) -> int:
    """A signed 64-bit advisory-lock key per schema (two deployments on one server differ)."""
    digest = hashlib.sha256(f"pausemesh-jobs:{schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class PostgresJobLock:
    def __init__(self, database: PostgresDatabase) -> None:
        self.database = database
        self.key = job_lock_key(database.schema)
        self._conn: Any = None
        self._from_pool = False
        self._held = False

    async def _connection(self) -> Any:
        if self._conn is not None and not self._conn.is_closed():
            return self._conn
        self._held = False
        if self.database.dsn is not None:
            self._conn = await asyncpg.connect(
                self.database.dsn, timeout=5, server_settings={"application_name": "pausemesh-jobs"}
            )
            self._from_pool = False
        else:
            self._conn = await self.database.pool.acquire()
            self._from_pool = True
        return self._conn

    async def try_hold(self) -> bool:
        try:
            conn = await self._connection()
            if self._held:
                # Still ours while the session lives; a cheap round trip proves it does.
                await conn.execute("SELECT 1")
                return True
            self._held = bool(await conn.fetchval("SELECT pg_try_advisory_lock($1)", self.key))
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
            _log.warning("job lock unavailable (%s)", type(error).__name__)
            await self.close()
            return False
        return self._held

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        held, self._held = self._held, False
        if conn is None:
            return
        with contextlib.suppress(Exception):
            if self._from_pool:
                if held:
                    await conn.execute("SELECT pg_advisory_unlock($1)", self.key)
                await self.database.pool.release(conn)
            else:
                await conn.close(timeout=2)
