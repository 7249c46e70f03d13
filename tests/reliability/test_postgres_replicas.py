"""Three ``pausemesh demo`` processes on one PostgreSQL database (docs/operations-postgres.md).

Races across replicas, a pause asked/tailed/answered on three different replicas, a replica
SIGKILLed mid-race, and a PostgreSQL restart under the running apps (on a server of the test's
own, so the suite's shared server stays up for every other test).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import secrets
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest

from pausemesh.stores.postgres.migrate import migrate
from tests.support.postgres import DATABASE_URL, drop_schema, fresh_schema, require_postgres
from tests.support.private_postgres import PrivatePostgres
from tests.support.server import ServerProcess

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

REPLICAS = 3
# Liveness bound for waits: only a stuck system gets near it (never a timing assertion).
STUCK = 60.0
PAYLOAD = {"kind": "input", "message": "Which flight should I book?"}


class Cluster:
    def __init__(self, schema: str, database_url: str = DATABASE_URL) -> None:
        env = {
            "PAUSEMESH_DATABASE_SCHEMA": schema,
            # One shared key: every replica re-derives the keyed tokens of the others.
            "PAUSEMESH_SECRET_KEY": secrets.token_urlsafe(48),
            "PAUSEMESH_LOG_LEVEL": "warning",
        }
        args = ["demo", "--no-browser", "--database-url", database_url]
        self.servers = [ServerProcess(args, env=env) for _ in range(REPLICAS)]
        self.clients: list[httpx.AsyncClient] = []

    async def start(self) -> None:
        await asyncio.gather(*(asyncio.to_thread(s.start) for s in self.servers))
        limits = httpx.Limits(max_connections=200, max_keepalive_connections=50)
        self.clients = [
            httpx.AsyncClient(base_url=s.base_url, timeout=STUCK, limits=limits)
            for s in self.servers
        ]

    async def close(self) -> None:
        for client in self.clients:
            await client.aclose()
        await asyncio.gather(*(asyncio.to_thread(s.close) for s in self.servers))


@pytest.fixture(name="cluster", scope="module")
async def cluster_fixture() -> AsyncIterator[Cluster]:
    await require_postgres()
    schema = fresh_schema("pm_replicas")
    await migrate(DATABASE_URL, schema=schema)
    cluster = Cluster(schema)
    try:
        await cluster.start()
        yield cluster
    finally:
        await cluster.close()
        await drop_schema(schema)


async def _create(client: httpx.AsyncClient) -> tuple[str, str]:
    response = await client.post("/v1/continuations", json={"payload": PAYLOAD})
    assert response.status_code == 201, response.text
    body = response.json()
    return body["continuation"]["continuationId"], body["resumeToken"]


async def _resume(
    client: httpx.AsyncClient, continuation_id: str, token: str, key: str
) -> httpx.Response:
    return await client.post(
        f"/v1/continuations/{continuation_id}/resume",
        json={"payload": {"flight": "PM101", "key": key}},
        headers={"authorization": f"PauseMesh {token}", "idempotency-key": key},
    )


async def _stored(client: httpx.AsyncClient, continuation_id: str) -> tuple[dict[str, Any], int]:
    state = (await client.get(f"/v1/continuations/{continuation_id}")).json()["continuation"]
    events = (await client.get(f"/v1/continuations/{continuation_id}/events")).json()
    listed = events["events"] if isinstance(events, dict) else events
    return state, len(listed)


def _code(response: httpx.Response) -> str | None:
    if response.status_code == 200:
        return None
    code: str = response.json()["code"]
    return code


# -- SSE -------------------------------------------------------------------------------------


async def _frames(response: httpx.Response) -> AsyncIterator[tuple[int | None, dict[str, Any]]]:
    sequence: int | None = None
    data: list[str] = []
    async for line in response.aiter_lines():
        if line == "":
            if data:
                yield sequence, json.loads("\n".join(data))
            sequence, data = None, []
        elif line.startswith("id: "):
            sequence = int(line[4:])
        elif line.startswith("data: "):
            data.append(line[6:])


async def _run(client: httpx.AsyncClient, body: dict[str, Any]) -> list[tuple[int | None, Any]]:
    async with client.stream("POST", "/agui", json=body) as response:
        assert response.status_code == 200, await response.aread()
        return [frame async for frame in _frames(response)]


async def _ask(client: httpx.AsyncClient, thread_id: str) -> tuple[str, int]:
    """A user message: the demo asks which flight to book. Returns (interrupt id, last seq)."""
    message = {"id": f"user-{uuid.uuid4()}", "role": "user", "content": "Lisbon, please"}
    body = {"threadId": thread_id, "runId": f"run-{uuid.uuid4()}", "messages": [message]}
    frames = await _run(client, body)
    last = frames[-1][1]
    assert last["type"] == "RUN_FINISHED", frames
    assert last["outcome"]["type"] == "interrupt", last
    sequences = [seq for seq, _ in frames if seq is not None]
    return last["outcome"]["interrupts"][0]["id"], max(sequences)


async def _answer(client: httpx.AsyncClient, thread_id: str, interrupt_id: str) -> Any:
    entry = {"interruptId": interrupt_id, "status": "resolved", "payload": {"flight": "PM202"}}
    body = {
        "threadId": thread_id,
        "runId": f"run-{uuid.uuid4()}",
        "messages": [],
        "resume": [entry],
    }
    frames = await _run(client, body)
    return frames[-1][1]


async def _tail(
    client: httpx.AsyncClient,
    thread_id: str,
    after: int,
    seen: list[tuple[int, dict[str, Any]]],
    done: Callable[[list[tuple[int, dict[str, Any]]]], bool],
) -> int:
    """Tail like EventSource: on any break, reconnect with Last-Event-ID. Returns reconnects."""
    reconnects = -1
    while not done(seen):
        reconnects += 1
        last = seen[-1][0] if seen else after
        try:
            async with client.stream(
                "GET",
                f"/agui/threads/{thread_id}/events",
                headers={"Last-Event-ID": str(last)},
            ) as response:
                if response.status_code != 200:
                    await asyncio.sleep(0.2)
                    continue
                async for sequence, event in _frames(response):
                    assert sequence is not None
                    seen.append((sequence, event))
                    if done(seen):
                        break
        except (httpx.TransportError, httpx.StreamError):
            await asyncio.sleep(0.2)
    return reconnects


def _run_finished_after_answer(seen: list[tuple[int, dict[str, Any]]]) -> bool:
    return any(
        e["type"] == "RUN_FINISHED" and e.get("outcome", {}).get("type") != "interrupt"
        for _, e in seen
    )


async def _bookings(client: httpx.AsyncClient, thread_id: str) -> list[Any]:
    response = await client.get(f"/agui/threads/{thread_id}")
    assert response.status_code == 200, response.text
    state = response.json()["state"]
    return list(state.get("bookings", [])) if isinstance(state, dict) else []


# -- tests -----------------------------------------------------------------------------------


async def test_two_hundred_concurrent_resumes_over_three_replicas_have_exactly_one_winner(
    cluster: Cluster,
) -> None:
    continuation_id, token = await _create(cluster.clients[0])
    responses = await asyncio.gather(
        *(
            _resume(cluster.clients[i % REPLICAS], continuation_id, token, f"key-{i}")
            for i in range(200)
        )
    )
    codes = [_code(r) for r in responses]
    assert codes.count(None) == 1
    assert codes.count("TOKEN_ALREADY_USED") == 199
    winner = codes.index(None)
    state, events = await _stored(cluster.clients[2], continuation_id)
    assert (state["status"], state["idempotencyKey"], events) == ("resumed", f"key-{winner}", 2)


async def test_asked_on_one_replica_tailed_on_another_answered_on_a_third(
    cluster: Cluster,
) -> None:
    first, second, third = cluster.clients
    thread_id = f"thread-{uuid.uuid4()}"
    interrupt_id, last = await _ask(first, thread_id)
    seen: list[tuple[int, dict[str, Any]]] = []
    tail = asyncio.create_task(_tail(second, thread_id, last, seen, _run_finished_after_answer))
    finished = await _answer(third, thread_id, interrupt_id)
    assert finished["type"] == "RUN_FINISHED", finished
    async with asyncio.timeout(STUCK):
        await tail
    sequences = [seq for seq, _ in seen]
    assert sequences == list(range(last + 1, last + 1 + len(sequences)))
    assert seen[0][1]["type"] == "RUN_STARTED"
    assert len(await _bookings(second, thread_id)) == 1


async def test_a_replica_killed_mid_race_loses_and_doubles_no_resume(cluster: Cluster) -> None:
    victim = cluster.servers[1]
    created = [await _create(cluster.clients[0]) for _ in range(20)]
    survivors = [cluster.clients[0], cluster.clients[2]]
    answered = 0
    some_answered = asyncio.Event()

    async def contender(index: int, continuation_id: str, token: str) -> tuple[str, str | None]:
        nonlocal answered
        key = f"{continuation_id}-{index}"
        client = cluster.clients[index % REPLICAS]
        for attempt in itertools.count():
            try:
                response = await _resume(client, continuation_id, token, key)
            except httpx.TransportError:
                # The replica died under us: an honest client retries the same key elsewhere.
                client = survivors[attempt % 2]
                continue
            if response.status_code == 503:
                client = survivors[attempt % 2]
                continue
            answered += 1
            if answered >= 20:
                some_answered.set()
            return key, _code(response)
        raise AssertionError("unreachable")

    async def killer() -> None:
        await some_answered.wait()
        await asyncio.to_thread(victim.kill)

    try:
        killing = asyncio.create_task(killer())
        outcomes = await asyncio.gather(
            *(
                contender(i, continuation_id, token)
                for continuation_id, token in created
                for i in range(10)
            )
        )
        await killing
        assert victim.process is not None
        assert victim.process.returncode == -9
        for continuation_id, _ in created:
            mine = [(k, c) for k, c in outcomes if k.startswith(continuation_id)]
            winners = [k for k, c in mine if c is None]
            assert len(winners) == 1, mine
            assert all(c in {None, "TOKEN_ALREADY_USED"} for _, c in mine), mine
            state, events = await _stored(cluster.clients[2], continuation_id)
            assert (state["idempotencyKey"], events) == (winners[0], 2)
        # The survivors kept serving throughout; the restarted replica rejoins.
    finally:
        await asyncio.to_thread(victim.start)
    assert (await cluster.clients[1].get("/readyz")).status_code == 200


@pytest.fixture(name="private")
def private_fixture() -> Iterator[PrivatePostgres]:
    with PrivatePostgres() as server:
        yield server


@pytest.fixture(name="restartable")
async def restartable_fixture(private: PrivatePostgres) -> AsyncIterator[Cluster]:
    """Three replicas on a PostgreSQL server of this test's own, which it may stop."""
    schema = fresh_schema("pm_restart")
    await migrate(private.url, schema=schema)
    cluster = Cluster(schema, private.url)
    try:
        await cluster.start()
        yield cluster
    finally:
        await cluster.close()


