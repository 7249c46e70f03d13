"""Races from two OS processes on one SQLite file, and SIGKILL in the middle of grouped appends."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from pausemesh.core import ContinuationService
from pausemesh.stores.sqlite import open_sqlite_store
from tests.support.workers import race, spawn_worker


def _spawn(*args: str) -> subprocess.Popen[str]:
    return spawn_worker("tests.support.sqlite_worker", *args)


def _race(db: Path, cid: str, token: str, key_prefix: str, cancels: int = 0) -> Counter[str]:
    workers = [
        _spawn(
            "race",
            str(db),
            cid,
            token,
            "30",
            f"{key_prefix}{n}-" if key_prefix else "same=",
            str(cancels),
        )
        for n in range(2)
    ]
    return race(workers)


async def _pending(db: Path) -> tuple[str, str]:
    store = await open_sqlite_store(db)
    created = await ContinuationService(store=store).create(
        payload={"kind": "input", "message": "?"}
    )
    await store.close()
    return created.continuation.continuation_id, created.resume_token


# Both ways a commit reaches the disk; the worker processes inherit the variable and read it
# (tests/support/sqlite_worker.py).
@pytest.fixture
def sync(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    value = str(getattr(request, "param", "commit"))
    monkeypatch.setenv("PAUSEMESH_SQLITE_SYNC", value)
    return value


@pytest.mark.slow
@pytest.mark.parametrize("sync", ["commit", "ack"], indirect=True)
async def test_two_processes_sixty_distinct_resumes_have_exactly_one_winner(
    tmp_path: Path, sync: str
) -> None:
    db = tmp_path / "shared.db"
    cid, token = await _pending(db)
    outcomes = await asyncio.to_thread(_race, db, cid, token, "key-")
    winners = [k for k in outcomes if k.startswith("ok:")]
    assert sum(outcomes[k] for k in winners) == 1, outcomes
    assert outcomes["TOKEN_ALREADY_USED"] == 59, outcomes


@pytest.mark.slow
async def test_two_processes_identical_retries_all_get_the_one_stored_outcome(
    tmp_path: Path,
) -> None:
    db = tmp_path / "shared.db"
    cid, token = await _pending(db)
    outcomes = await asyncio.to_thread(_race, db, cid, token, "")
    assert len(outcomes) == 1, (
        outcomes
    )  # one distinct outcome: the same stored resumedAt for all 60
    assert next(iter(outcomes)).startswith("ok:")
    assert sum(outcomes.values()) == 60


@pytest.mark.slow
async def test_two_processes_resume_racing_cancel_losers_report_the_winner(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    cid, token = await _pending(db)
    outcomes = await asyncio.to_thread(_race, db, cid, token, "key-", 10)
    store = await open_sqlite_store(db)
    final = await ContinuationService(store=store).get(cid)
    await store.close()
    if final.status == "cancelled":
        assert outcomes["CONTINUATION_CANCELLED"] == 60, outcomes
        assert outcomes["cancel:ok"] == 20, outcomes
    else:
        assert final.status == "resumed", outcomes
        assert outcomes["TOKEN_ALREADY_USED"] == 59, outcomes
        assert outcomes["cancel:INVALID_TRANSITION"] == 20, outcomes


@pytest.mark.slow
@pytest.mark.parametrize("sync", ["commit", "ack"], indirect=True)
async def test_sigkill_during_grouped_appends_loses_no_acknowledged_write(
    tmp_path: Path, sync: str
) -> None:
    await _kill_while_appending(tmp_path, "append")


# A lone write commits on the loop's thread while commits are fast, on the writer thread while
# they are slow (``INLINE_COMMIT_BUDGET``): either way it is acknowledged only once committed.
@pytest.mark.slow
@pytest.mark.parametrize("sync", ["commit", "ack"], indirect=True)
@pytest.mark.parametrize("path", ["inline", "thread"])
async def test_sigkill_during_lone_appends_loses_no_acknowledged_write(
    tmp_path: Path, sync: str, path: str
) -> None:
    await _kill_while_appending(tmp_path, "append-lone", path)


async def _kill_while_appending(tmp_path: Path, *mode: str) -> None:
    db = tmp_path / "crash.db"
    worker = await asyncio.to_thread(_spawn, mode[0], str(db), *mode[1:])
    assert worker.stdout is not None
    acknowledged: list[str] = []
    # Let many writes be acknowledged, then kill the process wherever it is.
    while len(acknowledged) < 500:
        line = await asyncio.to_thread(worker.stdout.readline)
        assert line, "worker died before it was killed"
        acknowledged.append(line.strip())
    os.kill(worker.pid, signal.SIGKILL)
    rest, _ = await asyncio.to_thread(worker.communicate)
    acknowledged.extend(line for line in rest.split() if line)
    assert worker.returncode == -signal.SIGKILL

    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    streams = conn.execute("SELECT count(*) FROM continuation_streams").fetchone()[0]
    events = conn.execute("SELECT count(*) FROM continuation_events").fetchone()[0]
    # Nothing half-written: every head has exactly its created event.
    assert streams == events
    conn.close()

    store = await open_sqlite_store(db)
    service = ContinuationService(store=store)
    for cid in acknowledged:
        assert (await service.get(cid)).status == "pending"
    await store.close()
