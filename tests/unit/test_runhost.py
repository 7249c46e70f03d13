"""The AG-UI run host in-process (memory stores, and a SQLite file where leases change hands):
cohorts of several pauses, agent mistakes, leases, transcripts. The same host runs behind the
routes; tests/e2e drive it over HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

from pausemesh.agui.agent import AgentOutput, PauseRequest, RunContext, ThreadTitle
from pausemesh.agui.events import (
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallStartEvent,
)
from pausemesh.agui.input import convert_run_input
from pausemesh.agui.run import RunHost
from pausemesh.agui.run.expiry import EXPIRY_RUN_PREFIX
from pausemesh.core import ContinuationService, KeyedTokenIssuer, ManualClock
from pausemesh.core.errors import LeaseLostError
from pausemesh.core.threads import RunLease, ThreadLogEntry, ThreadStore
from pausemesh.stores.memory import InMemoryEventStore, InMemoryOperationLedger, InMemoryThreadStore
from pausemesh.stores.sqlite import open_sqlite_storage
from tests.support.agui import RunResult, StreamChecker, read_frames

Agent = Callable[[RunContext], AsyncIterator[AgentOutput]]


def _host(agent: Agent, clock: ManualClock | None = None, **options: Any) -> RunHost:
    clock = clock or ManualClock()
    service = ContinuationService(
        store=InMemoryEventStore(),
        clock=clock,
        keyed_issuer=KeyedTokenIssuer({"k1": b"k" * 32}, "k1"),
    )
    return RunHost(
        agent=agent,
        service=service,
        threads=InMemoryThreadStore(),
        operations=InMemoryOperationLedger(),
        clock=clock,
        keepalive_seconds=10,
        **options,
    )


async def _run(host: RunHost, body: dict[str, Any], principal: str | None = None) -> RunResult:
    chunks = [c async for c in host.run(convert_run_input(body), principal)]
    lines = b"".join(chunks).decode().split("\n")
    return RunResult(list(read_frames(iter(lines), StreamChecker())))


def _body(run_id: str = "r1", **fields: Any) -> dict[str, Any]:
    return {"threadId": "t1", "runId": run_id, "messages": [], **fields}


USER = [{"id": "u1", "role": "user", "content": "go"}]


async def two_questions(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    if ctx.decisions:
        summary = ",".join(f"{d.metadata['n']}={d.status}" for d in ctx.decisions.values())
        yield StateSnapshotEvent(snapshot={"answers": summary})
        return
    yield PauseRequest(message="First?", metadata={"n": 1})
    yield PauseRequest(
        message="Second?",
        response_schema={"type": "object", "required": ["ok"]},
        tool_call_id="call-2",
        reason="tool_call",
        metadata={"n": 2},
    )


async def test_one_run_with_two_pauses_issues_one_cohort_in_order() -> None:
    host = _host(two_questions)
    result = await _run(host, _body(messages=USER))
    first, second = result.interrupts
    assert (first["message"], second["message"]) == ("First?", "Second?")
    assert second["toolCallId"] == "call-2"
    assert second["reason"] == "tool_call"
    record = await host.threads.get("t1")
    assert record is not None
    cohort = record.open_receipt
    assert cohort is not None
    assert [i["id"] for i in cohort.interrupts] == [first["id"], second["id"]]
    assert cohort.interrupt_ids == (first["id"], second["id"])


async def test_a_partial_batch_is_refused_and_the_whole_batch_is_accepted_in_any_order() -> None:
    host = _host(two_questions)
    first, second = (await _run(host, _body(messages=USER))).interrupts
    partial = await _run(
        host, _body("r2", resume=[{"interruptId": first["id"], "status": "cancelled"}])
    )
    assert partial.error_code == "PAUSEMESH_AGUI_RESUME_SET_MISMATCH"
    whole = await _run(
        host,
        _body(
            "r3",
            resume=[
                {"interruptId": second["id"], "status": "resolved", "payload": {"ok": True}},
                {"interruptId": first["id"], "status": "cancelled"},
            ],
        ),
    )
    assert whole.last["type"] == "RUN_FINISHED"
    state = next(e for e in whole.events if e["type"] == "STATE_SNAPSHOT")["snapshot"]
    assert state == {"answers": "1=cancelled,2=resolved"}
    statuses = [(await host.service.get(i["id"])).status for i in (first, second)]
    assert statuses == ["cancelled", "resumed"]


async def test_a_client_tool_message_for_the_interrupted_call_is_dropped() -> None:
    host = _host(two_questions)
    first, second = (await _run(host, _body(messages=USER))).interrupts
    synthetic = {"id": "tool-x", "role": "tool", "toolCallId": "call-2", "content": "{}"}
    resume = [
        {"interruptId": first["id"], "status": "cancelled"},
        {"interruptId": second["id"], "status": "resolved", "payload": {"ok": True}},
    ]
    await _run(host, _body("r1", messages=[*USER, synthetic], resume=resume))
    record = await host.threads.get("t1")
    assert record is not None
    assert all(m["id"] != "tool-x" for m in record.messages)


async def test_unknown_resume_entries_on_a_thread_without_a_cohort_are_ignored() -> None:
    async def echo(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        yield StateSnapshotEvent(snapshot={"decisions": len(ctx.decisions)})

    result = await _run(
        _host(echo), _body(resume=[{"interruptId": "ghost", "status": "cancelled"}])
    )
    assert result.types == ["RUN_STARTED", "STATE_SNAPSHOT", "RUN_FINISHED"]
    assert result.events[1]["snapshot"] == {"decisions": 0}


async def test_what_the_agent_leaves_open_is_closed_before_run_finished() -> None:
    async def sloppy(_: RunContext) -> AsyncIterator[AgentOutput]:
        yield StepStartedEvent(step_name="plan")
        yield TextMessageStartEvent(message_id="m1")
        yield TextMessageContentEvent(message_id="m1", delta="hi")
        yield ToolCallStartEvent(tool_call_id="c1", tool_call_name="search", parent_message_id="m1")
        yield ToolCallArgsEvent(tool_call_id="c1", delta='{"q":1}')

    host = _host(sloppy)
    result = await _run(host, _body())
    assert result.types[-4:] == [
        "TOOL_CALL_END",
        "TEXT_MESSAGE_END",
        "STEP_FINISHED",
        "RUN_FINISHED",
    ]
    record = await host.threads.get("t1")
    assert record is not None
    assert record.messages == [
        {
            "id": "m1",
            "role": "assistant",
            "content": "hi",
            "toolCalls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "search", "arguments": '{"q":1}'},
                }
            ],
        }
    ]


async def test_state_deltas_are_applied_to_the_thread_state() -> None:
    async def counter(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        yield StateDeltaEvent(
            delta=[
                {"op": "add", "path": "/n", "value": (ctx.state or {}).get("n", 0) + 1},
                {"op": "add", "path": "/log/-", "value": ctx.run_id},
            ]
        )

    host = _host(counter)
    await _run(host, _body("r1", state={"n": 0, "log": []}))
    await _run(host, _body("r2", state={"n": 100, "log": ["client-made"]}))
    record = await host.threads.get("t1")
    assert record is not None
    # After the first run the server's state is authoritative, not the client's copy.
    assert record.state == {"n": 2, "log": ["r1", "r2"]}


@pytest.mark.parametrize(
    ("outputs", "code"),
    [
        ([RunStartedEvent(thread_id="t1", run_id="x")], "AGENT_PROTOCOL_ERROR"),
        ([TextMessageContentEvent(message_id="never-started", delta="x")], "AGENT_PROTOCOL_ERROR"),
        ([PauseRequest(message="?", response_schema={"type": 12})], "AGENT_PROTOCOL_ERROR"),
        ([PauseRequest(message="")], "AGENT_PROTOCOL_ERROR"),
    ],
)
async def test_agent_mistakes_end_the_run_with_a_run_error(
    outputs: list[AgentOutput], code: str
) -> None:
    async def agent(_: RunContext) -> AsyncIterator[AgentOutput]:
        for output in outputs:
            yield output

    host = _host(agent)
    result = await _run(host, _body())
    assert result.types[0] == "RUN_STARTED"
    assert result.error_code == code, result.events
    record = await host.threads.get("t1")
    assert record is not None
    assert record.open_receipt is None
    assert record.lease is None


@pytest.mark.parametrize(
    "deadline",
    [
        {"expires_in": 91 * 24 * 3600.0},
        {"expires_in": 1e300},
        {"expires_in": float("nan")},
        {"expires_at": datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)},
    ],
    ids=["91-days", "overflowing", "nan", "year-9999"],
)
async def test_a_pause_deadline_past_the_ttl_cap_is_refused_and_no_pause_of_the_run_exists(
    deadline: dict[str, Any],
) -> None:
    async def agent(_: RunContext) -> AsyncIterator[AgentOutput]:
        yield PauseRequest(message="Within the cap?", expires_in=60.0)
        yield PauseRequest(message="For ever?", **deadline)

    host = _host(agent)
    result = await _run(host, _body(messages=USER))

    assert result.error_code == "AGENT_PROTOCOL_ERROR", result.events
    assert "PAUSEMESH_MAX_PAUSE_TTL_SECONDS" in result.last["message"]
    record = await host.threads.get("t1")
    assert record is not None
    assert record.open_receipt is None
    # Refused before any of the cohort existed: not even the first, valid pause was stored.
    assert host.service.store._streams == {}  # type: ignore[attr-defined]


async def test_an_agent_that_raises_is_a_run_error_after_what_it_sent() -> None:
    async def crashing(_: RunContext) -> AsyncIterator[AgentOutput]:
        yield TextMessageStartEvent(message_id="m1")
        msg = "boom"
        raise RuntimeError(msg)

    result = await _run(_host(crashing), _body())
    assert result.types == ["RUN_STARTED", "TEXT_MESSAGE_START", "RUN_ERROR"]
    assert result.error_code == "AGENT_FAILED"
    assert "boom" not in result.last["message"]


async def test_a_second_concurrent_run_on_a_thread_is_thread_busy() -> None:
    gate = asyncio.Event()

    async def slow(_: RunContext) -> AsyncIterator[AgentOutput]:
        await gate.wait()
        yield StateSnapshotEvent(snapshot={})

    host = _host(slow)
    first = asyncio.create_task(_run(host, _body("r1")))
    for _ in range(1000):  # let the first run take the lease (no wall-clock involved)
        record = await host.threads.get("t1")
        if record is not None and record.lease is not None:
            break
        await asyncio.sleep(0)
    contenders = await asyncio.gather(*(_run(host, _body(f"r{i}")) for i in range(2, 22)))
    assert {c.error_code for c in contenders} == {"THREAD_BUSY"}
    assert all(c.types == ["RUN_ERROR"] for c in contenders)
    gate.set()
    assert (await first).last["type"] == "RUN_FINISHED"
    # The lease is released: the next run goes through.
    gate.set()
    assert (await _run(host, _body("r99"))).last["type"] == "RUN_FINISHED"


async def _answers(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    yield StateSnapshotEvent(snapshot={"n": len(ctx.messages)})


async def _asks(_: RunContext) -> AsyncIterator[AgentOutput]:
    yield PauseRequest(message="Which?")


async def _fails(_: RunContext) -> AsyncIterator[AgentOutput]:
    yield StateSnapshotEvent(snapshot={})
    msg = "boom"
    raise RuntimeError(msg)


@pytest.mark.parametrize(
    ("agent", "last_type"),
    [(_answers, "RUN_FINISHED"), (_asks, "RUN_FINISHED"), (_fails, "RUN_ERROR")],
    ids=["finished", "interrupted", "failed"],
)
async def test_the_frame_that_ends_a_run_reaches_the_client_with_the_thread_already_free(
    agent: Agent, last_type: str
) -> None:
    # A client (or a tail) that starts the next run the moment it reads the last frame must
    # not meet THREAD_BUSY: the lease is given back in the write of the last events, not in a
    # write after them. The first run's generator is held right after its last frame.
    host = _host(agent)
    first = host.run(convert_run_input(_body("r1")), None)
    chunks = [chunk async for chunk in _until_last(first, last_type)]
    record = await host.threads.get("t1")
    assert record is not None
    assert record.lease is None
    assert host.leases.held == {}
    # The next run: a resume of the question when the first asked one, else a new turn.
    cohort = record.open_receipt
    resume = (
        []
        if cohort is None
        else [{"interruptId": i, "status": "cancelled"} for i in cohort.interrupt_ids]
    )
    second = await _run(host, _body("r2", resume=resume))
    assert (cohort is not None) == (agent is _asks)
    assert second.types[0] == "RUN_STARTED", second.events
    assert [c async for c in first] == []  # nothing follows the last frame
    assert last_type.encode() in chunks[-1]


async def _until_last(run: AsyncIterator[bytes], last_type: str) -> AsyncIterator[bytes]:
    async for chunk in run:
        yield chunk
        if f'"type":"{last_type}"'.encode() in chunk:
            return


async def test_a_silent_run_keeps_its_lease_past_the_ttl_and_frees_it_when_done() -> None:
    gate = asyncio.Event()

    async def silent(_: RunContext) -> AsyncIterator[AgentOutput]:
        await gate.wait()
        yield StateSnapshotEvent(snapshot={})

    clock = ManualClock()
    host = _host(silent, clock, lease_seconds=0.3)
    first = asyncio.create_task(_run(host, _body("r1")))
    lease = await _lease_taken(host)
    # Far past the TTL by the clock, and the agent sends nothing: the keeper renews anyway.
    clock.advance(60)
    renewed = await _renewed_past(host, clock)
    assert renewed.lease_id == lease
    assert (await _run(host, _body("r2"))).error_code == "THREAD_BUSY"
    gate.set()
    assert (await first).last["type"] == "RUN_FINISHED"
    assert host.leases.held == {}
    released = await host.threads.get("t1")
    assert released is not None
    assert released.lease is None


async def test_a_hosts_leases_carry_its_holder() -> None:
    gate = asyncio.Event()

    async def slow(_: RunContext) -> AsyncIterator[AgentOutput]:
        await gate.wait()
        yield StateSnapshotEvent(snapshot={})

    host = _host(slow, lease_holder="replica-a:8787@i1/")
    first = asyncio.create_task(_run(host, _body("r1")))
    assert (await _lease_taken(host)).startswith("replica-a:8787@i1/")
    gate.set()
    await first


async def test_a_run_that_loses_its_lease_stops_its_agent_at_once_and_writes_nothing_more(
    tmp_path: Path,
) -> None:
    """On one SQLite file: replica A's run holds the thread; A's name is restarted elsewhere
    (its predecessor's leases are freed) and replica B's run takes the thread. A's keeper sees
    the loss at its next renewal: A's agent is cancelled there and then (it was waiting for
    nothing that would ever come), A's client gets RUN_ERROR LEASE_LOST, and A writes nothing
    more to the thread."""
    storage = await open_sqlite_storage(str(tmp_path / "threads.db"))
    assert storage.threads is not None
    threads = storage.threads
    service = ContinuationService(
        store=storage.events, keyed_issuer=KeyedTokenIssuer({"k1": b"k" * 32}, "k1")
    )
    asked = asyncio.Event()
    cancelled = asyncio.Event()
    never = asyncio.Event()

    async def waits_forever(_: RunContext) -> AsyncIterator[AgentOutput]:
        yield TextMessageStartEvent(message_id="m1", role="assistant")
        yield TextMessageContentEvent(message_id="m1", delta="thinking")
        asked.set()
        try:
            await never.wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        yield TextMessageContentEvent(message_id="m1", delta=" more")  # never reached

    b_may_finish = asyncio.Event()

    async def replica_b_agent(_: RunContext) -> AsyncIterator[AgentOutput]:
        await b_may_finish.wait()
        yield StateSnapshotEvent(snapshot={"by": "b"})

    def host(agent: Agent, holder: str) -> RunHost:
        return RunHost(
            agent=agent,
            service=service,
            threads=threads,
            keepalive_seconds=10,
            lease_seconds=0.3,
            lease_holder=holder,
        )

    a = host(waits_forever, "replica-a:8787@i1/")
    b = host(replica_b_agent, "replica-b:8787@i1/")
    try:
        first = asyncio.create_task(_run(a, _body("r-a", messages=USER)))
        await asyncio.wait_for(asked.wait(), 10)
        a_lease = await _lease_taken(a)
        # What A streamed before the loss is committed by then (a write may still be on the
        # store's writer when the agent has yielded), so "nothing after" compares settled logs.
        before = await _logged_text(threads, "r-a", "thinking")
        # Replica A's name starts again elsewhere: its predecessor's leases are freed at once.
        assert await threads.release_instance_leases("replica-a:8787", keep="replica-a:8787@i2/")
        second = asyncio.create_task(_run(b, _body("r-b")))
        lost = await first
        assert lost.error_code == "LEASE_LOST"
        assert cancelled.is_set()
        assert lost.text() == "thinking"
        # A wrote nothing after the loss (its RUN_ERROR is not in the log either), and the
        # store refuses anything it would still try.
        after = await threads.read_events("t1", after_sequence=0)
        assert [e for e in after if e.run_id == "r-a"] == [e for e in before if e.run_id == "r-a"]
        with pytest.raises(LeaseLostError):
            await threads.append_events("t1", lease_id=a_lease, run_id="r-a", events=['{"x":1}'])
        assert a.leases.held == {}
        # B's run goes on undisturbed and finishes.
        b_may_finish.set()
        assert (await second).last["type"] == "RUN_FINISHED"
        record = await threads.get("t1")
        assert record is not None
        assert record.state == {"by": "b"}
    finally:
        await storage.close()


async def _renewed_past(host: RunHost, clock: ManualClock) -> RunLease:
    """The lease once the keeper renewed it beyond the clock's now (it runs on its own)."""
    for _ in range(400):
        record = await host.threads.get("t1")
        assert record is not None
        assert record.lease is not None
        if record.lease.expires_at > clock.now():
            return record.lease
        await asyncio.sleep(0.01)
    pytest.fail("the keeper never renewed the lease")


