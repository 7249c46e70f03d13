"""Operation ledger decisions (pure) and the SQLite table's write-once guard."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec
import pytest

from pausemesh.core.canonical import canonical_sha256
from pausemesh.core.errors import OperationConflictError
from pausemesh.core.operations import (
    MAX_RESENDS,
    OUTCOME_UNKNOWN,
    RECONCILIATION_ONLY,
    RECOVERED,
    RESEND_SETTLE,
    RESENT,
    OperationRecord,
    OperationRecovery,
    RecoveryStep,
    decide,
    new_attempt,
    next_resend,
)
from pausemesh.stores.sqlite import open_sqlite_operation_ledger
from pausemesh.stores.sqlite.database import SqliteDatabase
from pausemesh.stores.sqlite.operations import SqliteOperationLedger
from pausemesh.stores.sqlite.schema import SQLITE_MIGRATIONS

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _completed(result: object) -> tuple[OperationRecord, OperationRecord]:
    attempt = new_attempt("travel", "k", "book", {"f": 1}, now=NOW)
    done = msgspec.structs.replace(
        attempt, result=result, result_hash=canonical_sha256(result), completed_at=NOW
    )
    return attempt, done


def test_a_completed_intact_record_reconciles() -> None:
    attempt, done = _completed({"pnr": "A"})
    assert decide(done, attempt).decision == RECONCILIATION_ONLY


def test_a_record_whose_result_does_not_match_its_digest_is_reported_unknown() -> None:
    attempt, done = _completed({"pnr": "A"})
    forged = msgspec.structs.replace(done, result={"pnr": "B"})
    assert decide(forged, attempt).decision == OUTCOME_UNKNOWN


def test_a_record_whose_terms_do_not_match_their_digest_is_reported_unknown() -> None:
    attempt, done = _completed({"pnr": "A"})
    forged = msgspec.structs.replace(done, arguments={"f": 2})
    assert decide(forged, attempt).decision == OUTCOME_UNKNOWN


def test_other_terms_conflict_whatever_the_stored_state() -> None:
    attempt, done = _completed(None)
    other = new_attempt("travel", "k", "book", {"f": 2}, now=NOW)
    for stored in (attempt, done):
        with pytest.raises(OperationConflictError):
            decide(stored, other)


def test_committed_arguments_are_a_copy_the_caller_cannot_change() -> None:
    arguments = {"f": [1]}
    attempt = new_attempt("travel", "k", "book", arguments, now=NOW)
    arguments["f"].append(2)
    assert attempt.arguments == {"f": [1]}


async def test_sqlite_rows_are_write_once_even_for_raw_sql(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    ledger = await open_sqlite_operation_ledger(str(db))
    begun = await ledger.begin("travel", "k", tool="book", arguments={"f": 1}, now=NOW)
    await ledger.complete(
        begun.record.operation_id, attempt_id=begun.record.attempt_id, result="ok", now=NOW
    )
    await ledger.close()
    conn = sqlite3.connect(db)
    try:
        for statement in (
            "UPDATE operations SET result_json = '\"forged\"'",
            "UPDATE operations SET arguments_json = '{}'",
            "DELETE FROM operations",
        ):
            with pytest.raises(sqlite3.IntegrityError):
                conn.execute(statement)
    finally:
        conn.close()


def _step(step: RecoveryStep, at: datetime, number: int = 1) -> OperationRecovery:
    return OperationRecovery(operation_id="op:x", step=step, recorded_at=at, number=number)


def test_the_first_resend_needs_no_earlier_one() -> None:
    assert next_resend([], NOW) == 1


def test_a_resend_younger_than_the_settle_time_permits_no_other() -> None:
    steps = [_step(RESENT, NOW)]
    assert next_resend(steps, NOW + RESEND_SETTLE - timedelta(microseconds=1)) is None
    assert next_resend(steps, NOW + RESEND_SETTLE) == 2


def test_no_resend_after_the_limit_or_once_the_outcome_was_recovered() -> None:
    used = [_step(RESENT, NOW, n) for n in range(1, MAX_RESENDS + 1)]
    assert next_resend(used, NOW + 100 * RESEND_SETTLE) is None
    assert next_resend([_step(RECOVERED, NOW)], NOW + RESEND_SETTLE) is None
    assert next_resend(used[:1], NOW + RESEND_SETTLE, limit=1) is None


async def test_migration_14_keeps_a_claimed_resend_as_number_one_and_stays_append_only(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ledger.db"
    before = await SqliteDatabase(
        path, migrations=[m for m in SQLITE_MIGRATIONS if m.version < 14]
    ).open()
    old = SqliteOperationLedger(before, owns_database=True)
    begun = await old.begin("travel", "k", tool="book", arguments={"f": 1}, now=NOW)
    op, attempt = begun.record.operation_id, begun.record.attempt_id
    await before.write(
        lambda conn: conn.execute("INSERT INTO operation_recoveries VALUES (?, 'RESENT', 1)", (op,))
    )
    await old.close()
    ledger = await open_sqlite_operation_ledger(str(path))
    try:
        assert [(r.step, r.number) for r in await ledger.recoveries(op)] == [(RESENT, 1)]
        assert not await ledger.claim_resend(op, attempt_id=attempt, number=1, now=NOW)
        assert await ledger.claim_resend(op, attempt_id=attempt, number=2, now=NOW)
    finally:
        await ledger.close()
    conn = sqlite3.connect(path)
    try:
        for statement in (
            "UPDATE operation_recoveries SET number = 5",
            "DELETE FROM operation_recoveries",
        ):
            with pytest.raises(sqlite3.IntegrityError):
                conn.execute(statement)
    finally:
        conn.close()