async def _ready_codes(cluster: Cluster) -> list[int]:
    codes = []
    for client in cluster.clients:
        try:
            codes.append((await client.get("/readyz", timeout=10)).status_code)
        except httpx.TransportError:
            codes.append(0)
    return codes


async def _until_ready_codes(cluster: Cluster, wanted: int) -> None:
    async with asyncio.timeout(STUCK):
        while await _ready_codes(cluster) != [wanted] * REPLICAS:  # noqa: ASYNC110 - polls other processes
            await asyncio.sleep(0.1)


async def test_a_postgres_restart_under_running_replicas_recovers_without_app_restarts(
    private: PrivatePostgres, restartable: Cluster
) -> None:
    cluster = restartable
    first, second, third = cluster.clients
    thread_id = f"thread-{uuid.uuid4()}"
    interrupt_id, last = await _ask(first, thread_id)
    seen: list[tuple[int, dict[str, Any]]] = []
    tail = asyncio.create_task(_tail(second, thread_id, last, seen, _run_finished_after_answer))
    pids = [s.pid for s in cluster.servers]
    try:
        await asyncio.to_thread(private.stop)
        await _until_ready_codes(cluster, 503)
        unavailable = await first.post("/v1/continuations", json={"payload": PAYLOAD})
        assert unavailable.status_code == 503, unavailable.text
        assert unavailable.json()["code"] == "STORE_UNAVAILABLE"
        # A tail (re)connecting during the outage is told to come back, not given a 500.
        async with second.stream(
            "GET", f"/agui/threads/{thread_id}/events", headers={"Last-Event-ID": str(last)}
        ) as refused:
            assert refused.status_code == 503
            assert json.loads(await refused.aread())["code"] == "STORE_UNAVAILABLE"
    finally:
        await asyncio.to_thread(private.start)
    await _until_ready_codes(cluster, 200)
    # The same processes serve again: no app restart.
    assert [s.pid for s in cluster.servers] == pids
    continuation_id, token = await _create(third)
    assert (await _resume(first, continuation_id, token, "after-restart")).status_code == 200
    finished = await _answer(third, thread_id, interrupt_id)
    assert finished["type"] == "RUN_FINISHED", finished
    async with asyncio.timeout(STUCK):
        await tail
    sequences = [seq for seq, _ in seen]
    # Resumed from the last sequence it had: nothing lost, nothing repeated.
    assert sequences == list(range(last + 1, last + 1 + len(sequences)))
    assert len(await _bookings(second, thread_id)) == 1
