"""A thread's AG-UI state in a row of its own (issue 42): a lease never reads it, a run whose
agent neither looks at ``ctx.state`` nor changes it reads and writes none of it, a look or a
``STATE_DELTA`` reads it once, and threads stored with the state in the record are carried
over by the migration. Every store kind passes the same tests."""

# ruff: noqa: S608 - SQL text here only interpolates throwaway test schema names

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import asyncpg
import msgspec

from pausemesh.agui import (
    AgentOutput,
    PauseRequest,
    RunContext,
    StateDeltaEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
)
from pausemesh.agui.input import convert_run_input
from pausemesh.agui.run import RunHost
from pausemesh.core import ContinuationService, KeyedTokenIssuer, ManualClock
from pausemesh.core.threads import UNREAD_STATE, ThreadRecord, ThreadStore
from pausemesh.stores.memory import InMemoryEventStore
from pausemesh.stores.postgres import PostgresDatabase, PostgresThreadStore
from pausemesh.stores.postgres.migrate import RUNTIME_GRANTS, migrate
from pausemesh.stores.postgres.schema import POSTGRES_MIGRATIONS
from pausemesh.stores.sqlite import SqliteDatabase, SqliteThreadStore
from pausemesh.stores.sqlite.schema import SQLITE_MIGRATIONS
from tests.support.postgres import (
    DATABASE_URL,
    _open_database,
    fresh_schema,
    require_postgres,
    runtime_role,
)

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
BIG_STATE = {"notes": ["n" * 100 for _ in range(50)], "count": 1}


class CountedState:
    """A thread store that records every read and every write of a thread's state."""

    def __init__(self, inner: ThreadStore) -> None:
        self.inner = inner
        self.state_reads = 0
        self.state_writes: list[Any] = []
        self.leased: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def get(
        self, thread_id: str, *, tail: int | None = None, state: bool = True
    ) -> ThreadRecord | None:
        self.state_reads += state
        return await self.inner.get(thread_id, tail=tail, state=state)

    async def acquire_lease(self, thread_id: str, **kwargs: Any) -> ThreadRecord:
        record = await self.inner.acquire_lease(thread_id, **kwargs)
        self.leased.append(record.state)
        return record

    async def save(self, record: ThreadRecord, **kwargs: Any) -> ThreadRecord:
        if record.state is not UNREAD_STATE:
            self.state_writes.append(record.state)
        return await self.inner.save(record, **kwargs)

    def reset(self) -> None:
        self.state_reads = 0
        self.state_writes.clear()
        self.leased.clear()