async def _logged_text(threads: ThreadStore, run_id: str, text: str) -> list[ThreadLogEntry]:
    """The thread's log once ``run_id``'s streamed text ``text`` is in it."""
    for _ in range(2000):
        entries = await threads.read_events("t1", after_sequence=0)
        if any(e.run_id == run_id and f'"delta":"{text}"' in e.event_json for e in entries):
            return list(entries)
        await asyncio.sleep(0.005)
    pytest.fail(f"{run_id}'s text {text!r} never reached the log")


async def _lease_taken(host: RunHost) -> str:
    for _ in range(1000):  # let the run take the lease (no wall-clock involved)
        record = await host.threads.get("t1")
        if record is not None and record.lease is not None:
            return record.lease.lease_id
        await asyncio.sleep(0)
    pytest.fail("the run never took the lease")


async def test_another_principals_thread_is_not_found_inside_the_stream_too() -> None:
    async def quiet(_: RunContext) -> AsyncIterator[AgentOutput]:
        return
        yield

    host = _host(quiet)
    await _run(host, _body(), principal="alice")
    result = await _run(host, _body("r2"), principal="bob")
    assert result.error_code == "THREAD_NOT_FOUND"
    record = await host.threads.get("t1")
    assert record is not None
    assert record.owner == "alice"


