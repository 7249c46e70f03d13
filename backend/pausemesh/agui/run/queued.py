"""Double texting on the run host: inputs that wait for a busy thread, and who runs them.

``QueuedInputs.wait_in_line`` keeps an input that met a busy thread in the thread's durable
queue (``core/run_queue.py``; an interrupting one also tells this process's holder at once,
other replicas' holders hear it at their next lease renewal) and streams the input's run to
its client when it comes, from the thread log (the run may happen on any replica).

``QueuedInputs.drain`` runs what waits: it takes the thread's lease, runs the head entry as a
run of its sender (their principal and roles) through ``LeasedRun``, takes the entry off the
queue once its run ended, and goes on with the next. It is started whenever a run of this
process gives the thread back (``kick``), by the replica that queued an input, and by every
replica's sweeper (``sweep``), so an input queued on a replica that died still runs.

Exactly once: an entry leaves the queue only after its run's last event is in the log; a
process killed before that leaves it queued, and the next drain looks in the log first: a run
that already ended is not made again. A run killed before its end is made again (as an owed
run is), its side effects under the operation ledger.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncGenerator
from typing import Protocol

import msgspec
from msgspec import UNSET

from pausemesh.agui.double_texting import (
    NOT_QUEUEABLE,
    QUEUE_FULL,
    QUEUED_INPUT_DROPPED,
    DoubleTexting,
)
from pausemesh.agui.input import RunAgentInput
from pausemesh.agui.run.leased import LeasedRun
from pausemesh.agui.run_error import AguiRunError
from pausemesh.agui.sse import KEEPALIVE_FRAME, encode_frame
from pausemesh.core.drain import Drain
from pausemesh.core.errors import PauseMeshError, ThreadBusyError, ThreadNotFoundError
from pausemesh.core.leases import LeaseKeeper
from pausemesh.core.ports import Clock
from pausemesh.core.run_queue import (
    INTERRUPTING,
    QueuedInput,
    QueueKind,
    QueueSignal,
    RunQueue,
)
from pausemesh.core.threads import ThreadLogEntry, ThreadRecord, ThreadStore

__all__ = ("MakeRun", "QueuedInputs")

_log = logging.getLogger("pausemesh.agui")
_PAGE = 500
# A run that ends so leaves its input queued: another process runs it.
_NOT_ENDED = frozenset(("SERVER_SHUTTING_DOWN", "LEASE_LOST"))
_SWEEP_BATCH = 100
_KINDS: dict[str, QueueKind] = {
    "enqueue": "enqueue",
    "interrupt": "interrupt",
    "rollback": "rollback",
}


def _dropped() -> bytes:
    msg = "The thread was erased before the queued input ran"
    return encode_frame(AguiRunError(QUEUED_INPUT_DROPPED, msg).to_event())


class MakeRun(Protocol):
    """``RunHost.lease_run``: the leased run of ``run_input`` under a lease just taken."""

    def __call__(
        self,
        record: ThreadRecord,
        run_input: RunAgentInput,
        principal: str | None,
        lease_id: str,
        *,
        roles: frozenset[str],
    ) -> LeasedRun: ...


class _Logged(msgspec.Struct):
    type: str


_LOGGED = msgspec.json.Decoder(_Logged)


def _ends(entry: ThreadLogEntry) -> bool:
    return _LOGGED.decode(entry.event_json).type in ("RUN_FINISHED", "RUN_ERROR")


class QueuedInputs:
    """A run host's queued inputs: queued by ``wait_in_line``, run by ``drain``."""

    def __init__(
        self,
        *,
        queue: RunQueue,
        threads: ThreadStore,
        leases: LeaseKeeper,
        clock: Clock,
        limit: int,
        keepalive_seconds: float,
        drain: Drain | None,
        make_run: MakeRun,
    ) -> None:
        self.queue = queue
        self.threads = threads
        self.leases = leases
        self.clock = clock
        self.limit = limit
        self.keepalive_seconds = keepalive_seconds
        self.shutdown = drain
        self._make_run = make_run
        self._tasks: set[asyncio.Task[None]] = set()
        self._draining: set[str] = set()
        self._again: set[str] = set()
        leases.watch_queue(queue)

    # -- the queue's side of a busy thread ------------------------------------------------

    async def ahead(self, record: ThreadRecord) -> bool:
        """Whether inputs wait on the thread that a new input must not overtake: any, unless a
        question is open (only its answer can run then, and it goes first)."""
        if record.open_receipt is not None:
            return False
        return await self.queue.head(record.thread_id) is not None

    async def wait_in_line(
        self,
        run_input: RunAgentInput,
        principal: str | None,
        roles: frozenset[str],
        policy: DoubleTexting,
    ) -> AsyncGenerator[bytes, None]:
        """Queue ``run_input`` on its busy thread under ``policy`` (not ``reject``), then
        stream its run from the thread log when it comes."""
        try:
            async with contextlib.aclosing(
                self._wait_in_line(run_input, principal, roles, policy)
            ) as frames:
                async for frame in frames:
                    yield frame
        except PauseMeshError as error:  # the thread was erased, the store failed
            yield encode_frame(AguiRunError.from_error(error).to_event())

    async def _wait_in_line(
        self,
        run_input: RunAgentInput,
        principal: str | None,
        roles: frozenset[str],
        policy: DoubleTexting,
    ) -> AsyncGenerator[bytes, None]:
        thread_id = run_input.thread_id
        if run_input.resume is not UNSET or not run_input.messages:
            msg = "Only new messages can wait for a busy thread (an answer or an empty input not)"
            yield encode_frame(AguiRunError(NOT_QUEUEABLE, msg).to_event())
            return
        # Its head (``last_sequence``) is all it needs: no message read.
        record = await self.threads.get(thread_id, tail=0, state=False)
        if record is None:
            raise ThreadNotFoundError(thread_id)
        entry = QueuedInput(
            entry_id=uuid.uuid4().hex,
            thread_id=thread_id,
            kind=_KINDS[policy],
            run_id=run_input.run_id,
            input_json=msgspec.json.encode(run_input).decode(),
            principal=principal,
            roles=tuple(sorted(roles)),
            message_ids=tuple(m.id for m in run_input.messages),
            after_sequence=record.last_sequence,
            queued_at=self.clock.now(),
        )
        stored = await self.queue.enqueue(entry, limit=self.limit)
        if stored is None:
            msg = f"The thread already has {self.limit} inputs waiting"
            yield encode_frame(AguiRunError(QUEUE_FULL, msg).to_event())
            return
        if stored.kind in INTERRUPTING:
            self.leases.signal(thread_id, [QueueSignal(entry_id=stored.entry_id, kind=stored.kind)])
        self.kick(thread_id)
        try:
            async for frame in self.relay(stored):
                yield frame
        except ThreadNotFoundError:
            yield _dropped()

    async def relay(self, entry: QueuedInput) -> AsyncGenerator[bytes, None]:
        """The frames of ``entry``'s run as logged (whichever replica runs it), keep-alives
        while it waits; ends after its ``RUN_FINISHED`` or ``RUN_ERROR``."""
        after = entry.after_sequence
        thread_id = entry.thread_id
        while self.shutdown is None or not self.shutdown.draining:
            page = await self.threads.read_events(thread_id, after_sequence=after, limit=_PAGE)
            for logged in page:
                after = logged.sequence
                if logged.run_id != entry.run_id:
                    continue
                yield encode_frame(logged.event_json, logged.sequence)
                if _ends(logged):
                    return
            if len(page) == _PAGE:
                continue
            woke = await self.threads.wait_for_events(
                thread_id, after_sequence=after, wait_seconds=self.keepalive_seconds
            )
            if woke:
                continue
            if not await self.queue.contains(thread_id, entry.entry_id) and not (
                await self.threads.read_events(thread_id, after_sequence=after, limit=1)
            ):
                # Gone from the queue with no run in the log after it: the thread was erased.
                yield _dropped()
                return
            yield KEEPALIVE_FRAME

    # -- running what waits ---------------------------------------------------------------

    def kick(self, thread_id: str) -> None:
        """Drain ``thread_id`` in the background (once per process at a time)."""
        if thread_id in self._draining:
            self._again.add(thread_id)
            return
        self._draining.add(thread_id)
        task = asyncio.create_task(self._drain_task(thread_id), name="pausemesh-queued-run")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _drain_task(self, thread_id: str) -> None:
        try:
            while True:
                self._again.discard(thread_id)
                await self.drain(thread_id)
                if thread_id not in self._again:
                    return
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - the sweeper tries again; the app must not crash
            _log.warning("running the queued inputs of thread %s failed", thread_id)
        finally:
            self._draining.discard(thread_id)

    async def sweep(self) -> int:
        """Start draining every thread with inputs waiting (crashes, other replicas)."""
        threads = await self.queue.waiting_threads(limit=_SWEEP_BATCH)
        for thread_id in threads:
            self.kick(thread_id)
        return len(threads)

    async def drain(self, thread_id: str) -> None:
        """Run the thread's waiting inputs in order while this process can take its lease
        (busy: its holder drains when its run ends).

        Every lease taken here is given back before the queue is looked at again, and the
        drain ends only on a look that finds the queue empty: an input queued while this drain
        held the thread (whose own drain found it busy and ended) is run by this one, not left
        for a sweep."""
        while (head := await self.queue.head(thread_id)) is not None:
            if self.shutdown is not None and self.shutdown.draining:
                return  # the process stops: another one runs what waits
            lease_id = self.leases.new_lease_id()
            try:
                record = await self.leases.acquire(
                    thread_id, lease_id=lease_id, run_id=head.run_id, now=self.clock.now()
                )
            except ThreadBusyError:
                return
            except ThreadNotFoundError:
                await self.queue.discard(thread_id)  # the thread is gone, and its inputs
                return
            released = False
            try:
                head = await self.queue.head(thread_id)  # under the lease: the one to run
                if head is None:
                    continue  # the lease goes back below, then the queue is looked at again
                run = await self._run_head(record, head, lease_id)
                # None: its run had ended already (another process's, whose last write freed
                # the thread before it took the entry off): the lease taken here is still held.
                released = run is not None and run.lease.released
                if run is not None and run.error_code in _NOT_ENDED:
                    return  # it stays queued: whoever takes the thread next runs it
                await self.queue.remove(thread_id, head.entry_id)
            finally:
                if not released:
                    await self.leases.release(thread_id, lease_id)

    async def _run_head(
        self, record: ThreadRecord, head: QueuedInput, lease_id: str
    ) -> LeasedRun | None:
        """Run ``head`` under ``lease_id``; None when its run already ended (found in the log:
        a process died between the run's end and taking it off the queue)."""
        if await self._ended(head):
            # Rare: a crash after the run's end, or its runner about to take it off.
            _log.info("queued run %s of thread %s had ended already", head.run_id, head.thread_id)
            return None
        # What a rollback since it was queued removed does not come back with it: the run
        # drops the ids the thread remembers as removed (``ThreadStore.removed_message_ids``).
        run_input = msgspec.json.decode(head.input_json, type=RunAgentInput)
        run = self._make_run(
            record, run_input, head.principal, lease_id, roles=frozenset(head.roles)
        )
        run.lease.entry_id = head.entry_id
        # Its refusal, if any, goes into the log too: its sender reads it from there.
        run.started = True
        async with contextlib.aclosing(run.frames()) as frames:
            async for _ in frames:
                pass  # every frame is in the thread log; the sender's relay reads it there
        return run

    async def _ended(self, head: QueuedInput) -> bool:
        """Whether ``head``'s run already ended in the log (since it was queued)."""
        after = head.after_sequence
        while True:
            page = await self.threads.read_events(head.thread_id, after_sequence=after, limit=_PAGE)
            for logged in page:
                after = logged.sequence
                if logged.run_id == head.run_id and _ends(logged):
                    return True
            if len(page) < _PAGE:
                return False

    async def close(self) -> None:
        """Stop the drains of this process (their inputs stay queued for the next one)."""
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