async def never_looks(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    yield TextMessageStartEvent(message_id=f"ok-{ctx.run_id}", role="assistant")
    yield TextMessageContentEvent(message_id=f"ok-{ctx.run_id}", delta="ok")


SEEN: list[Any] = []


async def counts_up(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """Looks at the state (twice: one read) and moves its count on with a delta."""
    SEEN.append(ctx.state["count"])
    SEEN.append(len(ctx.state["notes"]))
    yield TextMessageStartEvent(message_id=f"ok-{ctx.run_id}", role="assistant")
    yield StateDeltaEvent(delta=[{"op": "replace", "path": "/count", "value": SEEN[-2] + 1}])


async def deltas_blind(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """Changes the state with a delta without looking at it."""
    yield StateDeltaEvent(delta=[{"op": "add", "path": "/seen", "value": ctx.run_id}])


async def asks(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """Pauses with a question, having looked at nothing."""
    yield PauseRequest(message="Which flight?")


def _host(agent: Any, threads: Any) -> RunHost:
    service = ContinuationService(
        store=InMemoryEventStore(),
        clock=ManualClock(),
        keyed_issuer=KeyedTokenIssuer({"k1": b"k" * 32}, "k1"),
    )
    return RunHost(
        agent=agent, service=service, threads=cast("ThreadStore", threads), keepalive_seconds=10
    )


async def _run(host: RunHost, n: int, state: Any = None) -> list[bytes]:
    body: dict[str, Any] = {
        "threadId": "t1",
        "runId": f"r{n}",
        "messages": [{"id": f"u{n}", "role": "user", "content": f"turn {n}"}],
    }
    if state is not None:
        body["state"] = state
    frames = [f async for f in host.run(convert_run_input(body), None)]
    assert b"RUN_FINISHED" in frames[-1], frames
    return frames


async def test_a_run_that_leaves_the_state_alone_reads_and_writes_none_of_it(
    threads: ThreadStore,
) -> None:
    counted = CountedState(threads)
    host = _host(never_looks, counted)
    await _run(host, 0, BIG_STATE)
    assert counted.state_writes == [BIG_STATE]  # the first run's input sets it
    counted.reset()

    for n in range(1, 4):
        # A later input's state is the client's copy: the thread's stored one stands.
        await _run(host, n, {"ignored": True})

    assert counted.state_reads == 0
    assert counted.state_writes == []
    assert counted.leased == [UNREAD_STATE] * 3
    stored = await threads.get("t1")
    assert stored is not None
    assert stored.state == BIG_STATE
    assert stored.message_count == 8
    assert (
        stored.stored_bytes == (await threads.get("t1", tail=0, state=False) or stored).stored_bytes
    )


async def test_an_agent_that_looks_reads_the_state_once_and_its_delta_is_saved(
    threads: ThreadStore,
) -> None:
    SEEN.clear()
    counted = CountedState(threads)
    await _run(_host(never_looks, counted), 0, BIG_STATE)
    counted.reset()

    await _run(_host(counts_up, counted), 1)
    reads = counted.state_reads
    await _run(_host(counts_up, counted), 2)

    assert SEEN == [1, 50, 2, 50]
    # ``ctx.state`` looked at twice and the delta applied: one read of the state.
    assert reads == 1
    assert [s["count"] for s in counted.state_writes] == [2, 3]
    stored = await threads.get("t1")
    assert stored is not None
    assert stored.state == {**BIG_STATE, "count": 3}


async def test_a_delta_from_an_agent_that_never_looked_applies_to_the_stored_state(
    threads: ThreadStore,
) -> None:
    counted = CountedState(threads)
    await _run(_host(never_looks, counted), 0, {"count": 1})
    counted.reset()

    frames = await _run(_host(deltas_blind, counted), 1)

    assert b"STATE_DELTA" in b"".join(frames)
    assert counted.state_reads == 1
    stored = await threads.get("t1")
    assert stored is not None
    assert stored.state == {"count": 1, "seen": "r1"}


def _state_snapshot(frames: list[bytes]) -> Any:
    for frame in frames:
        for line in frame.decode().splitlines():
            if line.startswith("data:") and '"STATE_SNAPSHOT"' in line:
                return msgspec.json.decode(line[5:])["snapshot"]
    raise AssertionError(frames)


async def test_a_pause_and_a_reload_carry_the_stored_state_the_run_never_read(
    threads: ThreadStore,
) -> None:
    counted = CountedState(threads)
    await _run(_host(never_looks, counted), 0, BIG_STATE)
    counted.reset()
    host = _host(asks, counted)

    paused = [
        f
        async for f in host.run(
            convert_run_input(
                {
                    "threadId": "t1",
                    "runId": "r1",
                    "messages": [{"id": "u1", "role": "user", "content": "hi"}],
                }
            ),
            None,
        )
    ]
    reloaded = [
        f
        async for f in host.connect(
            convert_run_input({"threadId": "t1", "runId": "r2", "messages": []}), None
        )
    ]

    assert b"Which flight?" in paused[-1]  # the interrupting RUN_FINISHED
    assert _state_snapshot(paused) == BIG_STATE
    assert _state_snapshot(reloaded) == BIG_STATE
    # The snapshot's read and the reload's: the state itself is never written.
    assert counted.state_reads == 2
    assert counted.state_writes == []


async def test_a_save_of_an_unread_state_keeps_the_stored_one_and_its_size(
    threads: ThreadStore,
) -> None:
    record = await threads.create_or_load("t1", owner="alice", now=NOW)
    assert record.state == {}
    saved = await threads.save(msgspec.structs.replace(record, state=BIG_STATE), now=NOW)
    head = await threads.get("t1", tail=0, state=False)
    assert head is not None
    assert head.state is UNREAD_STATE
    assert head.stored_bytes == saved.stored_bytes

    again = await threads.save(
        msgspec.structs.replace(head, messages=[{"id": "m", "role": "user", "content": "x"}]),
        now=NOW,
    )

    stored = await threads.get("t1")
    assert stored is not None
    assert stored.state == BIG_STATE
    assert again.stored_bytes == stored.stored_bytes > saved.stored_bytes
    shrunk = await threads.save(msgspec.structs.replace(stored, state={}), now=NOW)
    assert shrunk.stored_bytes == stored.stored_bytes - len(msgspec.json.encode(BIG_STATE)) + 2


async def test_erasing_a_thread_removes_its_state(threads: ThreadStore) -> None:
    record = await threads.create_or_load("t1", owner="alice", now=NOW)
    await threads.save(msgspec.structs.replace(record, state=BIG_STATE), now=NOW)

    assert await threads.erase("t1", now=NOW)

    assert await threads.get("t1") is None
    assert await threads.get("t1", tail=0, state=False) is None


# --- What the database itself says (SQLite, PostgreSQL) --------------------------------------


async def test_on_sqlite_a_run_that_leaves_the_state_alone_writes_no_state_row(
    tmp_path: Path,
) -> None:
    store = SqliteThreadStore(await SqliteDatabase(tmp_path / "s.db").open(), owns_database=True)
    try:
        await _run(_host(never_looks, store), 0, BIG_STATE)

        def watch(conn: Any) -> None:
            # Every write of a state row is counted, by the database.
            conn.execute("CREATE TABLE state_writes (n INTEGER)")
            for kind in ("INSERT", "UPDATE", "DELETE"):
                conn.execute(
                    f"CREATE TRIGGER count_state_{kind.lower()} AFTER {kind} ON agui_thread_state"
                    " BEGIN INSERT INTO state_writes VALUES (1); END"
                )

        await store.database.write(watch)
        for n in range(1, 4):
            await _run(_host(never_looks, store), n)
        quiet = await store.database.read("SELECT count(*) FROM state_writes", ())
        await _run(_host(deltas_blind, store), 4)
        changed = await store.database.read("SELECT count(*) FROM state_writes", ())
        columns = await store.database.read(
            "SELECT name FROM pragma_table_info('agui_threads')", ()
        )
        await store.erase("t1", now=NOW)
        left = await store.database.read("SELECT count(*) FROM agui_thread_state", ())
    finally:
        await store.close()

    assert quiet[0][0] == 0
    assert changed[0][0] == 1
    assert "state_json" not in {c[0] for c in columns}
    assert left[0][0] == 0


async def test_on_postgres_a_run_that_leaves_the_state_alone_leaves_its_row_untouched() -> None:
    await require_postgres()
    schema = fresh_schema()
    await migrate(DATABASE_URL, schema=schema)
    store = PostgresThreadStore(await _open_database(schema), owns_database=True)
    conn = await asyncpg.connect(DATABASE_URL)
    version = f'SELECT xmin::text FROM "{schema}".agui_thread_state WHERE thread_id = $1'
    try:
        await _run(_host(never_looks, store), 0, BIG_STATE)
        before = await conn.fetchval(version, "t1")
        for n in range(1, 4):
            await _run(_host(never_looks, store), n)
        quiet = await conn.fetchval(version, "t1")
        await _run(_host(deltas_blind, store), 4)
        changed = await conn.fetchval(version, "t1")
        await store.erase("t1", now=NOW)
        left = await conn.fetchval(f'SELECT count(*) FROM "{schema}".agui_thread_state')
    finally:
        await conn.close()
        await store.close()

    # A row's xmin changes with each write of it.
    assert before is not None
    assert quiet == before
    assert changed != before
    assert left == 0


async def test_the_postgres_runtime_role_writes_states_and_erases_them_only_by_the_function() -> (
    None
):
    assert ("SELECT, INSERT, UPDATE", "agui_thread_state") in RUNTIME_GRANTS
    async with runtime_role() as (schema, url):
        database = await PostgresDatabase.connect(url, schema=schema, min_size=1, max_size=2)
        conn = await asyncpg.connect(url)
        try:
            await database.check_readiness()
            threads = PostgresThreadStore(database)
            record = await threads.create_or_load("t1", owner="alice", now=NOW)
            saved = await threads.save(msgspec.structs.replace(record, state={"a": 1}), now=NOW)
            await threads.save(msgspec.structs.replace(saved, state={"a": 2}), now=NOW)
            denied = None
            try:
                await conn.execute(f'DELETE FROM "{schema}".agui_thread_state')
            except asyncpg.InsufficientPrivilegeError as error:
                denied = error
            stored = await threads.get("t1")
            assert await threads.erase("t1", now=NOW)
            await threads.close()
        finally:
            await conn.close()
            await database.close()
        admin = await asyncpg.connect(DATABASE_URL)
        try:
            left = await admin.fetchval(f'SELECT count(*) FROM "{schema}".agui_thread_state')
        finally:
            await admin.close()

    assert stored is not None
    assert stored.state == {"a": 2}
    assert denied is not None
    assert left == 0


# --- Threads stored with the state in the record are carried over ---------------------------


async def test_the_sqlite_migration_carries_old_layout_states_over(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    before = tuple(m for m in SQLITE_MIGRATIONS if m.version < 48)
    old = await SqliteDatabase(path, migrations=before).open()
    state = {"k": 'é\n"quoted"', "list": [1, 2, 3]}
    state_text = msgspec.json.encode(state).decode()

    def seed(conn: Any) -> None:
        for thread_id, text in (("t-state", state_text), ("t-empty", "{}")):
            size = 2 + len(text.encode())
            conn.execute(
                "INSERT INTO agui_threads (thread_id, owner, messages_json, state_json, version,"
                " last_sequence, created_at_us, updated_at_us, stored_bytes)"
                " VALUES (?, 'alice', '[]', ?, 3, 0, 0, 0, ?)",
                (thread_id, text, size),
            )

    await old.write(seed)
    await old.close()

    store = SqliteThreadStore(await SqliteDatabase(path).open(), owns_database=True)
    try:
        carried = await store.get("t-state")
        empty = await store.get("t-empty")
        head = await store.acquire_lease(
            "t-state", lease_id="L", run_id="r", now=NOW, expires_at=NOW + timedelta(minutes=1)
        )
        kept = await store.save(head, now=NOW)
        after = await store.get("t-state")
    finally:
        await store.close()

    assert carried is not None
    assert carried.state == state
    assert carried.version == 3
    assert carried.stored_bytes == 2 + len(state_text.encode())
    assert empty is not None
    assert empty.state == {}
    assert head.state is UNREAD_STATE
    assert after is not None
    assert after.state == state
    assert kept.stored_bytes == after.stored_bytes == carried.stored_bytes


async def test_the_postgres_migration_carries_old_layout_states_over() -> None:
    await require_postgres()
    schema = fresh_schema()
    before = tuple(m for m in POSTGRES_MIGRATIONS if m.version < 48)
    await migrate(DATABASE_URL, schema=schema, migrations=before)
    state = {"k": 'é\n"quoted"', "list": [1, 2, 3]}
    conn = await asyncpg.connect(DATABASE_URL)
    try:
        for thread_id, body in (
            ("t-state", {"messages": [], "state": state, "open_receipt": None}),
            ("t-empty", {"messages": [], "state": {}, "open_receipt": None}),
            ("t-none", {"messages": [], "open_receipt": None}),
        ):
            await conn.execute(
                f'INSERT INTO "{schema}".agui_threads (thread_id, owner, body_json, version,'
                " last_sequence, created_at, updated_at) VALUES ($1, 'alice', $2, 3, 0, $3, $3)",
                thread_id,
                msgspec.json.encode(body).decode(),
                NOW,
            )
        await migrate(DATABASE_URL, schema=schema)
        bodies = await conn.fetch(f'SELECT body_json FROM "{schema}".agui_threads')
    finally:
        await conn.close()
    store = PostgresThreadStore(await _open_database(schema), owns_database=True)
    try:
        carried = await store.get("t-state")
        empty = await store.get("t-empty")
        none = await store.get("t-none")
        head = await store.acquire_lease(
            "t-state", lease_id="L", run_id="r", now=NOW, expires_at=NOW + timedelta(minutes=1)
        )
        kept = await store.save(head, now=NOW)
        after = await store.get("t-state")
    finally:
        await store.close()

    assert all("state" not in msgspec.json.decode(b[0]) for b in bodies)
    assert carried is not None
    assert carried.state == state
    assert carried.version == 3
    assert empty is not None
    assert empty.state == {}
    assert none is not None
    assert none.state == {}
    assert head.state is UNREAD_STATE
    assert after is not None
    assert after.state == state
    # The body a save writes holds every field (the migrated one only those it had): the
    # state's size is counted the same either way.
    assert kept.stored_bytes == after.stored_bytes
    assert carried.stored_bytes > len(msgspec.json.encode(state)) < kept.stored_bytes
