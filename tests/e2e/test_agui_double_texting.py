"""Double texting against real ``pausemesh serve`` processes: two replicas on one SQLite file,
and two on one PostgreSQL schema (issue 44).

An input that arrives while a run holds its thread is refused (``reject``, the default:
``THREAD_BUSY``), queued durably and run after it in order (``enqueue``), or stops the run,
keeping (``interrupt``) or removing (``rollback``) what it wrote, and runs next. The replica
that takes an input need not be the one that runs it; the input's response streams its run
either way. Killing every process while inputs wait loses none of them.

The test agent (``tests/support/texting_agent.py``) holds a run until the test opens its gate.
"""

from __future__ import annotations

import asyncio
import secrets
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from pausemesh.stores.postgres.migrate import migrate
from tests.support.agui import (
    Frame,
    RunResult,
    StreamChecker,
    needs_node,
    post_run,
    read_frames,
    run_body,
    run_node_harness,
)
from tests.support.postgres import DATABASE_URL, drop_schema, fresh_schema, require_postgres
from tests.support.server import ServerProcess

AGENT = "tests.support.texting_agent:agent"
# Liveness bounds only: a healthy run takes well under a second.
WAIT = 60.0
QUEUE_LIMIT = 3
# How much of each server's output a failed wait shows (its end: what it did last).
_LOG_TAIL = 6000


