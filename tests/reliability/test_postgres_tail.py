"""The cross-replica live tail (LISTEN/NOTIFY): two pools stand in for two app replicas."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from pausemesh.stores.postgres import PostgresDatabase, PostgresThreadStore
from pausemesh.stores.postgres.migrate import migrate
from tests.support.head_reads import HeadReads
from tests.support.postgres import DATABASE_URL, drop_schema, fresh_schema, require_postgres

pytestmark = pytest.mark.postgres

NOW = datetime.now(UTC)
# A liveness bound: only a stuck tail ever gets near it.
STUCK = 30.0


@pytest.fixture(name="replicas")
async def replicas_fixture() -> AsyncIterator[tuple[PostgresThreadStore, PostgresThreadStore]]:
    await require_postgres()
    schema = fresh_schema()
    await migrate(DATABASE_URL, schema=schema)
    databases = [
        await PostgresDatabase.connect(DATABASE_URL, schema=schema, min_size=1, max_size=4)
        for _ in range(2)
    ]
    stores = [PostgresThreadStore(database) for database in databases]
    try:
        yield stores[0], stores[1]
    finally:
        for database in databases:
            await database.close()
        await drop_schema(schema)


async def _lease(store: PostgresThreadStore, thread_id: str = "t1") -> None:
    await store.create_or_load(thread_id, owner=None, now=NOW)
    await store.acquire_lease(
        thread_id, lease_id="L1", run_id="r1", now=NOW, expires_at=NOW + timedelta(hours=1)
    )


async def _append(store: PostgresThreadStore, *texts: str) -> list[int]:
    return await store.append_events("t1", lease_id="L1", run_id="r1", events=list(texts))


async def _tail(store: PostgresThreadStore, count: int, seen: list[int]) -> None:
    """What an SSE tail does: wait, then read strictly after the last sequence it sent."""
    last = 0
    while len(seen) < count:
        if await store.wait_for_events("t1", after_sequence=last, wait_seconds=STUCK):
            for entry in await store.read_events("t1", after_sequence=last):
                seen.append(entry.sequence)
                last = entry.sequence


async def _until(condition: Callable[[], bool], what: str) -> None:
    try:
        async with asyncio.timeout(STUCK):
            while not condition():  # noqa: ASYNC110 - polls state owned by other tasks
                await asyncio.sleep(0.01)
    except TimeoutError:
        pytest.fail(f"stuck waiting until {what}")


async def test_a_tail_on_one_replica_sees_events_appended_on_another(
    replicas: tuple[PostgresThreadStore, PostgresThreadStore],
) -> None:
    a, b = replicas
    await _lease(b)
    waiter = asyncio.create_task(a.wait_for_events("t1", after_sequence=0, wait_seconds=STUCK))
    await _until(lambda: a.listener.listening, "A listens")
    await _append(b, '{"type":"RUN_STARTED"}')
    async with asyncio.timeout(STUCK / 2):
        assert await waiter
    entries = await a.read_events("t1", after_sequence=0)
    assert [(e.sequence, e.event_json) for e in entries] == [(1, '{"type":"RUN_STARTED"}')]


async def test_tails_woken_by_a_notification_take_the_head_from_it(
    replicas: tuple[PostgresThreadStore, PostgresThreadStore],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The notification carries the append's last sequence: the woken tails of replica A do
    not read the head again (one round trip each, or one shared, saved per wake-up)."""
    a, b = replicas
    await _lease(b)
    reads = HeadReads(a, monkeypatch)
    tails = [
        asyncio.create_task(a.wait_for_events("t1", after_sequence=0, wait_seconds=STUCK))
        for _ in range(20)
    ]
    await _until(lambda: a.listener.listening and reads.count == 1, "A listens and its tails wait")
    await asyncio.sleep(0.01)
    await _append(b, "{}", "{}")
    async with asyncio.timeout(STUCK):
        assert await asyncio.gather(*tails) == [True] * 20
    assert reads.count == 1  # the check before waiting, shared by the twenty tails


async def test_a_dropped_listener_reconnects_and_the_tail_misses_and_repeats_nothing(
    replicas: tuple[PostgresThreadStore, PostgresThreadStore],
) -> None:
    a, b = replicas
    await _lease(b)
    seen: list[int] = []
    tail = asyncio.create_task(_tail(a, 6, seen))
    await _until(lambda: a.listener.listening, "A listens")
    await _append(b, "{}", "{}")
    await _until(lambda: len(seen) == 2, "the tail saw the first two")

    # Kill A's LISTEN connection from the server side, as a restart or failover would.
    pid = a.listener._conn.get_server_pid()
    admin = await asyncpg.connect(DATABASE_URL)
    try:
        assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
    finally:
        await admin.close()
    # Appended while A may not be listening: found by the catch-up read after reconnect.
    await _append(b, "{}", "{}")
    await _until(lambda: a.listener.reconnects >= 1 and a.listener.listening, "A reconnected")
    await _append(b, "{}", "{}")
    async with asyncio.timeout(STUCK):
        await tail
    assert seen == [1, 2, 3, 4, 5, 6]


async def test_many_waiters_on_many_threads_wake_only_for_their_thread(
    replicas: tuple[PostgresThreadStore, PostgresThreadStore],
) -> None:
    a, b = replicas
    for thread_id in ("t1", "t2"):
        await _lease(b, thread_id)
    await a.listener.start()
    t1 = [
        asyncio.create_task(a.wait_for_events("t1", after_sequence=0, wait_seconds=STUCK))
        for _ in range(10)
    ]
    t2 = [
        asyncio.create_task(a.wait_for_events("t2", after_sequence=0, wait_seconds=0.5))
        for _ in range(10)
    ]
    await _append(b, "{}")
    async with asyncio.timeout(STUCK):
        assert await asyncio.gather(*t1) == [True] * 10
        assert await asyncio.gather(*t2) == [False] * 10
