"""The SQLite continuation log stays append-only around erasure (migration 13): the one UPDATE
it takes is the redaction of a continuation in the erasure ledger, and DELETE never."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from pausemesh.stores.sqlite import SqliteDatabase, SqliteEventStore
from tests.support.events import T0, created, resumed


@pytest.fixture(name="store")
async def store_fixture(tmp_path: Path) -> AsyncIterator[SqliteEventStore]:
    """A store holding ``kept`` and the erased ``gone`` (both asked and answered)."""
    database = await SqliteDatabase(tmp_path / "events.db").open()
    store = SqliteEventStore(database)
    try:
        await store.append("kept", 0, [created("kept"), resumed("kept")])
        erased = msgspec.structs.replace(created("gone"), correlation_id="t1", owner="alice")
        await store.append("gone", 0, [erased, resumed("gone")])
        assert await store.erase_correlated("t1", owner="alice", now=T0) == 1
        yield store
    finally:
        await store.close()


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE continuation_events SET event_json = '{}' WHERE continuation_id = 'kept'",
        "UPDATE continuation_events SET version = 9 WHERE continuation_id = 'gone'",
        "DELETE FROM continuation_events WHERE continuation_id = 'gone'",
        "DELETE FROM continuation_erasures",
        "UPDATE continuation_erasures SET erased_at_us = 0",
    ],
    ids=["update-not-erased", "renumber-erased", "delete-erased", "unerase", "backdate"],
)
async def test_the_log_refuses_every_change_but_the_redaction_of_an_erased_continuation(
    store: SqliteEventStore, tmp_path: Path, sql: str
) -> None:
    # Straight at the file, as a broken tool or person would.
    with (
        contextlib.closing(sqlite3.connect(tmp_path / "events.db")) as conn,
        pytest.raises(sqlite3.IntegrityError, match="append-only"),
    ):
        conn.execute(sql)
    assert len(await store.load("kept")) == 2
    assert len(await store.load("gone")) == 2
