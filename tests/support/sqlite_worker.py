"""A separate OS process working on a shared SQLite file (for cross-process race and crash tests).

Usage: python -m tests.support.sqlite_worker MODE DB [ARGS...]
Prints "ready", waits for a line on stdin, works, then prints one JSON line of outcomes.
Mode ``append`` instead prints one line per acknowledged (committed) create, forever;
``append-lone PATH`` the same, one create at a time (each a lone write), committed on the
writer thread (``PATH`` = ``thread``) or on the loop's (``inline``).
``PAUSEMESH_SQLITE_SYNC`` in the environment (``commit`` or ``ack``) chooses how commits reach
the disk, as it does for a server.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import sys
from collections import Counter
from typing import cast

from pausemesh.core import ContinuationService, PauseMeshError
from pausemesh.core.resume import Resume, TokenHolder
from pausemesh.stores.sqlite import SqliteDatabase, SqliteEventStore
from pausemesh.stores.sqlite.database import INLINE_COMMIT_BUDGET, SqliteSync


async def _open(db: str, inline_commit_budget: float = INLINE_COMMIT_BUDGET) -> SqliteEventStore:
    sync = cast("SqliteSync", os.environ.get("PAUSEMESH_SQLITE_SYNC", "commit"))
    database = SqliteDatabase(db, sync=sync, inline_commit_budget=inline_commit_budget)
    return SqliteEventStore(await database.open())


async def _race(db: str, cid: str, token: str, count: int, key_prefix: str, cancels: int) -> None:
    store = await _open(db)
    service = ContinuationService(store=store)
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)

    async def resume(i: int) -> str:
        key = key_prefix if key_prefix.endswith("=") else f"{key_prefix}{i}"
        try:
            result = (
                await service.resume(
                    Resume(
                        continuation_id=cid,
                        idempotency_key=key,
                        payload={"n": 1},
                        by=TokenHolder(token),
                    )
                )
            ).continuation
        except PauseMeshError as error:
            return error.code
        return f"ok:{result.resumed_at}"

    async def cancel() -> str:
        try:
            await service.cancel(continuation_id=cid, reason="race")
        except PauseMeshError as error:
            return f"cancel:{error.code}"
        return "cancel:ok"

    outcomes = await asyncio.gather(
        *(resume(i) for i in range(count)), *(cancel() for _ in range(cancels))
    )
    await store.close()
    print(json.dumps(Counter(outcomes)), flush=True)


async def _append_forever(db: str) -> None:
    store = await _open(db)
    service = ContinuationService(store=store)
    print("ready", flush=True)
    batch = 0
    while True:
        batch += 1
        ids = [f"b{batch}-{i}" for i in range(32)]
        results = await asyncio.gather(
            *(service.create(continuation_id=i, payload={"i": i}) for i in ids)
        )
        for created in results:
            print(created.continuation.continuation_id, flush=True)


async def _append_lone_forever(db: str, path: str) -> None:
    # A budget of 0 sends every write to the writer thread; an infinite one keeps each lone
    # write on the loop's thread, however long its commit takes.
    store = await _open(db, 0.0 if path == "thread" else math.inf)
    service = ContinuationService(store=store)
    print("ready", flush=True)
    count = 0
    while True:
        count += 1
        created = await service.create(continuation_id=f"lone-{count}", payload={"i": count})
        print(created.continuation.continuation_id, flush=True)


def main() -> None:
    mode, db, *args = sys.argv[1:]
    if mode == "race":
        cid, token, count, key_prefix, cancels = args
        asyncio.run(_race(db, cid, token, int(count), key_prefix, int(cancels)))
    elif mode == "append":
        asyncio.run(_append_forever(db))
    elif mode == "append-lone":
        asyncio.run(_append_lone_forever(db, *args))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