@dataclass
class Replicas:
    """Two servers on one database; ``gates``: where the test agent's held runs wait."""

    a: ServerProcess
    b: ServerProcess
    gates: Path
    database: Path | None = None
    schema: str | None = None

    def stream(self, server: ServerProcess, payload: dict[str, Any]) -> Streamed:
        """``POST /agui`` on ``server``, read in the background; a failed wait shows what both
        servers logged."""
        return Streamed(server, payload, logs=self.logs)

    def logs(self) -> str:
        """The end of each server's output (what a failed wait reports)."""
        return "".join(
            f"\n--- replica {name} ---\n{server.output()[-_LOG_TAIL:]}"
            for name, server in (("a", self.a), ("b", self.b))
        )

    def wait_until(self, condition: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + WAIT
        while not condition():
            assert time.monotonic() < deadline, f"never: {what}{self.logs()}"
            time.sleep(0.02)

    def open_gate(self, name: str) -> None:
        (self.gates / name).touch()

    def queued(self, thread_id: str) -> int:
        """How many inputs wait on ``thread_id`` (read from the store itself)."""
        if self.database is not None:
            with sqlite3.connect(self.database) as conn:
                (count,) = conn.execute(
                    "SELECT count(*) FROM agui_thread_queue WHERE thread_id = ?", (thread_id,)
                ).fetchone()
            return int(count)

        async def read() -> int:
            conn = await asyncpg.connect(DATABASE_URL)
            try:
                value: int = await conn.fetchval(
                    f'SELECT count(*) FROM "{self.schema}".agui_thread_queue'  # noqa: S608 - test schema
                    " WHERE thread_id = $1 AND done_at IS NULL",
                    thread_id,
                )
                return value
            finally:
                await conn.close()

        return asyncio.run(read())


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def replicas(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Replicas]:
    tmp = tmp_path_factory.mktemp("double-texting")
    gates = tmp / "gates"
    gates.mkdir()
    env = {
        "PAUSEMESH_SECRET_KEY": secrets.token_urlsafe(48),
        "PAUSEMESH_LEASE_SECONDS": "5",
        "PAUSEMESH_KEEPALIVE_SECONDS": "1",
        "PAUSEMESH_SWEEP_INTERVAL_SECONDS": "0.5",
        "PAUSEMESH_THREAD_QUEUE_LIMIT": str(QUEUE_LIMIT),
        "TEXTING_AGENT_GATES": str(gates),
    }
    schema: str | None = None
    database: Path | None = None
    if request.param == "sqlite":
        database = tmp / "pausemesh.db"
        args = ["serve", "--agent", AGENT, "--database-path", str(database)]
    else:
        asyncio.run(require_postgres())
        schema = fresh_schema("pm_texting")
        asyncio.run(migrate(DATABASE_URL, schema=schema))
        args = ["serve", "--agent", AGENT, "--database-url", DATABASE_URL]
        env["PAUSEMESH_DATABASE_SCHEMA"] = schema
    try:
        with ServerProcess(args, env=env) as a, ServerProcess(args, env=env) as b:
            yield Replicas(a=a, b=b, gates=gates, database=database, schema=schema)
    finally:
        if schema is not None:
            asyncio.run(drop_schema(schema))


@dataclass
class Streamed:
    """``POST /agui`` read in a thread of its own: its frames as they arrive."""

    server: ServerProcess
    body: dict[str, Any]
    # The servers' output, for a failed wait (``Replicas.logs``).
    logs: Callable[[], str] = field(default=lambda: "")
    frames: list[Frame] = field(default_factory=list)
    error: BaseException | None = None
    _done: threading.Event = field(default_factory=threading.Event)
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def __post_init__(self) -> None:
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        timeout = httpx.Timeout(30, read=WAIT * 2)
        try:
            with (
                httpx.Client(base_url=self.server.base_url, timeout=timeout) as client,
                client.stream("POST", "/agui", json=self.body) as response,
            ):
                assert response.status_code == 200, response.read()
                for frame in read_frames(response.iter_lines(), StreamChecker()):
                    with self._changed:
                        self.frames.append(frame)
                        self._changed.notify_all()
        except BaseException as error:  # noqa: BLE001 - reported by the waits below
            self.error = error
        finally:
            with self._changed:
                self._done.set()
                self._changed.notify_all()

    def wait_for_text(self, text: str) -> None:
        """Until the run has said ``text`` (its stream is live)."""
        with self._changed:
            said = self._changed.wait_for(
                lambda: text in RunResult(self.frames).text() or self._done.is_set(), WAIT
            )
        assert said, f"never said {text!r}: {self._story()}"
        assert text in RunResult(self.frames).text(), (self.error, self.frames)

    def _story(self) -> str:
        """What a failed wait says: the frames so far, the read's error, the servers' logs."""
        with self._changed:
            events = [f.event for f in self.frames]
        return f"run {self.body['runId']}: {events}, error {self.error!r}{self.logs()}"

    def cut(self) -> bool:
        """Whether the stream ended without its run's end (its server was killed)."""
        assert self._done.wait(WAIT * 2), f"the stream never ended: {self._story()}"
        return not self.frames or RunResult(self.frames).last["type"] != "RUN_FINISHED"

    def result(self) -> RunResult:
        assert self._done.wait(WAIT * 2), f"the stream never ended: {self._story()}"
        assert self.error is None, self._story()
        return RunResult(self.frames)


def message(text: str) -> dict[str, Any]:
    return {"id": f"user-{uuid.uuid4()}", "role": "user", "content": text}


def body(
    thread_id: str, messages: list[dict[str, Any]], policy: str | None = None
) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if policy is not None:
        extra["forwardedProps"] = {"pausemesh": {"doubleTexting": policy}}
    return run_body(thread_id, f"run-{uuid.uuid4()}", messages=messages, **extra)


def new_thread() -> str:
    return f"thread-{uuid.uuid4()}"


def queued_is(replicas: Replicas, thread_id: str, count: int) -> bool:
    return replicas.queued(thread_id) == count


def snapshot(server: ServerProcess, thread_id: str) -> dict[str, Any]:
    response = httpx.get(server.url(f"/agui/threads/{thread_id}"), timeout=30)
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def texts(server: ServerProcess, thread_id: str) -> list[tuple[str, str]]:
    return [(m["role"], m.get("content", "")) for m in snapshot(server, thread_id)["messages"]]


def hold(replicas: Replicas, thread_id: str, name: str) -> tuple[Streamed, dict[str, Any]]:
    """A run on replica a that holds ``thread_id`` until gate ``name`` opens."""
    held = message(f"hold {name}")
    run = replicas.stream(replicas.a, body(thread_id, [held]))
    run.wait_for_text(f"holding {name}.")
    return run, held


def run_on(server: ServerProcess, payload: dict[str, Any]) -> RunResult:
    with httpx.Client(base_url=server.base_url, timeout=httpx.Timeout(30, read=WAIT)) as client:
        return post_run(client, payload)


def test_reject_is_the_default_and_a_bad_policy_is_a_400(replicas: Replicas) -> None:
    thread_id = new_thread()
    run, held = hold(replicas, thread_id, f"reject-{thread_id}")
    busy = run_on(replicas.b, body(thread_id, [held, message("no, Porto")]))
    assert busy.types == ["RUN_ERROR"]
    assert busy.error_code == "THREAD_BUSY"
    rejected = run_on(replicas.b, body(thread_id, [held, message("again")], "reject"))
    assert rejected.error_code == "THREAD_BUSY"
    bad = httpx.post(
        replicas.b.url("/agui"), json=body(thread_id, [message("x")], "shout"), timeout=30
    )
    assert bad.status_code == 400
    assert bad.json()["code"] == "INVALID_DOUBLE_TEXTING"
    replicas.open_gate(f"reject-{thread_id}")
    assert run.result().last["type"] == "RUN_FINISHED"
    assert replicas.queued(thread_id) == 0


def test_enqueued_inputs_run_after_the_run_in_the_order_queued_across_replicas(
    replicas: Replicas,
) -> None:
    thread_id = new_thread()
    gate = f"enqueue-{thread_id}"
    run, held = hold(replicas, thread_id, gate)
    # The client saw only its own messages: each queued input carries its history as it was.
    first = replicas.stream(replicas.b, body(thread_id, [held, message("one")], "enqueue"))
    replicas.wait_until(lambda: replicas.queued(thread_id) == 1, "the first input is queued")
    second = replicas.stream(replicas.a, body(thread_id, [held, message("two")], "enqueue"))
    replicas.wait_until(lambda: replicas.queued(thread_id) == 2, "the second input is queued")
    replicas.open_gate(gate)

    assert run.result().last["type"] == "RUN_FINISHED"
    one, two = first.result(), second.result()
    # Each response is its own run, streamed from whichever replica ran it.
    assert (one.types[0], one.last["type"], one.text()) == (
        "RUN_STARTED",
        "RUN_FINISHED",
        "echo one",
    )
    assert (two.types[0], two.last["type"], two.text()) == (
        "RUN_STARTED",
        "RUN_FINISHED",
        "echo two",
    )
    assert one.frames[0].sequence is not None
    assert two.frames[0].sequence is not None
    assert one.frames[-1].sequence is not None
    assert one.frames[-1].sequence < two.frames[0].sequence
    assert texts(replicas.b, thread_id) == [
        ("user", f"hold {gate}"),
        ("assistant", f"holding {gate}. released {gate}."),
        ("user", "one"),
        ("assistant", "echo one"),
        ("user", "two"),
        ("assistant", "echo two"),
    ]
    replicas.wait_until(partial(queued_is, replicas, thread_id, 0), "the queue is empty")


def test_interrupt_stops_the_run_on_the_other_replica_keeps_its_output_marked_and_runs(
    replicas: Replicas,
) -> None:
    thread_id = new_thread()
    run, held = hold(replicas, thread_id, f"never-{thread_id}")
    correction = run_on(replicas.b, body(thread_id, [held, message("no, Porto")], "interrupt"))
    assert correction.types[0] == "RUN_STARTED"
    assert correction.last["type"] == "RUN_FINISHED"
    assert correction.text() == "echo no, Porto"

    stopped = run.result()
    assert stopped.last["type"] == "RUN_FINISHED"
    marker = stopped.events[-2]
    assert marker["type"] == "CUSTOM"
    assert marker["name"] == "pausemesh.run_interrupted"
    assert marker["value"]["mode"] == "interrupt"
    assert "TEXT_MESSAGE_END" in stopped.types  # what it left open is closed cleanly

    messages = snapshot(replicas.a, thread_id)["messages"]
    assert [(m["role"], m.get("content")) for m in messages] == [
        ("user", held["content"]),
        ("assistant", f"holding never-{thread_id}."),
        ("user", "no, Porto"),
        ("assistant", "echo no, Porto"),
    ]
    kept = messages[1]
    assert kept["id"] in marker["value"]["messageIds"]
    assert kept["metadata"]["pausemesh"] == {"interrupted": True, "runId": run.body["runId"]}
    replicas.wait_until(partial(queued_is, replicas, thread_id, 0), "the queue is empty")


def test_rollback_stops_the_run_removes_its_output_and_runs(replicas: Replicas) -> None:
    thread_id = new_thread()
    run, held = hold(replicas, thread_id, f"never-{thread_id}")
    redo = run_on(replicas.b, body(thread_id, [held, message("start over")], "rollback"))
    assert redo.text() == "echo start over"
    stopped = run.result()
    marker = stopped.events[-2]
    assert marker["value"]["mode"] == "rollback"
    removed = marker["value"]["removedMessageIds"]
    assert len(removed) == 1
    messages = snapshot(replicas.b, thread_id)["messages"]
    assert [(m["role"], m.get("content")) for m in messages] == [
        ("user", held["content"]),
        ("user", "start over"),
        ("assistant", "echo start over"),
    ]
    assert removed[0] not in {m["id"] for m in messages}


def test_a_later_input_that_sends_the_rolled_back_output_again_does_not_bring_it_back(
    replicas: Replicas,
) -> None:
    """A client keeps what it streamed: its next input carries the removed answer, which the
    thread remembers as removed (on whichever replica the input arrives)."""
    thread_id = new_thread()
    run, held = hold(replicas, thread_id, f"never-{thread_id}")
    redo = message("start over")
    answer = run_on(replicas.b, body(thread_id, [held, redo], "rollback"))
    stopped = run.result()
    (removed,) = stopped.events[-2]["value"]["removedMessageIds"]
    # The stopped client's copy of the removed answer, as it streamed it.
    partial = {"id": removed, "role": "assistant", "content": f"holding never-{thread_id}."}
    echoed = {"id": answer.events[1]["messageId"], "role": "assistant", "content": answer.text()}
    later = run_on(replicas.a, body(thread_id, [held, partial, redo, echoed, message("later")]))
    assert later.text() == "echo later"

    for server in (replicas.a, replicas.b):
        assert texts(server, thread_id) == [
            ("user", held["content"]),
            ("user", "start over"),
            ("assistant", "echo start over"),
            ("user", "later"),
            ("assistant", "echo later"),
        ]


@needs_node
def test_the_official_client_after_a_rollback_does_not_bring_the_removed_answer_back(
    replicas: Replicas,
) -> None:
    """Two ``@ag-ui/client`` HttpAgents (two tabs), one per replica: B rolls back A's run; A's
    next run sends its whole history, the removed answer in it; the thread stays without it."""
    thread_id = new_thread()
    report = run_node_harness(
        "rollback.mjs",
        replicas.a.base_url,
        replicas.b.base_url,
        thread_id,
        f"never-{thread_id}",
    )
    rolled_back = report["rolledBack"]
    assert rolled_back["last"] == "RUN_FINISHED"
    assert rolled_back["value"]["mode"] == "rollback"
    (removed,) = rolled_back["value"]["removedMessageIds"]
    # The client kept the removed answer and sent it again with its next input.
    assert removed in [m["id"] for m in report["tabAHeld"]]
    assert removed in report["sentIds"]

    expected = [
        ("user", f"hold never-{thread_id}"),
        ("user", "start over"),
        ("assistant", "echo start over"),
        ("user", "and then"),
        ("assistant", "echo and then"),
    ]
    assert [(m["role"], m["content"]) for m in report["reloaded"]] == expected
    assert removed not in [m["id"] for m in report["reloaded"]]
    assert texts(replicas.a, thread_id) == expected


def test_a_pending_question_still_blocks_new_input_under_every_policy(replicas: Replicas) -> None:
    thread_id = new_thread()
    asked = run_on(replicas.a, body(thread_id, [message("ask")]))
    assert asked.last["outcome"]["type"] == "interrupt"
    for policy in ("reject", "enqueue", "interrupt", "rollback"):
        refused = run_on(replicas.b, body(thread_id, [message("hello")], policy))
        assert refused.error_code == "PAUSEMESH_AGUI_RESUME_REQUIRED", (policy, refused.events)
    assert replicas.queued(thread_id) == 0


def test_a_run_that_carries_decisions_is_not_interrupted(replicas: Replicas) -> None:
    """The approved work happens once: the interrupting input waits for the run to end."""
    thread_id = new_thread()
    gate = f"approved-{thread_id}"
    asked = run_on(replicas.a, body(thread_id, [message(f"ask then hold {gate}")]))
    (interrupt,) = asked.interrupts
    entry = {"interruptId": interrupt["id"], "status": "resolved", "payload": {"ok": True}}
    resumed = replicas.stream(
        replicas.a, run_body(thread_id, f"run-{uuid.uuid4()}", resume=[entry])
    )
    resumed.wait_for_text(f"holding {gate}.")
    correction = replicas.stream(replicas.b, body(thread_id, [message("no, Porto")], "interrupt"))
    replicas.wait_until(
        partial(queued_is, replicas, thread_id, 1), "the interrupting input is queued"
    )
    replicas.open_gate(gate)
    finished = resumed.result()
    assert finished.last["type"] == "RUN_FINISHED"
    assert "CUSTOM" not in finished.types
    assert finished.text() == f"holding {gate}. released {gate}.answered ask"
    assert correction.result().text() == "echo no, Porto"


def test_inputs_queued_behind_a_run_that_asks_meet_the_question(replicas: Replicas) -> None:
    thread_id = new_thread()
    gate = f"asks-{thread_id}"
    held = message(f"hold {gate} then ask")
    run = replicas.stream(replicas.a, body(thread_id, [held]))
    run.wait_for_text(f"holding {gate}.")
    waiting = replicas.stream(replicas.b, body(thread_id, [held, message("meanwhile")], "enqueue"))
    replicas.wait_until(partial(queued_is, replicas, thread_id, 1), "the input is queued")
    replicas.open_gate(gate)
    assert run.result().last["outcome"]["type"] == "interrupt"
    refused = waiting.result()
    assert refused.types == ["RUN_ERROR"]
    assert refused.error_code == "PAUSEMESH_AGUI_RESUME_REQUIRED"
    replicas.wait_until(partial(queued_is, replicas, thread_id, 0), "the queue is empty")
    assert len(snapshot(replicas.b, thread_id)["pendingInterrupts"]) == 1


def test_a_full_queue_and_an_input_with_nothing_to_queue_are_refused(replicas: Replicas) -> None:
    thread_id = new_thread()
    gate = f"full-{thread_id}"
    run, held = hold(replicas, thread_id, gate)
    waiting: list[Streamed] = []
    for n in range(QUEUE_LIMIT):
        waiting.append(
            replicas.stream(replicas.b, body(thread_id, [held, message(f"q{n}")], "enqueue"))
        )
        replicas.wait_until(
            partial(queued_is, replicas, thread_id, n + 1), f"{n + 1} inputs queued"
        )
    full = run_on(replicas.a, body(thread_id, [held, message("one too many")], "enqueue"))
    assert full.error_code == "PAUSEMESH_AGUI_QUEUE_FULL"
    empty = run_on(replicas.a, body(thread_id, [], "interrupt"))
    assert empty.error_code == "PAUSEMESH_AGUI_NOT_QUEUEABLE"
    replicas.open_gate(gate)
    assert run.result().last["type"] == "RUN_FINISHED"
    assert [w.result().text() for w in waiting] == [f"echo q{n}" for n in range(QUEUE_LIMIT)]


def test_killing_every_replica_mid_queue_loses_no_queued_input(replicas: Replicas) -> None:
    thread_id = new_thread()
    run, held = hold(replicas, thread_id, f"never-{thread_id}")
    first = replicas.stream(replicas.b, body(thread_id, [held, message("k-one")], "enqueue"))
    replicas.wait_until(lambda: replicas.queued(thread_id) == 1, "the first input is queued")
    second = replicas.stream(replicas.b, body(thread_id, [held, message("k-two")], "enqueue"))
    replicas.wait_until(lambda: replicas.queued(thread_id) == 2, "the second input is queued")
    replicas.b.kill()
    replicas.a.kill()
    assert run.cut()
    assert first.cut()
    assert second.cut()
    replicas.a.restart()
    replicas.b.restart()
    # Whichever replica takes the thread first (its predecessor's lease freed at its start,
    # or lapsed) runs what waits, in order.
    replicas.wait_until(lambda: replicas.queued(thread_id) == 0, "the queue is run")
    assert texts(replicas.a, thread_id)[-4:] == [
        ("user", "k-one"),
        ("assistant", "echo k-one"),
        ("user", "k-two"),
        ("assistant", "echo k-two"),
    ]
