"""``pausemesh demo --workers 2``: two worker processes on one port and one store.

Real server processes (uvicorn's supervisor and two spawned workers), on a SQLite file and on
PostgreSQL. A client limited to one connection stays with one worker (``tests.support.pinning``);
``/readyz`` names the worker (its pid) when there are several.
"""

from __future__ import annotations

import asyncio
import collections
import queue
import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from pausemesh.stores.postgres.migrate import migrate
from tests.e2e.agui_helpers import ask, new_thread, resolved, resume_body
from tests.support.agui import Frame, post_run, read_frames
from tests.support.pinning import pinned_clients, wait_for_every_worker, worker_of
from tests.support.postgres import DATABASE_URL, drop_schema, fresh_schema, require_postgres
from tests.support.rest import PAYLOAD, create
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

# Liveness bound for waits: only a stuck system gets near it (never a timing assertion).
STUCK = 60.0
RESUMES = 200
EXPIRING = 10
# No keep-alive wake-up within a test: a tail sees another worker's events only if it is woken.
QUIET_TAILS = {"PAUSEMESH_KEEPALIVE_SECONDS": "3600"}


def _tail(
    client: httpx.Client, thread_id: str, run_id: str, out: queue.Queue[Frame | None]
) -> None:
    """Tail the thread until ``run_id`` finished (then the stream is closed)."""
    with client.stream("GET", f"/agui/threads/{thread_id}/events?after=0") as response:
        assert response.status_code == 200
        out.put(None)  # the tail is open
        for frame in read_frames(response.iter_lines()):
            out.put(frame)
            if frame.event["type"] == "RUN_FINISHED" and frame.event["runId"] == run_id:
                return


def assert_tail_on_one_worker_sees_the_run_of_the_other(
    server: ServerProcess, *, stuck: float = STUCK
) -> None:
    """``stuck``: how long the tail may wait for a frame (``bench/cross_worker_tails.py``
    counts misses with a shorter bound)."""
    a, b = pinned_clients(server)
    try:
        thread_id = new_thread()
        [interrupt] = ask(b, thread_id).interrupts  # worker B runs the question
        out: queue.Queue[Frame | None] = queue.Queue()
        run_id = f"run-answer-{secrets.token_hex(4)}"
        tail = threading.Thread(target=_tail, args=(a, thread_id, run_id, out), daemon=True)
        tail.start()
        assert out.get(timeout=stuck) is None
        answered = post_run(b, resume_body(thread_id, [resolved(interrupt["id"])], run_id=run_id))
        assert answered.last["type"] == "RUN_FINISHED", answered.events
        # Worker A's tail: the log B wrote before it opened, then B's answer run, as B sent it.
        frames: list[Frame] = []
        while (
            not frames
            or frames[-1].event.get("runId") != run_id
            or (frames[-1].event["type"] != "RUN_FINISHED")
        ):
            frame = out.get(timeout=stuck)
            assert frame is not None
            frames.append(frame)
        started = next(
            i
            for i, f in enumerate(frames)
            if f.event["type"] == "RUN_STARTED" and f.event["runId"] == run_id
        )
        assert [f.event["type"] for f in frames[started:]] == answered.types
        tail.join(stuck)
        sequences = [f.sequence for f in frames]
        assert sequences == list(range(1, len(frames) + 1))
    finally:
        a.close()
        b.close()


async def assert_one_of_many_concurrent_resumes_wins(server: ServerProcess) -> None:
    # Many connections at once: uvicorn hands them to both workers.
    limits = httpx.Limits(max_connections=RESUMES, max_keepalive_connections=RESUMES)
    async with httpx.AsyncClient(base_url=server.base_url, timeout=STUCK, limits=limits) as client:
        continuation_id, token = await create(client)

        async def one(index: int) -> httpx.Response:
            return await client.post(
                f"/v1/continuations/{continuation_id}/resume",
                json={"payload": {"flight": f"PM{index}"}},
                headers={"authorization": f"PauseMesh {token}", "idempotency-key": f"k{index}"},
            )

        responses = await asyncio.gather(*(one(i) for i in range(RESUMES)))
        got = await client.get(f"/v1/continuations/{continuation_id}")
    statuses = collections.Counter(r.status_code for r in responses)
    assert statuses == {200: 1, 409: RESUMES - 1}, statuses
    assert {r.json()["code"] for r in responses if r.status_code == 409} == {"TOKEN_ALREADY_USED"}
    [winner] = [r.json() for r in responses if r.status_code == 200]
    assert got.json()["continuation"]["version"] == 2
    assert got.json()["continuation"]["resumePayload"] == winner["continuation"]["resumePayload"]


