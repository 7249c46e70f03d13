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
