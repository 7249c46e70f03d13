"""Operation ledger decisions (pure) and the SQLite table's write-once guard."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest

from pausemesh.core.canonical import canonical_sha256
from pausemesh.core.errors import OperationConflictError
from pausemesh.core.operations import (
    OUTCOME_UNKNOWN,
    RECONCILIATION_ONLY,
    OperationRecord,
    decide,
    new_attempt,
)
from pausemesh.stores.sqlite import open_sqlite_operation_ledger

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