async def test_connect_restores_messages_state_and_open_interrupts() -> None:
    host = _host(two_questions)
    asked = await _run(host, _body(messages=USER))
    frames = [c async for c in host.connect(convert_run_input(_body("reload")), None)]
    restored = RunResult(
        list(read_frames(iter(b"".join(frames).decode().split("\n")), StreamChecker()))
    )
    assert restored.types == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED"]
    assert restored.interrupts == asked.interrupts
    assert restored.events[1]["messages"] == msgspec.json.decode(
        msgspec.json.encode(
            next(e for e in asked.events if e["type"] == "MESSAGES_SNAPSHOT")["messages"]
        )
    )


async def test_an_idle_agent_gets_keep_alive_comments_between_events() -> None:
    gate = asyncio.Event()

    async def thinking(_: RunContext) -> AsyncIterator[AgentOutput]:
        await gate.wait()
        yield StateSnapshotEvent(snapshot={"done": True})

    host = _host(thinking)
    host.keepalive_seconds = 0.01
    stream = host.run(convert_run_input(_body()), None)
    chunks = [await anext(stream)]  # RUN_STARTED
    chunks.append(await anext(stream))
    assert chunks[-1] == b": keep-alive\n\n"
    gate.set()
    chunks += [c async for c in stream]
    result = RunResult(
        list(read_frames(iter(b"".join(chunks).decode().split("\n")), StreamChecker()))
    )
    assert result.types == ["RUN_STARTED", "STATE_SNAPSHOT", "RUN_FINISHED"]


