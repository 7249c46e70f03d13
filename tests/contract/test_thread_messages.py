"""A thread's messages stored one per position (issue 42): a save writes what it changed, a
read takes the newest page or a window, and threads stored in the old one-column layout are
carried over by the migration. Every store kind passes the same tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import asyncpg
import msgspec

from pausemesh.agui import (
    AgentOutput,
    RunContext,
    TextMessageContentEvent,
    TextMessageStartEvent,
    lazy_history,
)
from pausemesh.agui.input import convert_run_input
from pausemesh.agui.run import RunHost
from pausemesh.core import ContinuationService, KeyedTokenIssuer, ManualClock
from pausemesh.core.errors import VersionConflictError
from pausemesh.core.threads import ThreadRecord, ThreadStore
from pausemesh.stores.memory import InMemoryEventStore
from pausemesh.stores.postgres import PostgresThreadStore
from pausemesh.stores.postgres.migrate import migrate
from pausemesh.stores.postgres.schema import POSTGRES_MIGRATIONS
from pausemesh.stores.sqlite import SqliteDatabase, SqliteThreadStore
from pausemesh.stores.sqlite.schema import SQLITE_MIGRATIONS
from tests.support.postgres import DATABASE_URL, _open_database, fresh_schema, require_postgres

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
OLD_MESSAGES = [
    {"id": "u1", "role": "user", "content": 'é\n"quoted" ' * 50},
    {"id": "a1", "role": "assistant", "content": "", "toolCalls": [{"id": "c1"}]},
    {"id": "u2", "role": "user", "content": [{"type": "text", "text": "two"}]},
]


def _turn(n: int, size: int = 10) -> list[dict[str, Any]]:
    return [
        {"id": f"u{n}", "role": "user", "content": f"{n} " + "x" * size},
        {"id": f"a{n}", "role": "assistant", "content": f"answer {n}"},
    ]


async def _append(threads: ThreadStore, record: ThreadRecord, added: list[Any]) -> ThreadRecord:
    """What a run does: the messages it added, after the stored ones (none read)."""
    return await threads.save(
        msgspec.structs.replace(record, messages=added, messages_from=record.message_count),
        now=NOW,
    )


async def _thread(threads: ThreadStore, turns: int, thread_id: str = "t1") -> ThreadRecord:
    record = await threads.create_or_load(thread_id, owner="alice", now=NOW)
    for n in range(turns):
        record = await _append(threads, record, _turn(n))
    return record


async def test_a_save_appends_after_the_stored_messages_and_keeps_the_count_and_size(
    threads: ThreadStore,
) -> None:
    record = await _thread(threads, 3)

    assert record.message_count == 6
    stored = await threads.get("t1")
    assert stored is not None
    assert stored.messages == [m for n in range(3) for m in _turn(n)]
    assert stored.messages_from == 0
    assert stored.message_count == 6
    # The running size is what a whole rewrite of the same messages measures.
    again = await threads.create_or_load("t2", owner="alice", now=NOW)
    whole = await threads.save(msgspec.structs.replace(again, messages=stored.messages), now=NOW)
    assert whole.stored_bytes == record.stored_bytes == stored.stored_bytes


async def test_a_save_from_a_position_replaces_only_the_messages_from_there(
    threads: ThreadStore,
) -> None:
    record = await _thread(threads, 3)
    edited = {"id": "a1", "role": "assistant", "content": "answer 1, edited"}

    saved = await threads.save(
        msgspec.structs.replace(record, messages=[edited], messages_from=3), now=NOW
    )

    stored = await threads.get("t1")
    assert stored is not None
    assert stored.messages == [*_turn(0), _turn(1)[0], edited]
    assert saved.message_count == stored.message_count == 4
    assert saved.stored_bytes == stored.stored_bytes < record.stored_bytes


async def test_a_head_record_saved_back_keeps_every_message(threads: ThreadStore) -> None:
    await _thread(threads, 2)
    head = await threads.get("t1", tail=0)
    assert head is not None
    assert head.messages == []
    assert head.messages_from == head.message_count == 4

    await threads.save(msgspec.structs.replace(head, state={"k": 1}), now=NOW)

    stored = await threads.get("t1")
    assert stored is not None
    assert stored.messages == [*_turn(0), *_turn(1)]
    assert stored.state == {"k": 1}


async def test_a_tail_read_holds_the_newest_messages_and_where_they_start(
    threads: ThreadStore,
) -> None:
    await _thread(threads, 5)

    tail = await threads.get("t1", tail=3)
    over = await threads.get("t1", tail=100)

    assert tail is not None
    assert over is not None
    assert tail.messages == [*_turn(3)[1:], *_turn(4)]
    assert tail.messages_from == 7
    assert tail.message_count == 10
    assert over.messages_from == 0
    assert len(over.messages) == 10


async def test_a_save_under_a_stale_version_changes_no_message(threads: ThreadStore) -> None:
    record = await _thread(threads, 1)
    await _append(threads, record, _turn(1))

    try:
        await _append(threads, record, _turn(9))
    except VersionConflictError:
        pass
    else:
        raise AssertionError("a stale save was stored")

    stored = await threads.get("t1")
    assert stored is not None
    assert [m["id"] for m in stored.messages] == ["u0", "a0", "u1", "a1"]


async def test_pages_come_newest_first_and_a_cursor_stays_put_while_messages_arrive(
    threads: ThreadStore,
) -> None:
    record = await _thread(threads, 5)

    first = await threads.read_messages("t1", before=None, limit=4)
    record = await _append(threads, record, _turn(5))  # a run adds a turn meanwhile
    second = await threads.read_messages("t1", before=first[-1].position, limit=4)
    last = await threads.read_messages("t1", before=second[-1].position, limit=4)

    assert [p.message["id"] for p in first] == ["a4", "u4", "a3", "u3"]
    assert [p.message["id"] for p in second] == ["a2", "u2", "a1", "u1"]
    assert [p.message["id"] for p in last] == ["a0", "u0"]
    assert [p.position for p in first] == [9, 8, 7, 6]
    newest = await threads.read_messages("t1", before=None, limit=2)
    assert [p.message["id"] for p in newest] == ["a5", "u5"]


async def test_an_erased_thread_has_no_page_and_no_known_message(threads: ThreadStore) -> None:
    await _thread(threads, 2)
    assert await threads.known_message_ids("t1", ["u1", "nope", "a0"]) == {"u1", "a0"}

    await threads.erase("t1", now=NOW)

    assert await threads.read_messages("t1", before=None, limit=10) == []
    assert await threads.known_message_ids("t1", ["u1"]) == set()


async def test_the_sqlite_migration_carries_old_layout_threads_over(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    before = tuple(m for m in SQLITE_MIGRATIONS if m.version < 42)
    old = await SqliteDatabase(path, migrations=before).open()
    messages = OLD_MESSAGES
    # The old one-column forms: the line form and compact JSON.
    lines = b"[\n" + b",\n".join(msgspec.json.encode(m) for m in messages) + b"\n]"
    compact = msgspec.json.encode(messages[:1])

    def seed(conn: Any) -> None:
        for thread_id, text in (("t-lines", lines), ("t-compact", compact), ("t-empty", b"[]")):
            conn.execute(
                "INSERT INTO agui_threads (thread_id, owner, messages_json, state_json, version,"
                " last_sequence, created_at_us, updated_at_us, stored_bytes)"
                " VALUES (?, 'alice', ?, '{\"k\":1}', 3, 0, 0, 0, 0)",
                (thread_id, text.decode()),
            )

    await old.write(seed)
    await old.close()

    store = SqliteThreadStore(await SqliteDatabase(path).open(), owns_database=True)
    try:
        carried = await store.get("t-lines")
        single = await store.get("t-compact")
        empty = await store.get("t-empty")
        page = await store.read_messages("t-lines", before=None, limit=2)
        assert carried is not None
        appended = await _append(store, carried, _turn(7))
        after = await store.get("t-lines")
    finally:
        await store.close()

    assert carried.messages == messages
    assert carried.message_count == 3
    assert carried.state == {"k": 1}
    assert carried.version == 3
    assert single is not None
    assert single.messages == messages[:1]
    assert empty is not None
    assert empty.messages == []
    assert empty.message_count == 0
    assert [p.message["id"] for p in page] == ["u2", "a1"]
    # Measured as a thread stored after the migration measures the same messages.
    per_message = sum(len(msgspec.json.encode(m)) + 2 for m in messages)
    assert carried.stored_bytes == 2 + len(b'{"k":1}') + per_message
    assert after is not None
    assert after.messages == [*messages, *_turn(7)]
    assert after.stored_bytes == appended.stored_bytes


async def test_the_postgres_migration_carries_old_layout_threads_over() -> None:
    await require_postgres()
    schema = fresh_schema()
    before = tuple(m for m in POSTGRES_MIGRATIONS if m.version < 42)
    await migrate(DATABASE_URL, schema=schema, migrations=before)
    conn = await asyncpg.connect(DATABASE_URL)
    try:
        # The old body: every field, the messages in it (compact, then the line form).
        for thread_id, messages in (("t-old", OLD_MESSAGES), ("t-empty", [])):
            body = msgspec.json.encode(
                {"state": {"k": 1}, "open_receipt": None, "messages": messages}
            )
            await conn.execute(
                f'INSERT INTO "{schema}".agui_threads (thread_id, owner, body_json, version,'  # noqa: S608 - a test schema
                " last_sequence, created_at, updated_at) VALUES ($1, 'alice', $2, 3, 0, $3, $3)",
                thread_id,
                body.decode(),
                NOW,
            )
    finally:
        await conn.close()
    await migrate(DATABASE_URL, schema=schema)
    store = PostgresThreadStore(await _open_database(schema), owns_database=True)
    try:
        carried = await store.get("t-old")
        empty = await store.get("t-empty")
        page = await store.read_messages("t-old", before=None, limit=2)
        assert carried is not None
        appended = await _append(store, carried, _turn(7))
        after = await store.get("t-old")
        assert await store.erase("t-old", now=NOW)
        gone = await store.read_messages("t-old", before=None, limit=10)
    finally:
        await store.close()

    assert carried.messages == OLD_MESSAGES
    assert carried.message_count == 3
    assert carried.state == {"k": 1}
    assert carried.version == 3
    assert empty is not None
    assert empty.messages == []
    assert empty.message_count == 0
    assert [p.message["id"] for p in page] == ["u2", "a1"]
    assert after is not None
    assert after.messages == [*OLD_MESSAGES, *_turn(7)]
    assert after.stored_bytes == appended.stored_bytes > carried.stored_bytes
    assert gone == []


# --- The run host reads the history only when the agent asks (every store) -----------------


class CountedReads:
    """A thread store that records every call that reads stored messages."""

    def __init__(self, inner: ThreadStore) -> None:
        self.inner = inner
        self.message_reads: list[tuple[str, int | None]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def get(
        self, thread_id: str, *, tail: int | None = None, state: bool = True
    ) -> ThreadRecord | None:
        if tail is None or tail > 0:
            self.message_reads.append(("get", tail))
        return await self.inner.get(thread_id, tail=tail, state=state)

    async def read_messages(self, thread_id: str, *, before: int | None, limit: int) -> Any:
        self.message_reads.append(("read_messages", limit))
        return await self.inner.read_messages(thread_id, before=before, limit=limit)


@lazy_history
async def answers_ok(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    yield TextMessageStartEvent(message_id=f"ok-{ctx.run_id}", role="assistant")
    yield TextMessageContentEvent(message_id=f"ok-{ctx.run_id}", delta="ok")


SEEN: list[list[str]] = []


@lazy_history
async def reads_two(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    SEEN.append([m.id for m in await ctx.history(limit=2)])
    yield TextMessageStartEvent(message_id=f"ok-{ctx.run_id}", role="assistant")
    yield TextMessageContentEvent(message_id=f"ok-{ctx.run_id}", delta="ok")


async def reads_all(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    SEEN.append([m.id for m in ctx.messages])
    yield TextMessageStartEvent(message_id=f"ok-{ctx.run_id}", role="assistant")
    yield TextMessageContentEvent(message_id=f"ok-{ctx.run_id}", delta="ok")


async def unmarked_never_looks(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    yield TextMessageStartEvent(message_id=f"ok-{ctx.run_id}", role="assistant")
    yield TextMessageContentEvent(message_id=f"ok-{ctx.run_id}", delta="ok")


async def walks_back(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """Looks at the newest messages one by one, as an agent finding the last user turn does,
    then (on a later turn of its own) at all of them."""
    SEEN.append([str(len(ctx.messages)), ctx.messages[-1].id, ctx.messages[-2].id])
    yield TextMessageStartEvent(message_id=f"ok-{ctx.run_id}", role="assistant")
    SEEN.append([m.id for m in ctx.messages[-4:]])
    SEEN.append([m.id for m in ctx.messages])
    SEEN.append([m.id for m in reversed(ctx.messages)][:2])
    yield TextMessageContentEvent(message_id=f"ok-{ctx.run_id}", delta="ok")


def _host(agent: Any, threads: ThreadStore) -> RunHost:
    service = ContinuationService(
        store=InMemoryEventStore(),
        clock=ManualClock(),
        keyed_issuer=KeyedTokenIssuer({"k1": b"k" * 32}, "k1"),
    )
    return RunHost(agent=agent, service=service, threads=threads, keepalive_seconds=10)


async def _run(host: RunHost, n: int) -> list[bytes]:
    body = {
        "threadId": "t1",
        "runId": f"r{n}",
        "messages": [{"id": f"u{n}", "role": "user", "content": f"turn {n}"}],
    }
    frames = [f async for f in host.run(convert_run_input(body), None)]
    assert b"RUN_FINISHED" in frames[-1], frames
    return frames


async def test_an_agent_that_never_reads_the_history_causes_no_history_read(
    threads: ThreadStore,
) -> None:
    counted = CountedReads(threads)
    host = _host(answers_ok, cast("ThreadStore", counted))
    for n in range(4):
        await _run(host, n)

    assert counted.message_reads == []
    stored = await threads.get("t1")
    assert stored is not None
    assert [m["id"] for m in stored.messages] == [
        i for n in range(4) for i in (f"u{n}", f"ok-r{n}")
    ]
    assert stored.messages[-1]["content"] == "ok"


async def test_an_agent_reads_the_window_it_asks_for_and_one_unmarked_reads_all(
    threads: ThreadStore,
) -> None:
    SEEN.clear()
    counted = CountedReads(threads)
    for n in range(3):
        await _run(_host(answers_ok, cast("ThreadStore", counted)), n)

    await _run(_host(reads_two, cast("ThreadStore", counted)), 3)
    window = list(counted.message_reads)
    await _run(_host(reads_all, cast("ThreadStore", counted)), 4)

    # The last stored message and this run's own: one stored message read, not the thread.
    assert SEEN[0] == ["ok-r2", "u3"]
    assert window == [("get", 1)]
    assert SEEN[1] == [i for n in range(4) for i in (f"u{n}", f"ok-r{n}")] + ["u4"]
    # An unmarked agent's ``ctx.messages`` is read when it is looked at: all 8 stored, once.
    assert counted.message_reads[len(window) :] == [("read_messages", 8)]


async def test_an_unmarked_agent_that_never_looks_at_its_messages_causes_no_history_read(
    threads: ThreadStore,
) -> None:
    counted = CountedReads(threads)
    host = _host(unmarked_never_looks, cast("ThreadStore", counted))
    for n in range(4):
        await _run(host, n)

    assert counted.message_reads == []
    stored = await threads.get("t1")
    assert stored is not None
    assert [m["id"] for m in stored.messages] == [
        i for n in range(4) for i in (f"u{n}", f"ok-r{n}")
    ]


async def test_an_unmarked_agent_reads_only_the_messages_it_looks_at_each_once(
    threads: ThreadStore,
) -> None:
    SEEN.clear()
    counted = CountedReads(threads)
    for n in range(5):  # 10 stored messages
        await _run(_host(answers_ok, cast("ThreadStore", counted)), n)
    await _run(_host(walks_back, cast("ThreadStore", counted)), 5)

    history = [i for n in range(5) for i in (f"u{n}", f"ok-r{n}")]
    # Its length needs no read; the newest message is the request's own; the one before it
    # is one stored message; the last four are read as 2 more (twice what it held: a walk
    # backwards reads each once), then the rest in one read.
    looked = list(SEEN)
    assert looked == [
        ["11", "u5", "ok-r4"],
        [*history[-3:], "u5"],
        [*history, "u5"],
        ["u5", "ok-r4"],
    ]
    assert counted.message_reads == [
        ("read_messages", 1),
        ("read_messages", 2),
        ("read_messages", 7),
    ]
