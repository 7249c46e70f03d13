"""Long threads in the stores (issue 40, item 6): the stored size every store keeps with a
record (what ``PAUSEMESH_MAX_THREAD_BYTES`` bounds), and, on SQLite and PostgreSQL, a record of
megabytes read and saved while the event loop keeps turning (its messages coded a piece at a
time, SQLite's row read on a thread of its own), including records stored before this form."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

from pausemesh.core import large_json
from pausemesh.core.large_json import LARGE_BYTES
from pausemesh.core.threads import ThreadRecord, ThreadStore
from pausemesh.stores.sqlite import SqliteDatabase, SqliteThreadStore
from pausemesh.stores.sqlite.schema import SQLITE_MIGRATIONS
from tests.support.thread_stores import THREAD_STORE_FACTORIES, open_thread_store

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
# About 6 MB: 100 user messages of 60 KB, each answered.
LONG = [
    message
    for n in range(100)
    for message in (
        {"id": f"u{n}", "role": "user", "content": f"{n} " + "a long line of text " * 3_000},
        {"id": f"a{n}", "role": "assistant", "content": "Hello."},
    )
]


@pytest.fixture(name="large_store", params=["sqlite", "postgres"])
async def large_store_fixture(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[ThreadStore]:
    """The stores that read and write a long thread off the loop (the memory store is a
    test fake that copies in one go)."""
    async with open_thread_store(request.param, tmp_path) as store:
        yield store


class Turns:
    """Counts the event loop's turns while it is running (a task that only yields)."""

    def __init__(self) -> None:
        self.count = 0
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Turns:
        self._task = asyncio.create_task(self._tick())
        await asyncio.sleep(0)
        self.count = 0
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._task is not None
        self._task.cancel()

    async def _tick(self) -> None:
        while True:
            self.count += 1
            await asyncio.sleep(0)


async def _long_thread(store: ThreadStore, thread_id: str = "t-long") -> ThreadRecord:
    record = await store.create_or_load(thread_id, owner="alice", now=NOW)
    return await store.save(msgspec.structs.replace(record, messages=LONG), now=NOW)


@pytest.mark.parametrize("kind", sorted(THREAD_STORE_FACTORIES))
async def test_every_store_keeps_the_stored_size_of_a_record_with_it(
    kind: str, tmp_path: Path
) -> None:
    async with open_thread_store(kind, tmp_path) as store:
        empty = await store.create_or_load("t1", owner="alice", now=NOW)
        message = {"id": "u1", "role": "user", "content": "x" * 10_000}
        saved = await store.save(
            msgspec.structs.replace(empty, messages=[message], state={"k": "v"}), now=NOW
        )
        read = await store.get("t1")
        assert read is not None
        # What was stored, measured as stored (PostgreSQL's body adds its keys).
        assert saved.stored_bytes == read.stored_bytes
        assert 10_000 + len('{"k":"v"}') <= read.stored_bytes < 10_300
        assert empty.stored_bytes < 100
        shorter = await store.save(msgspec.structs.replace(read, messages=[]), now=NOW)
        again = await store.get("t1")
        assert again is not None
        assert shorter.stored_bytes == again.stored_bytes < 100


async def test_a_long_thread_is_saved_and_read_whole_while_the_loop_keeps_turning(
    large_store: ThreadStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Slices of no time: each message is one step, so the loop's turns between steps count the
    # steps whatever the machine's speed (timed slices made the count vary with it).
    monkeypatch.setattr(large_json, "SLICE_SECONDS", 0.0)
    record = await large_store.create_or_load("t-long", owner="alice", now=NOW)
    async with Turns() as saving:
        saved = await large_store.save(msgspec.structs.replace(record, messages=LONG), now=NOW)
    async with Turns() as reading:
        read = await large_store.get("t-long")

    assert read is not None
    assert read.messages == LONG
    assert read.version == saved.version == 2
    assert read.stored_bytes == saved.stored_bytes > len(msgspec.json.encode(LONG)) > LARGE_BYTES
    # Never one step of megabytes: the loop ran other work (here, a counter) many times over
    # while the record was written and read. Coded in one go on the loop, it ran zero times.
    assert saving.count >= 10
    assert reading.count >= 10
    leased = await large_store.acquire_lease(
        "t-long", lease_id="L1", run_id="r1", now=NOW, expires_at=NOW.replace(hour=13)
    )
    # A lease reads no message (issue 42): the run reads the window it needs afterwards.
    assert leased.messages == []
    assert leased.message_count == len(LONG)
    assert leased.lease is not None


async def test_the_sqlite_migration_measures_the_threads_stored_before_it(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    before = tuple(m for m in SQLITE_MIGRATIONS if m.version < 15)
    old = await SqliteDatabase(path, migrations=before).open()
    messages = msgspec.json.encode([{"id": "u1", "role": "user", "content": "é" * 500}])

    def seed(conn: Any) -> None:
        conn.execute(
            "INSERT INTO agui_threads (thread_id, owner, messages_json, state_json, version,"
            " last_sequence, created_at_us, updated_at_us) VALUES ('t-old', 'alice', ?, '{}',"
            " 2, 0, 0, 0)",
            (messages.decode(),),
        )

    await old.write(seed)
    await old.close()

    store = SqliteThreadStore(await SqliteDatabase(path).open(), owns_database=True)
    try:
        record = await store.get("t-old")
    finally:
        await store.close()

    assert record is not None
    # Bytes, not characters: "é" is two of them. Since migration 42 each message is counted
    # with a two-byte separator, and the empty list's brackets as the row holds them.
    assert record.stored_bytes == len(messages) + len(b"{}") + 2