async def test_a_client_that_goes_away_ends_the_run_and_frees_the_thread() -> None:
    cancelled = asyncio.Event()

    async def endless(_: RunContext) -> AsyncIterator[AgentOutput]:
        try:
            yield TextMessageStartEvent(message_id="m1")
            while True:
                yield TextMessageContentEvent(message_id="m1", delta=".")
                await asyncio.sleep(0)
        finally:
            cancelled.set()

    host = _host(endless)
    stream = host.run(convert_run_input(_body()), None)
    for _ in range(5):
        await anext(stream)
    await stream.aclose()  # what the server does when the client disconnects
    await asyncio.wait_for(cancelled.wait(), 10)
    record = await host.threads.get("t1")
    assert record is not None
    assert record.lease is None
    assert record.open_receipt is None
    # The events sent before the disconnect stay in the log; the next run may start.
    assert (await host.threads.read_events("t1", after_sequence=0))[0].sequence == 1
    host.agent = _quiet
    assert (await _run(host, _body("r2"))).last["type"] == "RUN_FINISHED"


async def _quiet(_: RunContext) -> AsyncIterator[AgentOutput]:
    return
    yield


async def test_replaying_an_earlier_answer_after_the_agent_asked_again_is_idempotent() -> None:
    async def ask_forever(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        yield StateSnapshotEvent(snapshot={"answers": len(ctx.decisions)})
        yield PauseRequest(message="Again?")

    host = _host(ask_forever)
    [first] = (await _run(host, _body(messages=USER))).interrupts
    answer = [{"interruptId": first["id"], "status": "resolved", "payload": "yes"}]
    [second] = (await _run(host, _body("r2", resume=answer))).interrupts
    replay = await _run(host, _body("r2", resume=answer))
    assert replay.types == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED"]
    assert replay.interrupts == [second]  # the question that is open now still stands
    conflicting = [{"interruptId": first["id"], "status": "resolved", "payload": "no"}]
    assert (await _run(host, _body("r3", resume=conflicting))).error_code == (
        "PAUSEMESH_AGUI_REPLAY_CONFLICT"
    )
    record = await host.threads.get("t1")
    assert record is not None
    assert record.open_receipt is not None
    assert [i["id"] for i in record.open_receipt.interrupts] == [second["id"]]


async def names_then_asks(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    if ctx.decisions:
        yield ThreadTitle("Booked: PM202")
        return
    yield ThreadTitle("First name")
    yield ThreadTitle("  Lisbon\n trip ")  # the last one a run yields wins, whitespace collapsed
    yield PauseRequest(message="Which flight?")


async def test_the_agents_title_is_saved_with_the_run_and_a_later_run_may_rename() -> None:
    host = _host(names_then_asks)
    [interrupt] = (await _run(host, _body(messages=USER), "alice")).interrupts
    record = await host.threads.get("t1")
    assert record is not None
    assert (record.title, record.title_source) == ("Lisbon trip", "agent")

    resumed = await _run(
        host,
        _body("r2", resume=[{"interruptId": interrupt["id"], "status": "cancelled"}]),
        "alice",
    )

    assert resumed.last["type"] == "RUN_FINISHED"
    [listed] = await host.threads.list_threads("alice", limit=10)
    assert listed.title == "Booked: PM202"


async def test_the_agent_cannot_rename_a_thread_the_owner_named() -> None:
    host = _host(names_then_asks)
    [interrupt] = (await _run(host, _body(messages=USER), "alice")).interrupts
    await host.threads.set_title("t1", "Mine")

    await _run(
        host,
        _body("r2", resume=[{"interruptId": interrupt["id"], "status": "cancelled"}]),
        "alice",
    )

    [listed] = await host.threads.list_threads("alice", limit=10)
    assert listed.title == "Mine"


@pytest.mark.parametrize("title", ["", "   ", "x" * 201])
async def test_an_invalid_agent_title_is_an_agent_protocol_error(title: str) -> None:
    async def agent(_: RunContext) -> AsyncIterator[AgentOutput]:
        yield ThreadTitle(title)

    host = _host(agent)
    result = await _run(host, _body(messages=USER))

    assert result.error_code == "AGENT_PROTOCOL_ERROR"
    record = await host.threads.get("t1")
    assert record is not None
    assert record.title is None  # a failed run saves nothing


async def _closing_lapsed_questions(host: RunHost, clock: ManualClock) -> str:
    """The lease of thread t1 as the expiry sweep holds it while it closes lapsed questions."""
    await host.threads.create_or_load("t1", owner=None, now=clock.now())
    lease_id = host.leases.new_lease_id()
    await host.leases.acquire(
        "t1", lease_id=lease_id, run_id=f"{EXPIRY_RUN_PREFIX}sweep", now=clock.now()
    )
    return lease_id


async def test_a_run_that_meets_a_close_of_lapsed_questions_waits_for_it_instead_of_thread_busy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def done(_: RunContext) -> AsyncIterator[AgentOutput]:
        yield StateSnapshotEvent(snapshot={"ran": True})

    clock = ManualClock()
    host = _host(done, clock)
    lease_id = await _closing_lapsed_questions(host, clock)
    looked = asyncio.Event()
    get = host.threads.get

    async def watched_get(thread_id: str, **read: Any) -> Any:
        looked.set()  # the run found the thread busy and looked who holds it
        return await get(thread_id, **read)

    monkeypatch.setattr(host.threads, "get", watched_get)
    run = asyncio.create_task(_run(host, _body("r1", messages=USER)))
    # Until the run looks (or ends: THREAD_BUSY at once, as before this waited).
    await asyncio.wait({run, asyncio.create_task(looked.wait())}, return_when="FIRST_COMPLETED")
    await host.leases.release("t1", lease_id)  # the close is done
    result = await run
    assert result.last["type"] == "RUN_FINISHED", result.events
    assert result.error_code is None


async def test_a_close_of_lapsed_questions_that_holds_the_thread_on_is_thread_busy_in_the_end() -> (
    None
):
    async def done(_: RunContext) -> AsyncIterator[AgentOutput]:
        yield StateSnapshotEvent(snapshot={})

    clock = ManualClock()
    host = _host(done, clock)
    await _closing_lapsed_questions(host, clock)
    result = await _run(host, _body("r1", messages=USER))
    assert result.error_code == "THREAD_BUSY"
    assert result.types == ["RUN_ERROR"]
