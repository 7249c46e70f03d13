"""Double texting in-process (memory stores): the host's own policy (``RunHost(double_texting=)``,
what ``PAUSEMESH_DOUBLE_TEXTING`` sets) and a request's choice over it. Real server processes
on SQLite and PostgreSQL: tests/e2e/test_agui_double_texting.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from pausemesh.agui.agent import AgentOutput, RunContext
from pausemesh.agui.double_texting import requested_policy
from pausemesh.agui.events import (
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from pausemesh.agui.input import convert_run_input
from pausemesh.agui.messages import UserMessage
from pausemesh.agui.run import RunHost
from pausemesh.core import ContinuationService, KeyedTokenIssuer, ManualClock
from pausemesh.core.errors import InvalidInputError
from pausemesh.core.run_queue import QueuedInput
from pausemesh.stores.memory import InMemoryEventStore, InMemoryThreadStore
from pausemesh.stores.memory.run_queue import InMemoryRunQueue
from tests.support.agui import RunResult, StreamChecker, read_frames


class Held:
    """An agent whose ``hold`` runs wait for ``release``; anything else is echoed."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.holding = asyncio.Event()

    async def __call__(self, ctx: RunContext) -> AsyncIterator[AgentOutput]:
        last = ctx.messages[-1]
        text = last.content if isinstance(last, UserMessage) else ""
        yield TextMessageStartEvent(message_id=f"a-{ctx.run_id}", role="assistant")
        if text == "hold":
            self.holding.set()
            await self.release.wait()
        yield TextMessageContentEvent(message_id=f"a-{ctx.run_id}", delta=f"echo {text}")
        yield TextMessageEndEvent(message_id=f"a-{ctx.run_id}")


class Watched(InMemoryRunQueue):
    """The in-memory queue, telling when an input was queued."""

    def __init__(self) -> None:
        super().__init__()
        self.queued = asyncio.Event()

    async def enqueue(self, entry: QueuedInput, *, limit: int) -> QueuedInput | None:
        stored = await super().enqueue(entry, limit=limit)
        self.queued.set()
        return stored


def _host(agent: Held, policy: Any, queue: Watched | None = None) -> RunHost:
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
        clock=clock,
        keepalive_seconds=10,
        double_texting=policy,
        run_queue=queue,
    )


def _replica_beside(a: RunHost, queue: Watched) -> RunHost:
    """A second replica of ``a`` (enqueue policy): its agent, stores and clock, one queue."""
    return RunHost(
        agent=a.agent,
        service=a.service,
        threads=a.threads,
        clock=a.clock,
        keepalive_seconds=10,
        double_texting="enqueue",
        run_queue=queue,
    )


def _body(run_id: str, text: str, policy: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "threadId": "t1",
        "runId": run_id,
        "messages": [{"id": f"u-{run_id}", "role": "user", "content": text}],
    }
    if policy is not None:
        body["forwardedProps"] = {"pausemesh": {"doubleTexting": policy}, "other": 1}
    return body


async def _run(host: RunHost, body: dict[str, Any]) -> RunResult:
    chunks = [c async for c in host.run(convert_run_input(body), None)]
    lines = b"".join(chunks).decode().split("\n")
    return RunResult(list(read_frames(iter(lines), StreamChecker())))


async def test_the_hosts_policy_applies_when_the_request_does_not_choose() -> None:
    agent = Held()
    queue = Watched()
    host = _host(agent, "enqueue", queue)
    held = asyncio.create_task(_run(host, _body("r1", "hold")))
    await agent.holding.wait()
    waiting = asyncio.create_task(_run(host, _body("r2", "next")))
    await queue.queued.wait()
    agent.release.set()
    assert (await held).text() == "echo hold"
    assert (await waiting).text() == "echo next"
    await host.close()


async def test_a_request_chooses_over_the_hosts_policy() -> None:
    agent = Held()
    host = _host(agent, "interrupt")
    held = asyncio.create_task(_run(host, _body("r1", "hold")))
    await agent.holding.wait()
    refused = await _run(host, _body("r2", "no", "reject"))
    assert refused.error_code == "THREAD_BUSY"
    agent.release.set()
    assert (await held).last["type"] == "RUN_FINISHED"
    await host.close()


def test_the_requested_policy_is_read_from_forwarded_props_and_checked() -> None:
    assert requested_policy(convert_run_input(_body("r", "x"))) is None
    assert requested_policy(convert_run_input(_body("r", "x", "rollback"))) == "rollback"
    plain = convert_run_input({**_body("r", "x"), "forwardedProps": {"pausemesh": {}}})
    assert requested_policy(plain) is None
    with pytest.raises(InvalidInputError) as refused:
        requested_policy(convert_run_input(_body("r", "x", "later")))
    assert refused.value.code == "INVALID_DOUBLE_TEXTING"


async def test_an_input_waiting_on_a_thread_that_is_erased_ends_with_its_refusal() -> None:
    agent = Held()
    queue = Watched()
    host = _host(agent, "enqueue", queue)
    held = asyncio.create_task(_run(host, _body("r1", "hold")))
    await agent.holding.wait()
    waiting = asyncio.create_task(_run(host, _body("r2", "next")))
    await queue.queued.wait()
    await host.threads.erase("t1", now=host.clock.now())
    agent.release.set()
    await held
    dropped = await waiting
    assert dropped.types == ["RUN_ERROR"]
    assert dropped.error_code == "PAUSEMESH_AGUI_QUEUED_INPUT_DROPPED"
    assert await queue.head("t1") is None
    await host.close()


