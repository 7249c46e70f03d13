"""A REST resume on a server with an agent continues a thread only when its decision owes one.

In-process (the app over ``httpx.ASGITransport``, so every background task is on this loop)
on real SQLite stores whose thread reads and owed-run settlements are counted: a plain
continuation's resume reads no thread and settles nothing; a question the agent asked, decided
over REST, continues its thread (the control: the counters see the poke when there is one).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager

from pausemesh.agui.agent import AgentOutput, PauseRequest, RunContext
from pausemesh.agui.events import StateSnapshotEvent
from pausemesh.core.threads import ThreadRecord
from pausemesh.settings import Settings
from pausemesh.stores.sqlite.database import SqliteDatabase
from pausemesh.stores.sqlite.events import SqliteEventStore
from pausemesh.stores.sqlite.threads import SqliteThreadStore
from pausemesh.stores.storage import Storage
from pausemesh.web import PauseMeshPlugin
from pausemesh.web.app import create_app
from tests.support.agui import RunResult, read_frames, run_body
from tests.support.asgi import asgi
from tests.support.rest import PAYLOAD

OWED_RUN = "pausemesh-owed-run"  # the name of the task ``OwedRuns.poke`` starts


class CountedThreads(SqliteThreadStore):
    """The real SQLite thread store, counting the records it reads."""

    reads: list[str]

    async def get(
        self, thread_id: str, *, tail: int | None = None, state: bool = True
    ) -> ThreadRecord | None:
        self.reads.append(thread_id)
        return await super().get(thread_id, tail=tail, state=state)


class CountedEvents(SqliteEventStore):
    """The real SQLite event store, counting the owed runs it settles."""

    settled: list[str]

    async def settle_owed(self, continuation_ids: Sequence[str]) -> None:
        self.settled.extend(continuation_ids)
        await super().settle_owed(continuation_ids)


async def asking_agent(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """Asks one question; continued with its decision, puts the answer in the state."""
    if ctx.decisions:
        [decision] = ctx.decisions.values()
        yield StateSnapshotEvent(snapshot={"answer": decision.payload})
        return
    yield PauseRequest(message="Which flight?")


@dataclass
class Server:
    client: httpx.AsyncClient
    plugin: PauseMeshPlugin
    threads: CountedThreads
    events: CountedEvents

    async def owed_runs_done(self) -> None:
        """Wait for every owed run this process started (none is a valid answer)."""
        tasks = [t for t in asyncio.all_tasks() if t.get_name() == OWED_RUN]
        await asyncio.gather(*tasks)


@pytest.fixture(name="server")
async def server_fixture(tmp_path: Path) -> AsyncIterator[Server]:
    database = await SqliteDatabase(str(tmp_path / "pausemesh.db")).open()
    events = CountedEvents(database, owns_database=False)
    threads = CountedThreads(database, owns_database=False)
    events.settled, threads.reads = [], []
    storage = Storage(events=events, threads=threads, on_close=[database.close])
    # No sweeper pass within a test: what is counted is the request's own work.
    settings = Settings(data_dir=str(tmp_path), sweep_interval_seconds=3600)
    app = create_app(settings, agent=asking_agent, storage=storage)
    try:
        async with (
            LifespanManager(asgi(app), startup_timeout=60, shutdown_timeout=60),
            httpx.AsyncClient(
                transport=httpx.ASGITransport(asgi(app)), base_url="http://localhost", timeout=30
            ) as client,
        ):
            yield Server(client, app.plugins.get(PauseMeshPlugin), threads, events)
    finally:
        await storage.close()  # a host's own storage is the host's to close


async def _resume(server: Server, continuation_id: str, token: str) -> dict[str, Any]:
    response = await server.client.post(
        f"/v1/continuations/{continuation_id}/resume",
        json={"payload": {"flight": "PM101"}},
        headers={"authorization": f"PauseMesh {token}", "idempotency-key": "k1"},
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()["continuation"]
    return body


async def test_a_plain_continuations_resume_reads_no_thread_and_settles_nothing(
    server: Server,
) -> None:
    created = await server.client.post("/v1/continuations", json={"payload": PAYLOAD})
    assert created.status_code == 201, created.text
    continuation_id = created.json()["continuation"]["continuationId"]
    token = created.json()["resumeToken"]

    assert (await _resume(server, continuation_id, token))["status"] == "resumed"
    await server.owed_runs_done()
    # An exact retry owes nothing either.
    assert (await _resume(server, continuation_id, token))["status"] == "resumed"
    await server.owed_runs_done()

    assert server.threads.reads == []
    assert server.events.settled == []
    assert await server.events.owed_runs(limit=10) == []


async def test_a_question_decided_over_rest_continues_its_thread(server: Server) -> None:
    asked = await server.client.post(
        "/agui",
        json=run_body("t-1", "r-1", messages=[{"id": "u1", "role": "user", "content": "fly"}]),
    )
    assert asked.status_code == 200, asked.text
    [interrupt] = RunResult(list(read_frames(iter(asked.text.split("\n"))))).interrupts
    continuation_id = str(interrupt["id"])
    # The token an e-mail link would hold: derived from the server key, as the server does.
    service = server.plugin.runtime.service
    created = await service.created_event(continuation_id, principal=None)
    assert service.keyed_issuer is not None
    assert created.token_key_id is not None
    assert created.token_nonce is not None
    token = service.keyed_issuer.derive(continuation_id, created.token_key_id, created.token_nonce)

    assert (await _resume(server, continuation_id, token))["status"] == "resumed"
    await server.owed_runs_done()

    assert "t-1" in server.threads.reads
    assert server.events.settled == [continuation_id]
    assert await server.events.owed_runs(limit=10) == []
    record = await server.threads.get("t-1")
    assert record is not None
    assert record.state == {"answer": {"flight": "PM101"}}
