"""Status changes of MCP tasks, told to every process that serves a session of their owner.

A task's status changes where its pause or its record changes: the ``/mcp`` mount of some
replica (an answer, ``tasks/cancel``, the tool's result recorded), a REST resume, the expiry
sweeper. Whoever made the change **publishes a hint** (``{"taskId": ...}``) on the owner's
feed: the thread log ``mcp-task-feed:<digest of the owner>`` of the thread store. Appending
to a thread log is the store's existing change notification (the one AG-UI live tails wait
on: in-process wake-ups, ``PRAGMA data_version`` across SQLite processes, ``LISTEN/NOTIFY``
across PostgreSQL replicas), so a process with live sessions of that owner follows one feed
per owner (``follow``) and never polls per session or per task. A hint carries no status:
the follower re-reads the task, so a late or repeated hint is harmless.

Publishers take the feed's lease through the process's ``LeaseKeeper`` (``core/leases.py``),
as runs do: a publisher killed between taking it and giving it back leaves it to lapse within
the keeper's short TTL, and a restarted replica frees it at once, so a dead process never
holds an owner's feed for long.

Continuation transitions reach the feed through ``TaskStatusObserver`` (the service's
observer, in the process that made the transition). A process that dies between a
transition and its hint loses that hint: status notifications are best effort, as the spec
allows (clients keep polling ``tasks/get``, which reads the stores).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Final

import msgspec

from pausemesh.core.canonical import canonical_sha256
from pausemesh.core.errors import ThreadBusyError, ThreadNotFoundError
from pausemesh.core.leases import LeaseKeeper
from pausemesh.core.ports import Clock, Observer
from pausemesh.core.threads import MCP_TASK_FEED_PREFIX, MCP_TASK_PREFIX, ThreadStore
from pausemesh.mcp.elicitation import MCP_CORRELATION_PREFIX
from pausemesh.observability.observations import ContinuationTransitionedObservation, Observation

__all__ = ("TaskFeed", "TaskStatusObserver", "feed_thread_id")

_log = logging.getLogger("pausemesh.mcp")

_RUN_ID: Final = "mcp-task-status"
_BUSY_PAUSE_SECONDS = 0.01
_BUSY_TRIES = 500
# A follower with nothing new sends nothing; it re-reads the head this often anyway.
_WAIT_SECONDS = 30.0


class _Hint(msgspec.Struct, frozen=True, rename="camel"):
    task_id: str


_decode_hint = msgspec.json.Decoder(_Hint).decode


def feed_thread_id(owner: str | None) -> str:
    """The owner's feed: a digest, so any principal string makes a short, fixed-size id."""
    return MCP_TASK_FEED_PREFIX + canonical_sha256(["mcp-task-feed-v1", owner])


class TaskFeed:
    """Publishes task hints to their owner's feed and follows an owner's feed."""

    def __init__(
        self,
        threads: Callable[[], ThreadStore | None],
        clock: Callable[[], Clock],
        leases: Callable[[], LeaseKeeper | None],
    ) -> None:
        self._threads = threads
        self._clock = clock
        self._leases = leases
        self._pending: set[asyncio.Task[None]] = set()

    async def publish(self, task_id: str, owner: str | None) -> None:
        """Append a hint for ``task_id`` to ``owner``'s feed (waits out a concurrent append)."""
        threads, leases = self._threads(), self._leases()
        if threads is None or leases is None:
            return
        thread_id = feed_thread_id(owner)
        await threads.create_or_load(thread_id, owner=owner, now=self._clock().now())
        lease_id = leases.new_lease_id()
        for _ in range(_BUSY_TRIES):
            try:
                await leases.acquire(
                    thread_id, lease_id=lease_id, run_id=_RUN_ID, now=self._clock().now()
                )
            except ThreadBusyError:
                await asyncio.sleep(_BUSY_PAUSE_SECONDS)
                continue
            try:
                event = msgspec.json.encode(_Hint(task_id)).decode()
                await threads.append_events(
                    thread_id, lease_id=lease_id, run_id=_RUN_ID, events=[event]
                )
            finally:
                await leases.release(thread_id, lease_id)
            return
        _log.warning("MCP task status hint dropped: the owner's feed stayed busy")

    async def publish_if_task(self, continuation_id: str) -> None:
        """A continuation changed: hint its task's owner, if it is the pause of a task."""
        threads = self._threads()
        if threads is None:
            return
        record = await threads.get(MCP_TASK_PREFIX + continuation_id)
        if record is not None:
            await self.publish(continuation_id, record.owner)

    def publish_soon(self, continuation_id: str) -> None:
        """``publish_if_task`` in the background (the observer is synchronous)."""
        task = asyncio.get_running_loop().create_task(
            self._quietly(continuation_id), name="pausemesh-mcp-task-hint"
        )
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _quietly(self, continuation_id: str) -> None:
        try:
            await self.publish_if_task(continuation_id)
        except Exception:  # noqa: BLE001 - a hint is best effort; clients still poll tasks/get
            _log.warning("MCP task status hint failed", exc_info=True)

    async def head(self, owner: str | None) -> int:
        """The position of ``owner``'s feed now (what ``wait`` waits past)."""
        threads = self._threads()
        if threads is None:
            return 0
        thread_id = feed_thread_id(owner)
        record = await threads.create_or_load(thread_id, owner=owner, now=self._clock().now())
        return record.last_sequence

    async def wait(self, owner: str | None, after: int, seconds: float) -> bool:
        """True once ``owner``'s feed moved past ``after``; False after ``seconds`` without."""
        threads = self._threads()
        if threads is None:
            await asyncio.sleep(seconds)
            return False
        return await threads.wait_for_events(
            feed_thread_id(owner), after_sequence=after, wait_seconds=seconds
        )

    async def follow(self, owner: str | None) -> AsyncIterator[list[str]]:
        """The task ids hinted on ``owner``'s feed from now on, a batch per wake-up."""
        threads = self._threads()
        if threads is None:
            return
        thread_id = feed_thread_id(owner)
        after = await self.head(owner)
        while True:
            try:
                moved = await threads.wait_for_events(
                    thread_id, after_sequence=after, wait_seconds=_WAIT_SECONDS
                )
            except ThreadNotFoundError:
                return
            if not moved:
                continue
            entries = await threads.read_events(thread_id, after_sequence=after)
            if not entries:
                continue
            after = entries[-1].sequence
            ids: list[str] = []
            for entry in entries:
                with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
                    hinted = _decode_hint(entry.event_json).task_id
                    if hinted not in ids:
                        ids.append(hinted)
            if ids:
                yield ids

    async def close(self) -> None:
        for task in list(self._pending):
            task.cancel()
        for task in list(self._pending):
            with contextlib.suppress(asyncio.CancelledError):
                await task


class TaskStatusObserver:
    """The continuation service's observer, plus a hint for every transition of a task's pause.

    Wraps the observer the service already had (it still sees every observation first).
    """

    def __init__(self, inner: Observer, feed: TaskFeed) -> None:
        self.inner = inner
        self._feed = feed

    def observe(self, observation: Observation) -> None:
        self.inner.observe(observation)
        # Only MCP pauses can be tasks: a REST or AG-UI transition costs no read and no task.
        if isinstance(
            observation, ContinuationTransitionedObservation
        ) and observation.correlation_id.startswith(MCP_CORRELATION_PREFIX):
            with contextlib.suppress(RuntimeError):  # no running loop: nobody to tell
                self._feed.publish_soon(observation.continuation_id)