def assert_connections_opened_together_reach_both_workers(server: ServerProcess) -> None:
    """16 keep-alive connections opened at once, as a proxy's pool or the bench opens them."""
    # Both workers listen first: the server is ready once one answers, and a worker still
    # starting has no socket for the kernel to spread connections to (run first, this was
    # flaky).
    wait_for_every_worker(server, 2, deadline=time.monotonic() + STUCK)
    connections = 16
    ready = threading.Barrier(connections)
    workers: queue.Queue[int] = queue.Queue()

    def connect() -> None:
        with httpx.Client(base_url=server.base_url, timeout=STUCK) as client:
            ready.wait(STUCK)
            workers.put(worker_of(client))

    threads = [threading.Thread(target=connect) for _ in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(STUCK)
    counts = collections.Counter(workers.get_nowait() for _ in range(connections))
    # The kernel spreads them at random: all 16 on one of two workers has odds of 1 in 32,768.
    assert len(counts) == 2, counts


def _wait(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + STUCK
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"stuck waiting until {what}")
        time.sleep(0.05)


_CLOSED = re.compile(r"INFO pausemesh\.agui\[(\d+)\]: closed lapsed interrupts")


def assert_sweeps_expire_each_once(
    server: ServerProcess,
    expired_events: Callable[[list[str]], dict[str, int]],
    expiry_notes: Callable[[list[str]], dict[str, int]],
) -> None:
    """Due continuations get one ``expired`` each, lapsed thread questions one note each, and
    the sweeps run in one worker (its pid on every "closed lapsed" log line)."""
    with httpx.Client(base_url=server.base_url, timeout=STUCK) as client:
        ids = []
        for _ in range(EXPIRING):
            # Each deadline a few seconds after its own request: one shared deadline a second
            # ahead passed before the last create on a loaded machine (400 INVALID_EXPIRY).
            deadline = (datetime.now(UTC) + timedelta(seconds=3)).isoformat()
            body = {"payload": PAYLOAD, "expiresAt": deadline}
            response = client.post("/v1/continuations", json=body)
            assert response.status_code == 201, response.text
            ids.append(response.json()["continuation"]["continuationId"])
        threads = [new_thread() for _ in range(3)]
        for thread_id in threads:
            ask(client, thread_id, forwardedProps={"questionTtlSeconds": 1})
    # Nobody reads them: only the sweeper can expire them.
    _wait(lambda: sum(expired_events(ids).values()) == EXPIRING, "every continuation expired")
    _wait(lambda: all(expiry_notes(threads).values()), "every thread noted its expiry")
    # Many more sweeps, by both workers' sweepers if they both ran.
    time.sleep(1.0)
    assert expired_events(ids) == dict.fromkeys(ids, 1)
    assert expiry_notes(threads) == dict.fromkeys(threads, 1)
    sweepers = set(_CLOSED.findall(server.output()))
    assert len(sweepers) == 1, server.output()


# -- SQLite --------------------------------------------------------------------------------


# Both ways a commit reaches the disk (PAUSEMESH_SQLITE_SYNC): inside COMMIT (the default), and
# after the write turn is given back, which changes how the two workers' commits interleave.
@pytest.fixture(name="sqlite_demo", scope="module", params=["commit", "ack"])
def sqlite_demo_fixture(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    database = tmp_path_factory.mktemp("workers") / "demo.db"
    args = ["demo", "--no-browser", "--workers", "2", "--database-path", str(database)]
    env = {
        "PAUSEMESH_SWEEP_INTERVAL_SECONDS": "0.1",
        "PAUSEMESH_LOG_LEVEL": "info",
        "PAUSEMESH_SQLITE_SYNC": request.param,
        **QUIET_TAILS,
    }
    with ServerProcess(args, env=env, ready_path="/readyz") as server:
        yield server


def _sqlite(server: ServerProcess) -> sqlite3.Connection:
    path = Path(server.args[server.args.index("--database-path") + 1])
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def test_two_sqlite_workers_let_exactly_one_of_200_concurrent_resumes_win(
    sqlite_demo: ServerProcess,
) -> None:
    asyncio.run(assert_one_of_many_concurrent_resumes_wins(sqlite_demo))


def test_a_tail_on_one_sqlite_worker_sees_a_run_served_by_the_other(
    sqlite_demo: ServerProcess,
) -> None:
    assert_tail_on_one_worker_sees_the_run_of_the_other(sqlite_demo)


def test_connections_opened_together_are_spread_over_both_sqlite_workers(
    sqlite_demo: ServerProcess,
) -> None:
    assert_connections_opened_together_reach_both_workers(sqlite_demo)


def test_two_sqlite_workers_sweep_each_due_continuation_and_question_once(
    sqlite_demo: ServerProcess,
) -> None:
    def expired(ids: list[str]) -> dict[str, int]:
        with _sqlite(sqlite_demo) as conn:
            return {
                i: conn.execute(
                    "SELECT count(*) FROM continuation_events WHERE continuation_id = ?"
                    " AND json_extract(event_json, '$.type') = 'continuation.expired'",
                    (i,),
                ).fetchone()[0]
                for i in ids
            }

    def notes(threads: list[str]) -> dict[str, int]:
        with _sqlite(sqlite_demo) as conn:
            return {
                t: conn.execute(
                    "SELECT count(*) FROM agui_thread_events WHERE thread_id = ?"
                    " AND json_extract(event_json, '$.name') = 'pausemesh.interrupts_expired'",
                    (t,),
                ).fetchone()[0]
                for t in threads
            }

    assert_sweeps_expire_each_once(sqlite_demo, expired, notes)


# -- PostgreSQL ----------------------------------------------------------------------------


@pytest.fixture(name="postgres_demo", scope="module")
def postgres_demo_fixture() -> Iterator[tuple[ServerProcess, str]]:
    asyncio.run(require_postgres())
    schema = fresh_schema("pm_workers")
    asyncio.run(migrate(DATABASE_URL, schema=schema))
    env = {
        "PAUSEMESH_DATABASE_SCHEMA": schema,
        "PAUSEMESH_SECRET_KEY": secrets.token_urlsafe(48),
        "PAUSEMESH_SWEEP_INTERVAL_SECONDS": "0.1",
        "PAUSEMESH_LOG_LEVEL": "info",
        **QUIET_TAILS,
    }
    args = ["demo", "--no-browser", "--workers", "2", "--database-url", DATABASE_URL]
    try:
        with ServerProcess(args, env=env, ready_path="/readyz") as server:
            yield server, schema
    finally:
        asyncio.run(drop_schema(schema))


pg = pytest.mark.postgres


@pg
def test_two_postgres_workers_let_exactly_one_of_200_concurrent_resumes_win(
    postgres_demo: tuple[ServerProcess, str],
) -> None:
    asyncio.run(assert_one_of_many_concurrent_resumes_wins(postgres_demo[0]))


@pg
def test_a_tail_on_one_postgres_worker_sees_a_run_served_by_the_other(
    postgres_demo: tuple[ServerProcess, str],
) -> None:
    assert_tail_on_one_worker_sees_the_run_of_the_other(postgres_demo[0])


@pg
def test_two_postgres_workers_sweep_each_due_continuation_and_question_once(
    postgres_demo: tuple[ServerProcess, str],
) -> None:
    import asyncpg  # noqa: PLC0415 - only the PostgreSQL half needs it

    server, schema = postgres_demo

    async def count(sql: str, keys: list[str]) -> dict[str, int]:
        conn = await asyncpg.connect(DATABASE_URL)
        try:
            return {k: await conn.fetchval(sql.format(schema=schema), k) for k in keys}
        finally:
            await conn.close()

    def expired(ids: list[str]) -> dict[str, int]:
        sql = (
            'SELECT count(*) FROM "{schema}".continuation_events WHERE continuation_id = $1'
            " AND event_json::jsonb->>'type' = 'continuation.expired'"
        )
        return asyncio.run(count(sql, ids))

    def notes(threads: list[str]) -> dict[str, int]:
        sql = (
            'SELECT count(*) FROM "{schema}".agui_thread_events WHERE thread_id = $1'
            " AND event_json::jsonb->>'name' = 'pausemesh.interrupts_expired'"
        )
        return asyncio.run(count(sql, threads))

    assert_sweeps_expire_each_once(server, expired, notes)
