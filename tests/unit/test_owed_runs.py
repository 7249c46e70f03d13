"""The run the server owes a thread decided elsewhere, in-process (memory stores): who it runs
as, that it runs once, and what a late AG-UI resume of the same question gets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from pausemesh.agui.agent import AgentOutput, Approver, PauseRequest, RunContext
from pausemesh.agui.events import StateSnapshotEvent
from pausemesh.agui.input import convert_run_input
from pausemesh.agui.run import RunHost
from pausemesh.agui.run.owed import Owed, continue_owed_runs, continue_thread
from pausemesh.core import ContinuationService, KeyedTokenIssuer, ManualClock
from pausemesh.core.resume import NamedApprover, Resume
from pausemesh.stores.memory import InMemoryEventStore, InMemoryOperationLedger, InMemoryThreadStore
from tests.support.agui import RunResult, StreamChecker, read_frames

MANAGERS = frozenset({"manager"})
USER = [{"id": "u1", "role": "user", "content": "refund me"}]


class Recorder:
    """An agent that asks a manager, then records who it ran as and what it was told."""

    def __init__(self) -> None:
        self.runs_with_decisions = 0

    async def __call__(self, ctx: RunContext) -> AsyncIterator[AgentOutput]:
        if ctx.decisions:
            self.runs_with_decisions += 1
            [decision] = ctx.decisions.values()
            yield StateSnapshotEvent(
                snapshot={
                    "principal": ctx.principal,
                    "roles": sorted(ctx.roles),
                    "status": decision.status,
                    "payload": decision.payload,
                    "resolvedBy": decision.resolved_by,
                }
            )
            return
        yield PauseRequest(message="Refund 900 EUR?", approvers=(Approver.role("manager"),))


def _host(agent: Recorder) -> RunHost:
    clock = ManualClock()
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
    )


async def _run(host: RunHost, body: dict[str, Any], roles: frozenset[str]) -> RunResult:
    chunks = [c async for c in host.run(convert_run_input(body), "alice", roles=roles)]
    lines = b"".join(chunks).decode().split("\n")
    return RunResult(list(read_frames(iter(lines), StreamChecker())))


async def _asked(host: RunHost) -> str:
    body = {"threadId": "t1", "runId": "r1", "messages": USER}
    asked = await _run(host, body, frozenset({"traveller", "vip"}))
    [interrupt] = asked.interrupts
    assert interrupt["metadata"]["pausemesh"]["approvers"] == ["role:manager"]
    return str(interrupt["id"])


async def _state(host: RunHost) -> Any:
    record = await host.threads.get("t1")
    assert record is not None
    return record.state


async def test_the_owed_run_runs_once_as_the_owner_with_the_approvers_decision() -> None:
    agent = Recorder()
    host = _host(agent)
    interrupt = await _asked(host)
    # Nothing is owed while the question is open.
    assert await continue_thread(host, "t1") is Owed.WAITING
    await host.service.resume(
        Resume(
            continuation_id=interrupt,
            idempotency_key="approve",
            payload={"ok": True},
            by=NamedApprover("bob", roles=MANAGERS),
        )
    )
    assert await continue_owed_runs(host) == 1
    assert await _state(host) == {
        "principal": "alice",
        "roles": ["traveller", "vip"],
        "status": "resolved",
        "payload": {"ok": True},
        "resolvedBy": "bob",
    }
    assert await continue_owed_runs(host) == 0
    assert await continue_thread(host, "t1") is Owed.DONE
    assert agent.runs_with_decisions == 1


async def test_an_owners_resume_that_arrives_first_runs_with_the_stored_decision() -> None:
    agent = Recorder()
    host = _host(agent)
    interrupt = await _asked(host)
    await host.service.resume(
        Resume(
            continuation_id=interrupt,
            idempotency_key="reject",
            payload={"ok": False},
            by=NamedApprover("bob", roles=MANAGERS),
        )
    )
    # The owner's tab answers before the server's run: its entry changes nothing.
    entry = {"interruptId": interrupt, "status": "resolved", "payload": {"ok": True}}
    body = {"threadId": "t1", "runId": "r2", "messages": [], "resume": [entry]}
    run = await _run(host, body, frozenset())
    assert run.error_code is None, run.events
    custom = [e for e in run.events if e["type"] == "CUSTOM"]
    assert custom[0]["name"] == "pausemesh.decided_elsewhere"
    state = await _state(host)
    assert state["payload"] == {"ok": False}
    assert state["resolvedBy"] == "bob"
    # The owed mark finds the cohort closed: nothing runs again.
    assert await continue_owed_runs(host) == 1  # settled as done, no agent call
    assert agent.runs_with_decisions == 1
    again = await _run(host, {**body, "runId": "r3"}, frozenset())
    assert again.error_code is None
    assert "TEXT_MESSAGE_CONTENT" not in again.types
    assert agent.runs_with_decisions == 1
