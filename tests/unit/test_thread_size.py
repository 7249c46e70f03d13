"""``PAUSEMESH_MAX_THREAD_BYTES`` in the run host: what a run may add to a thread, and the runs
a thread at its bound still takes (``agui/run/thread_size.py``). The same host runs behind both
web bindings; ``tests/e2e/test_thread_size_limit.py`` drives it through real servers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec

from pausemesh.agui.agent import AgentOutput, PauseRequest, RunContext
from pausemesh.agui.events import (
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    UserMessage,
)
from pausemesh.agui.input import convert_run_input
from pausemesh.agui.run import RunHost
from pausemesh.core import ContinuationService, KeyedTokenIssuer, ManualClock
from pausemesh.core.threads import ThreadRecord
from pausemesh.stores.memory import InMemoryEventStore, InMemoryThreadStore
from tests.support.agui import RunResult, StreamChecker, read_frames

LIMIT = 4_000


async def asking(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """Pauses when the last user message is "ask" (a tool call's question), else says ok."""
    last = next((m for m in reversed(ctx.messages) if isinstance(m, UserMessage)), None)
    if last is not None and last.content == "ask" and not ctx.decisions:
        yield PauseRequest(message="Go on?", tool_call_id="call-1")
        return
    yield TextMessageStartEvent(message_id=f"a-{ctx.run_id}", role="assistant")
    yield TextMessageContentEvent(message_id=f"a-{ctx.run_id}", delta="ok")
    yield TextMessageEndEvent(message_id=f"a-{ctx.run_id}")


def _host(threads: InMemoryThreadStore, limit: int = LIMIT) -> RunHost:
    clock = ManualClock()
    service = ContinuationService(
        store=InMemoryEventStore(),
        clock=clock,
        keyed_issuer=KeyedTokenIssuer({"k1": b"k" * 32}, "k1"),
    )
    return RunHost(
        agent=asking,
        service=service,
        threads=threads,
        clock=clock,
        keepalive_seconds=10,
        max_thread_bytes=limit,
    )


async def _run(host: RunHost, run_id: str, **fields: Any) -> RunResult:
    body = {"threadId": "t1", "runId": run_id, "messages": [], **fields}
    chunks = [c async for c in host.run(convert_run_input(body), None)]
    lines = b"".join(chunks).decode().split("\n")
    return RunResult(list(read_frames(iter(lines), StreamChecker())))


def _user(message_id: str, text: str) -> list[dict[str, str]]:
    return [{"id": message_id, "role": "user", "content": text}]


def _too_large(result: RunResult) -> bool:
    """Refused before the run started: a lone RUN_ERROR."""
    return result.types == ["RUN_ERROR"] and result.error_code == "THREAD_TOO_LARGE"


async def _stored(threads: InMemoryThreadStore) -> ThreadRecord:
    record = await threads.get("t1")
    assert record is not None
    return record


async def _near_the_limit(host: RunHost, threads: InMemoryThreadStore) -> None:
    """Two runs of 1,500-character messages: about 3,100 of the 4,000 bytes."""
    for n in (1, 2):
        assert not _too_large(await _run(host, f"r{n}", messages=_user(f"u{n}", "x" * 1_500)))
    assert 3_000 < (await _stored(threads)).stored_bytes < LIMIT - 500


async def test_a_run_whose_message_would_pass_the_limit_is_refused_and_stores_nothing() -> None:
    threads = InMemoryThreadStore()
    host = _host(threads)
    await _near_the_limit(host, threads)
    before = await _stored(threads)

    result = await _run(host, "r3", messages=_user("u3", "y" * 1_000))

    assert _too_large(result)
    assert "4000 bytes per thread" in result.last["message"]
    after = await _stored(threads)
    # No RUN_STARTED logged, no message kept, the lease given back.
    assert (after.version, after.last_sequence, after.messages) == (
        before.version,
        before.last_sequence,
        before.messages,
    )
    assert after.lease is None
    # A message that fits still goes through.
    assert not _too_large(await _run(host, "r4", messages=_user("u4", "small")))


async def test_a_first_run_too_large_for_any_thread_creates_none() -> None:
    threads = InMemoryThreadStore()
    host = _host(threads)

    result = await _run(host, "r1", messages=_user("u1", "z" * 5_000))

    assert _too_large(result)
    assert await threads.get("t1") is None


async def test_the_input_state_of_a_first_run_counts() -> None:
    threads = InMemoryThreadStore()

    result = await _run(_host(threads), "r1", state={"doc": "s" * 5_000})

    assert _too_large(result)
    assert await threads.get("t1") is None


async def test_a_pending_question_is_still_answered_once_the_thread_is_at_its_limit() -> None:
    threads = InMemoryThreadStore()
    host = _host(threads)
    await _near_the_limit(host, threads)
    asked = await _run(host, "r3", messages=_user("u3", "ask"))
    (interrupt,) = asked.interrupts
    # Anything new is refused now: the thread is full.
    assert _too_large(await _run(host, "r4", messages=_user("u4", "w" * 1_000)))

    # The answer adds no message (CopilotKit's own tool message for the interrupted call is
    # dropped, not stored): it goes through.
    answered = await _run(
        host,
        "r5",
        messages=[{"id": "tool-1", "role": "tool", "toolCallId": "call-1", "content": "yes"}],
        resume=[{"interruptId": interrupt["id"], "status": "resolved", "payload": {"ok": True}}],
    )

    assert answered.last["type"] == "RUN_FINISHED"
    record = await _stored(threads)
    assert record.open_receipt is None
    assert not any(m.get("role") == "tool" for m in record.messages)


async def test_an_answer_adding_a_message_past_the_limit_is_refused_and_the_question_stays() -> (
    None
):
    threads = InMemoryThreadStore()
    host = _host(threads)
    await _near_the_limit(host, threads)
    (interrupt,) = (await _run(host, "r3", messages=_user("u3", "ask"))).interrupts
    resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"ok": True}}]

    refused = await _run(host, "r4", messages=_user("u4", "v" * 1_000), resume=resume)

    assert _too_large(refused)
    assert "answer the open question without new messages" in refused.last["message"]
    assert (await _stored(threads)).open_receipt is not None
    answered = await _run(host, "r5", resume=resume)
    assert answered.last["type"] == "RUN_FINISHED"


async def test_a_thread_past_its_limit_takes_no_run_that_answers_nothing() -> None:
    """The agent's own output may take a thread past the bound (it is not known in advance);
    from then on even a run that adds nothing is refused unless it answers a question."""
    threads = InMemoryThreadStore()
    host = _host(threads, limit=3_200)
    await _near_the_limit(host, threads)
    record = await _stored(threads)
    filler = {"id": "agent-text", "role": "assistant", "content": "o" * 500}
    await threads.save(
        msgspec.structs.replace(record, messages=[*record.messages, filler]), now=record.updated_at
    )
    assert (await _stored(threads)).stored_bytes > 3_200

    assert _too_large(await _run(host, "r3"))
