"""The AG-UI run host (docs/agui.md, "One run"): runs the host's agent on durable threads.

``RunHost`` holds what every run shares (agent, service, thread store, limits) and the reads
that need no lease: a thread's snapshot, ``/connect`` and the replay-then-tail stream. A run
takes the thread's lease and hands over to ``LeasedRun`` (``run/leased.py``), which goes
through the phases: the resume (``run/resume_phase.py``), the agent pump (``run/pump.py``) and
the finish with its pauses (``run/finish.py``).

Double texting (``agui/double_texting.py``): an input that meets a busy thread is refused
(``reject``) or waits in the thread's queue (``run/queued.py``); whenever a run of this host
gives a thread back, what waits on it runs next.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncGenerator
from datetime import timedelta
from typing import Final

import msgspec
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from pausemesh.agui.agent import Agent
from pausemesh.agui.double_texting import DoubleTexting, requested_policy
from pausemesh.agui.events import Interrupt
from pausemesh.agui.input import RunAgentInput
from pausemesh.agui.run.expiry import close_lapsed, closing_lapsed, has_lapsed
from pausemesh.agui.run.leased import LeasedRun
from pausemesh.agui.run.parts import RunParts
from pausemesh.agui.run.queued import QueuedInputs
from pausemesh.agui.run.snapshots import (
    DEFAULT_SNAPSHOT_MESSAGES,
    MessagePage,
    check_message_limit,
    decode_message_cursor,
    each,
    message_chunks,
    message_page,
    open_interrupts,
    restored_frames,
)
from pausemesh.agui.run.tail_reads import SharedReads
from pausemesh.agui.run.thread_size import DEFAULT_MAX_THREAD_BYTES, check_growth
from pausemesh.agui.run_error import AguiRunError
from pausemesh.agui.sse import KEEPALIVE_FRAME, encode_frame
from pausemesh.core.drain import Drain
from pausemesh.core.errors import PauseMeshError, ThreadBusyError, ThreadNotFoundError
from pausemesh.core.instance import new_holder
from pausemesh.core.keepalive import KeepAlive
from pausemesh.core.large_json import CHUNK_BYTES
from pausemesh.core.leases import LeaseKeeper
from pausemesh.core.operations import OperationLedger
from pausemesh.core.ports import Clock
from pausemesh.core.run_queue import DEFAULT_QUEUE_LIMIT, RunQueue
from pausemesh.core.schema import SchemaValidatorCache
from pausemesh.core.service import ContinuationService
from pausemesh.core.threads import DEFAULT_LEASE_SECONDS, ThreadRecord, ThreadStore
from pausemesh.observability.telemetry import (
    RUNS_FINISHED,
    RUNS_STARTED,
    TAIL_DELIVERY_LAG_SECONDS,
    THREAD_BUSY,
    count,
    observe,
    tracer,
)

__all__ = ("RunHost",)

_ENCODE_MESSAGES: Final = msgspec.json.encode

_TAIL_PAGE = 500
# How long a run waits for a close of lapsed questions that holds its thread (at most 1 s).
_CLOSE_WAITS = 50
_CLOSE_WAIT_SECONDS = 0.02


class RunHost:
    """Runs one agent on durable threads; the routes turn its frame generators into SSE."""

    def __init__(
        self,
        *,
        agent: Agent,
        service: ContinuationService,
        threads: ThreadStore,
        operations: OperationLedger | None = None,
        schemas: SchemaValidatorCache | None = None,
        clock: Clock | None = None,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        keepalive_seconds: float = 15.0,
        queue_size: int = 256,
        lease_holder: str | None = None,
        leases: LeaseKeeper | None = None,
        run_timeout_seconds: float | None = None,
        drain: Drain | None = None,
        max_thread_bytes: int = DEFAULT_MAX_THREAD_BYTES,
        snapshot_messages: int = DEFAULT_SNAPSHOT_MESSAGES,
        double_texting: DoubleTexting = "reject",
        run_queue: RunQueue | None = None,
        queue_limit: int = DEFAULT_QUEUE_LIMIT,
    ) -> None:
        self.agent = agent
        self.service = service
        self.threads = threads
        self.operations = operations
        self.schemas = schemas or SchemaValidatorCache()
        self.clock: Clock = clock or service.clock
        if min(keepalive_seconds, lease_seconds, max_thread_bytes, snapshot_messages) <= 0:
            msg = (
                "keepalive_seconds, lease_seconds, max_thread_bytes and snapshot_messages must"
                " be positive"
            )
            raise ValueError(msg)
        # The process's keeper (``Runtime.leases``: the expiry sweep and A2A follow-ups hold
        # their leases through it too). A host built without one (tests, embedding) gets a
        # keeper and a holder of its own; it only lacks a predecessor to free at start-up.
        self.leases = leases or LeaseKeeper(
            threads,
            clock=self.clock,
            ttl=timedelta(seconds=lease_seconds),
            holder=lease_holder or new_holder(f"runhost-{uuid.uuid4().hex[:8]}"),
        )
        self.keepalive_seconds = keepalive_seconds
        self.queue_size = queue_size
        # None: an agent may run as long as it likes (embedders who bound runs themselves).
        self.run_timeout_seconds = run_timeout_seconds
        # The process's shutdown: tails end at once, runs get its grace (None: never drains).
        self.drain = drain
        # What a run's input may grow a thread's stored record to (``run/thread_size.py``).
        self.max_thread_bytes = max_thread_bytes
        # How many of the newest messages a reload carries (``/connect``, the snapshot).
        self.snapshot_messages = snapshot_messages
        if drain is not None:
            drain.watch(threads.stop_waiting)
        self._reads = SharedReads(threads, page=_TAIL_PAGE)
        # What an input that meets a busy thread gets when it does not choose
        # (``forwardedProps.pausemesh.doubleTexting``), and where it waits.
        self.double_texting: DoubleTexting = double_texting
        self.queued = QueuedInputs(
            queue=run_queue if run_queue is not None else _process_queue(),
            threads=threads,
            leases=self.leases,
            clock=self.clock,
            limit=queue_limit,
            keepalive_seconds=keepalive_seconds,
            drain=drain,
            make_run=self.lease_run,
        )

    # -- reads ----------------------------------------------------------------------------

    async def _current(self, thread_id: str, tail: int | None) -> ThreadRecord | None:
        """The record with its last ``tail`` messages, with an open cohort whose deadlines all
        passed closed first (so no read shows a lapsed question as pending, even between two
        sweeps)."""
        record = await self.threads.get(thread_id, tail=tail)
        if record is not None and has_lapsed(record, self.clock.now()):
            await close_lapsed(self.leases, self.service, thread_id, clock=self.clock)
            record = await self.threads.get(thread_id, tail=tail)
        return record

    async def load(
        self, thread_id: str, principal: str | None, *, tail: int | None = 0
    ) -> ThreadRecord:
        """The thread as ``principal`` may see it, with its last ``tail`` messages (None: all);
        ``ThreadNotFoundError`` otherwise."""
        record = await self._current(thread_id, tail)
        if record is None or record.owner != principal:
            raise ThreadNotFoundError(thread_id)
        return record

    async def snapshot(self, thread_id: str, principal: str | None) -> ThreadRecord:
        """What ``GET /agui/threads/{id}`` shows: the record with its newest page of messages
        (``snapshot_messages``; ``messages_from`` says where older ones start)."""
        return await self.load(thread_id, principal, tail=self.snapshot_messages)

    async def messages(
        self, thread_id: str, principal: str | None, *, before: str | None, limit: int
    ) -> MessagePage:
        """``GET /agui/threads/{id}/messages``: ``limit`` messages before the ``before`` cursor
        (None: the newest), newest first; 404 for a thread the caller may not see or that was
        erased, ``INVALID_CURSOR``/``INVALID_LIMIT`` for a bad query."""
        limit = check_message_limit(limit)
        position = None if before is None else decode_message_cursor(before)
        await self.load(thread_id, principal)
        rows = await self.threads.read_messages(thread_id, before=position, limit=limit)
        return message_page(thread_id, rows)

    async def check_access(self, thread_id: str, principal: str | None) -> None:
        """Refuse (before any stream starts) a thread that belongs to someone else."""
        record = await self.threads.get(thread_id, tail=0, state=False)
        if record is not None and record.owner != principal:
            raise ThreadNotFoundError(thread_id)

    async def connect(
        self, run_input: RunAgentInput, principal: str | None
    ) -> AsyncGenerator[bytes, None]:
        """Restore a thread without running the agent: RUN_STARTED, snapshots, RUN_FINISHED.

        An unknown thread (or one of another principal, which looks the same) echoes the
        client's own messages and state, so a first visit loses nothing.
        """
        record = await self._current(run_input.thread_id, self.snapshot_messages)
        if record is None or record.owner != principal:
            messages = [_ENCODE_MESSAGES(list(run_input.messages))]
            state = run_input.state
            interrupts: list[Interrupt] = []
        else:
            messages = await message_chunks(record.messages)
            state = record.state
            interrupts = open_interrupts(record)
        frames = restored_frames(run_input.thread_id, run_input.run_id, messages, state, interrupts)
        # A long thread's snapshot goes out in pieces, each write its own turn of the loop.
        if sum(len(f) for f in frames) <= CHUNK_BYTES:
            yield b"".join(frames)
        else:
            async for piece in each(frames):
                yield piece

    async def tail(
        self, thread_id: str, *, after_sequence: int, keep_alive: KeepAlive | None = None
    ) -> AsyncGenerator[bytes, None]:
        """The thread log after ``after_sequence``, then live events as they are appended.

        The tails of one thread in this process share each read of its log (``tail_reads``).
        ``keep_alive``: the response's writer of one keep-alive (``core.keepalive``), passed
        down with each wait so an idle tail's keep-alives go out without waking this task.
        When the process drains, the tail ends after its last whole frame: the client
        reconnects (to another replica) with ``Last-Event-ID`` and misses nothing.
        """
        after = after_sequence
        woke_at: float | None = None
        while self.drain is None or not self.drain.draining:
            batch = await self._reads.after(thread_id, after)
            if batch is not None:
                yield batch.frames
                if woke_at is not None:
                    # The generator resumes once the response has sent the frames.
                    observe(TAIL_DELIVERY_LAG_SECONDS, time.monotonic() - woke_at)
                    woke_at = None
                after = batch.last
                if batch.full:
                    continue  # more pages of a replay
            # Caught up (the wait reads the head before it waits, so nothing slips by).
            # Idle: a keep-alive each interval; the log is read again only once woken.
            while not (woke := await self._wait_for_events(thread_id, after, keep_alive)):
                if woke is None:
                    return  # the process drains: end after the last whole frame
                yield KEEPALIVE_FRAME
            woke_at = time.monotonic()

    async def _wait_for_events(
        self, thread_id: str, after: int, keep_alive: KeepAlive | None
    ) -> bool | None:
        """Whether events came within a keep-alive period; None once the drain began.

        Awaited in the tail's own task (no task per wait: an idle tail's keep-alive is the
        hot path); the drain ends the wait through ``ThreadStore.stop_waiting``.
        """
        if self.drain is not None and self.drain.draining:
            return None
        woke = await self.threads.wait_for_events(
            thread_id,
            after_sequence=after,
            wait_seconds=self.keepalive_seconds,
            keep_alive=keep_alive,
        )
        if self.drain is not None and self.drain.draining:
            return None
        return woke

    # -- runs -----------------------------------------------------------------------------

    async def _acquire(self, thread_id: str, lease_id: str, run_id: str) -> ThreadRecord:
        """The thread's lease for a run. While the expiry sweep (or a read) closes lapsed
        questions it holds the lease for a few writes: an answer that arrives then waits for
        that close and meets its outcome (``PAUSEMESH_AGUI_RESUME_EXPIRED``) instead of
        ``THREAD_BUSY``. Any other holder is ``THREAD_BUSY`` at once."""
        for _ in range(_CLOSE_WAITS):
            try:
                return await self.leases.acquire(
                    thread_id, lease_id=lease_id, run_id=run_id, now=self.clock.now()
                )
            except ThreadBusyError:
                if not closing_lapsed(await self.threads.get(thread_id, tail=0, state=False)):
                    raise
            await asyncio.sleep(_CLOSE_WAIT_SECONDS)
        raise ThreadBusyError(thread_id)

    async def _refused(
        self,
        error: PauseMeshError,
        run_input: RunAgentInput,
        principal: str | None,
        roles: frozenset[str],
        policy: DoubleTexting,
    ) -> AsyncGenerator[bytes, None]:
        """A run that could not take its thread: a busy one's input waits in line unless the
        policy rejects it (``THREAD_BUSY``); any other refusal is its ``RUN_ERROR``."""
        if error.code == "THREAD_BUSY" and policy != "reject":
            async with contextlib.aclosing(
                self.queued.wait_in_line(run_input, principal, roles, policy)
            ) as waiting:
                async for frame in waiting:
                    yield frame
            return
        if error.code == "THREAD_BUSY":
            count(THREAD_BUSY)
        yield encode_frame(AguiRunError.from_error(error).to_event())

    async def _take(self, thread_id: str, lease_id: str, run_id: str) -> ThreadRecord:
        """The thread's lease for a run (``_acquire``), unless inputs wait on the thread
        that this one must not overtake (``THREAD_BUSY``: the policy decides what then)."""
        record = await self._acquire(thread_id, lease_id, run_id)
        if await self.queued.ahead(record):
            await self.leases.release(thread_id, lease_id)
            self.queued.kick(thread_id)
            raise ThreadBusyError(thread_id)
        return record

    def lease_run(
        self,
        record: ThreadRecord,
        run_input: RunAgentInput,
        principal: str | None,
        lease_id: str,
        *,
        roles: frozenset[str],
    ) -> LeasedRun:
        """The run that goes on under ``lease_id``, just taken; from now on a lost lease stops
        it at once (its agent, its writes)."""
        parts = RunParts(
            agent=self.agent,
            service=self.service,
            threads=self.threads,
            leases=self.leases,
            clock=self.clock,
            schemas=self.schemas,
            operations=self.operations,
            drain=self.drain,
            keepalive_seconds=self.keepalive_seconds,
            queue_size=self.queue_size,
            run_timeout_seconds=self.run_timeout_seconds,
            max_thread_bytes=self.max_thread_bytes,
            snapshot_messages=self.snapshot_messages,
        )
        run = LeasedRun(parts, record, run_input, principal, lease_id, roles=roles)
        self.leases.hold(
            run_input.thread_id, lease_id, on_lost=run.lease.lose, on_interrupt=run.lease.interrupt
        )
        return run

    async def run(
        self,
        run_input: RunAgentInput,
        principal: str | None,
        *,
        roles: frozenset[str] = frozenset(),
    ) -> AsyncGenerator[bytes, None]:
        """SSE frames for one run of the agent on ``run_input.thread_id``.

        ``roles``: what the resolver said the principal holds; the agent sees them as
        ``ctx.roles`` (the thread itself belongs to the principal alone)."""
        thread_id = run_input.thread_id
        policy = requested_policy(run_input) or self.double_texting
        lease_id = self.leases.new_lease_id()
        now = self.clock.now()
        try:
            record = await self.threads.get(thread_id, tail=0, state=False)
            if record is None:
                # A first run too large for any thread creates none (a thread's later runs are
                # checked under the lease, ``LeasedRun``).
                check_growth(
                    0,
                    [msgspec.to_builtins(m) for m in run_input.messages],
                    run_input.state,
                    self.max_thread_bytes,
                    first_run=True,
                    answers_cohort=False,
                )
                record = await self.threads.create_or_load(thread_id, owner=principal, now=now)
            if record.owner != principal:
                raise ThreadNotFoundError(thread_id)
            record = await self._take(thread_id, lease_id, run_input.run_id)
        except PauseMeshError as error:
            async with contextlib.aclosing(
                self._refused(error, run_input, principal, roles, policy)
            ) as refused:
                async for frame in refused:
                    yield frame
            return
        run = self.lease_run(record, run_input, principal, lease_id, roles=roles)
        count(RUNS_STARTED)
        # The run's span is made current only while the run works (between two frames), never
        # across a ``yield``: the consumer of this generator keeps its own context.
        run_span = tracer().start_span(
            "agui.run",
            attributes={"pausemesh.thread_id": thread_id, "pausemesh.run_id": run_input.run_id},
        )
        try:
            # aclosing: a client that goes away closes the inner generators now, not at GC.
            async with contextlib.aclosing(run.frames()) as frames:
                while True:
                    with trace.use_span(
                        run_span,
                        end_on_exit=False,
                        record_exception=False,
                        set_status_on_exception=False,
                    ):
                        chunk = await anext(frames, None)
                    if chunk is None:
                        break
                    if len(chunk) <= CHUNK_BYTES:
                        yield chunk
                        continue
                    # A frame of megabytes (a long thread's snapshot at a pause) is written
                    # a piece at a time, each its own turn of the loop.
                    pieces = (
                        chunk[at : at + CHUNK_BYTES] for at in range(0, len(chunk), CHUNK_BYTES)
                    )
                    async for piece in each(pieces):
                        yield piece
        finally:
            outcome = run.outcome or "cancelled"
            count(RUNS_FINISHED, outcome)
            if run.error_code == "THREAD_BUSY":
                count(THREAD_BUSY)
            run_span.set_attribute("pausemesh.outcome", outcome)
            if run.error_code is not None:
                run_span.set_attribute("pausemesh.code", run.error_code)
                run_span.set_status(Status(StatusCode.ERROR))
            run_span.end()
            # Runs even when the client went away and the scope is cancelled.
            await run.lease.release()
            # What waits on the thread runs next (on whichever process takes its lease).
            self.queued.kick(thread_id)

    async def close(self) -> None:
        """Stop this host's background runs of queued inputs (they stay queued)."""
        await self.queued.close()


def _process_queue() -> RunQueue:
    # Storage without a run queue (a host's own stores): inputs wait in this process only.
    from pausemesh.stores.memory.run_queue import InMemoryRunQueue  # noqa: PLC0415

    return InMemoryRunQueue()