class HeldRemove(Watched):
    """The queue of two replicas, whose first ``remove`` after ``hold_next_remove`` waits for
    ``go_on``: the moment after a run's last write gave the thread back and before its entry
    is taken off, when another replica may take the thread."""

    def __init__(self) -> None:
        super().__init__()
        self.removing = asyncio.Event()
        self.go_on = asyncio.Event()
        self._hold = False

    def hold_next_remove(self) -> None:
        self._hold = True

    async def remove(self, thread_id: str, entry_id: str) -> None:
        if self._hold:
            self._hold = False
            self.removing.set()
            await self.go_on.wait()
        await super().remove(thread_id, entry_id)


async def test_a_drain_that_finds_the_head_already_run_gives_the_thread_back_for_the_next() -> None:
    """Replica A's queued run has ended (its last write freed the thread) but is not off the
    queue yet when replica B's drain takes the thread: B finds that run in the log, takes its
    entry off and must free the thread again, or the next input waits for ever (B's keeper
    renewed the lease it forgot; every later drain found the thread busy)."""
    agent = Held()
    queue = HeldRemove()
    a = _host(agent, "enqueue", queue)
    b = _replica_beside(a, queue)
    held = asyncio.create_task(_run(a, _body("r1", "hold")))
    await agent.holding.wait()
    one = asyncio.create_task(_run(b, _body("r2", "one")))
    await queue.queued.wait()
    queue.queued.clear()
    two = asyncio.create_task(_run(a, _body("r3", "two")))
    await queue.queued.wait()
    queue.hold_next_remove()
    agent.release.set()
    assert (await held).text() == "echo hold"
    # A ran "one" (its held run's end kicked A's drain) and waits to take it off.
    await queue.removing.wait()
    assert (await one).text() == "echo one"

    await b.queued.drain("t1")

    record = await a.threads.get("t1", tail=0)
    assert record is not None
    assert record.lease is None  # nothing holds the thread once B's drain is done
    assert await queue.head("t1") is None  # and B ran "two"
    queue.go_on.set()
    assert (await two).text() == "echo two"
    await a.close()
    await b.close()


class EmptiedWhileLooking(Watched):
    """A queue whose second look after ``empty_on_second_look`` (a drain's look under the
    lease it took on the first) first takes ``entry_id`` off (as the replica that ran it would),
    finds the queue empty, then waits for ``go_on`` before it answers: the drain that looks
    holds the thread's lease meanwhile."""

    def __init__(self) -> None:
        super().__init__()
        self.looked = asyncio.Event()
        self.go_on = asyncio.Event()
        self._empty: str | None = None
        self._looks = 0

    def empty_on_second_look(self, entry_id: str) -> None:
        self._empty = entry_id
        self._looks = 0

    async def head(self, thread_id: str) -> QueuedInput | None:
        self._looks += 1
        if self._empty is None or self._looks < 2:
            return await super().head(thread_id)
        await super().remove(thread_id, self._empty)
        self._empty = None
        found = await super().head(thread_id)
        self.looked.set()
        await self.go_on.wait()
        return found


async def test_an_input_queued_while_a_drain_holds_the_thread_for_nothing_is_run_by_that_drain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Replica B's drain takes the thread for an entry another replica has just run and finds
    the queue empty; an input queued on replica A meanwhile finds the thread busy (A's drain
    ends at once). B gives the thread back and looks again: it runs that input, which would
    otherwise wait for a sweep."""
    agent = Held()
    queue = EmptiedWhileLooking()
    a = _host(agent, "enqueue", queue)
    b = _replica_beside(a, queue)
    a_drained = asyncio.Event()
    a_drain = a.queued.drain

    async def drain_and_tell(thread_id: str) -> None:
        await a_drain(thread_id)
        a_drained.set()

    monkeypatch.setattr(a.queued, "drain", drain_and_tell)
    assert (await _run(a, _body("r1", "first"))).text() == "echo first"
    await a_drained.wait()  # the drain its end started found nothing
    a_drained.clear()
    done_elsewhere = QueuedInput(
        entry_id="e-elsewhere",
        thread_id="t1",
        kind="enqueue",
        run_id="r-elsewhere",
        input_json="{}",
        principal=None,
        roles=(),
        message_ids=(),
        after_sequence=0,
        queued_at=a.clock.now(),
    )
    await queue.enqueue(done_elsewhere, limit=16)
    queue.queued.clear()
    queue.empty_on_second_look("e-elsewhere")
    # B's outer look sees the entry; its look under the lease finds the queue empty.
    b_drain = asyncio.create_task(b.queued.drain("t1"))
    await queue.looked.wait()
    waiting = asyncio.create_task(_run(a, _body("r2", "next")))
    await queue.queued.wait()
    await a_drained.wait()  # A's drain met B's lease and ended
    assert await queue.head("t1") is not None
    queue.go_on.set()
    await b_drain

    assert await queue.head("t1") is None  # B ran it before its drain ended
    assert (await waiting).text() == "echo next"
    await a.close()
    await b.close()
