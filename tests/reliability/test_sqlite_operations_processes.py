"""The SQLite operation ledger across OS processes: one dispatch per business key, even after SIGKILL."""

from __future__ import annotations

import asyncio
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from pausemesh.core.errors import OutcomeUnknownError
from pausemesh.core.operations import OUTCOME_UNKNOWN, RECONCILIATION_ONLY, run_once
from pausemesh.stores.sqlite import open_sqlite_operation_ledger
from tests.support.workers import race, release, spawn_worker

ARGS = {"flight": "PM202", "passengers": 1}


def _spawn(*args: str) -> subprocess.Popen[str]:
    return spawn_worker("tests.support.ledger_worker", *args)


def _race(db: Path, effects: Path) -> Counter[str]:
    return race([_spawn("race", str(db), str(effects), "25") for _ in range(3)])


def _crash(db: Path, effects: Path) -> None:
    worker = _spawn("crash", str(db), str(effects))
    release(worker)
    assert worker.stdout is not None
    assert worker.stdout.readline().strip() == "dispatched"
    worker.kill()  # SIGKILL between the side effect and its recorded outcome
    worker.communicate(timeout=30)  # reaps it and closes the pipes


@pytest.mark.slow
async def test_three_processes_racing_on_one_business_key_dispatch_once(tmp_path: Path) -> None:
    db, effects = tmp_path / "ledger.db", tmp_path / "effects.log"
    ledger = await open_sqlite_operation_ledger(str(db))  # migrate before the race
    await ledger.close()
    outcomes = await asyncio.to_thread(_race, db, effects)
    assert sum(outcomes.values()) == 75
    assert outcomes["EXECUTE"] == 1, outcomes
    assert len(effects.read_text().splitlines()) == 1
    # Whoever lost while the winner was in flight heard OUTCOME_UNKNOWN, the rest reconciled.
    assert set(outcomes) <= {"EXECUTE", "OUTCOME_UNKNOWN", "RECONCILIATION_ONLY"}
    ledger = await open_sqlite_operation_ledger(str(db))
    try:
        again = await run_once(ledger, "travel", "booking:race", "book", ARGS, _never)
        assert again.decision == RECONCILIATION_ONLY
    finally:
        await ledger.close()


@pytest.mark.slow
async def test_an_attempt_killed_before_its_outcome_stays_unknown_and_is_never_retried(
    tmp_path: Path,
) -> None:
    db, effects = tmp_path / "ledger.db", tmp_path / "effects.log"
    await asyncio.to_thread(_crash, db, effects)
    ledger = await open_sqlite_operation_ledger(str(db))
    try:
        record = (await ledger.list("travel"))[0]
        assert not record.completed
        begun = await ledger.begin(
            "travel", "booking:crash", tool="book", arguments=ARGS, now=record.attempted_at
        )
        assert begun.decision == OUTCOME_UNKNOWN
        with pytest.raises(OutcomeUnknownError):
            await run_once(ledger, "travel", "booking:crash", "book", ARGS, _never)
    finally:
        await ledger.close()
    assert len(effects.read_text().splitlines()) == 1


async def _never() -> None:
    raise AssertionError("a recorded or unknown operation must not be dispatched again")
