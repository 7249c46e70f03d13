"""A separate OS process using the SQLite operation ledger (cross-process race and crash tests).

Usage: python -m tests.support.ledger_worker MODE DB EFFECTS [COUNT]
Prints "ready", waits for a line on stdin, then:

- ``race``: runs COUNT concurrent ``run_once`` calls for one business key; the action appends
  one line to EFFECTS (the side effect). Prints one JSON line counting the outcomes.
- ``crash``: begins the operation, performs the side effect, prints "dispatched" and then
  waits to be killed before it can record the outcome.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections import Counter

from pausemesh.core.errors import PauseMeshError
from pausemesh.core.operations import run_once
from pausemesh.stores.sqlite import open_sqlite_operation_ledger

ARGS = {"flight": "PM202", "passengers": 1}


def _effect(path: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"booked by {os.getpid()}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)


async def _race(db: str, effects: str, count: int) -> None:
    ledger = await open_sqlite_operation_ledger(db)
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)

    async def book() -> dict[str, int]:
        _effect(effects)
        return {"pid": os.getpid()}

    async def attempt() -> str:
        try:
            result = await run_once(ledger, "travel", "booking:race", "book", ARGS, book)
        except PauseMeshError as error:
            return error.code
        return str(result.decision)

    outcomes = await asyncio.gather(*(attempt() for _ in range(count)))
    await ledger.close()
    print(json.dumps(Counter(outcomes)), flush=True)


async def _crash(db: str, effects: str) -> None:
    ledger = await open_sqlite_operation_ledger(db)
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)

    async def book() -> None:
        _effect(effects)
        print("dispatched", flush=True)
        await asyncio.Event().wait()  # killed here: the outcome is never recorded

    await run_once(ledger, "travel", "booking:crash", "book", ARGS, book)


def main() -> None:
    mode, db, effects = sys.argv[1:4]
    if mode == "race":
        asyncio.run(_race(db, effects, int(sys.argv[4])))
    elif mode == "crash":
        asyncio.run(_crash(db, effects))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
