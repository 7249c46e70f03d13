"""One run's hold on its thread's lease, and the writes it makes under it.

The lease keeper (``core/leases.py``) renews the lease in the background; when a renewal finds
it taken, ``lose`` stops whatever runs the agent (``on_lost``) and nothing more is written.
Every event of the run goes through ``emit``: appended to the thread log under the lease
(getting its sequence, the SSE ``id``) before its frame is sent.

Double texting (``agui/double_texting.py``): an interrupting input queued on the thread asks
the run to stop; the keeper tells ``interrupt`` (at once in this process, at its next renewal
from another replica), which calls what the agent pump registered with ``on_interrupt``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pausemesh.agui.events import Event, encode_event
from pausemesh.agui.run_error import AguiRunError
from pausemesh.agui.sse import encode_frame
from pausemesh.core.large_json import joined
from pausemesh.core.leases import LeaseKeeper
from pausemesh.core.run_queue import QueueSignal
from pausemesh.core.threads import ThreadStore

__all__ = ("RunLease",)

_LEASE_LOST = "This run lost its lease on the thread (another run took it) and stopped"

_log = logging.getLogger("pausemesh.agui")


@dataclass(slots=True, kw_only=True, eq=False)
class RunLease:
    """The lease ``lease_id`` on ``thread_id`` that run ``run_id`` holds; ``keeper`` renews it
    (calling ``lose`` when it finds it taken), ``threads`` takes the run's writes."""

    keeper: LeaseKeeper
    threads: ThreadStore
    thread_id: str
    run_id: str
    lease_id: str
    # The queued input this run runs (``agui/run/queued.py``), which does not interrupt it.
    entry_id: str | None = None
    # ``interrupt`` or ``rollback`` once an interrupting input asked this run to stop.
    interrupted: str | None = field(default=None, init=False)
    _interrupts: list[Callable[[], None]] = field(default_factory=list, init=False)
    _lost: bool = field(default=False, init=False)
    _released: bool = field(default=False, init=False)
    _stops: list[Callable[[], None]] = field(default_factory=list, init=False)

    @property
    def lost(self) -> bool:
        """Whether the lease is gone (the keeper found it taken, or the store refused a write)."""
        return self._lost

    @property
    def released(self) -> bool:
        """Whether the run's last write gave the lease back with its last events."""
        return self._released

    def lose(self) -> None:
        """The keeper found the lease gone: stop the agent now, write nothing more."""
        if self._lost:
            return
        self._lost = True
        _log.warning("run %s lost its lease on thread %s; stopping it", self.run_id, self.thread_id)
        for stop in self._stops:
            stop()

    def interrupt(self, signals: list[QueueSignal]) -> None:
        """Interrupting inputs wait on the thread: stop the agent if it may be stopped (the
        pump registered with ``on_interrupt``); the first of them says how."""
        kinds = [s.kind for s in signals if s.entry_id != self.entry_id]
        if not kinds or self.interrupted is not None:
            return
        self.interrupted = kinds[0]
        for stop in self._interrupts:
            stop()

    def on_interrupt(self, stop: Callable[[], None]) -> Callable[[], None]:
        """Call ``stop`` when an interrupting input arrives (at once if one did); the undo."""
        self._interrupts.append(stop)
        if self.interrupted is not None:
            stop()
        return lambda: self._interrupts.remove(stop)

    def refused(self) -> None:
        """The store refused a write (``LEASE_LOST``): nothing more is written."""
        self._lost = True

    def on_lost(self, stop: Callable[[], None]) -> Callable[[], None]:
        """Call ``stop`` when the lease is lost (at once if it already is); returns the undo."""
        self._stops.append(stop)
        if self._lost:
            stop()
        return lambda: self._stops.remove(stop)

    def check(self) -> None:
        """``AguiRunError`` ``LEASE_LOST`` once the lease is lost (before any write)."""
        if self._lost:
            raise AguiRunError("LEASE_LOST", _LEASE_LOST)

    async def emit(self, events: Sequence[Event], *, last: bool = False) -> bytes:
        """Append ``events`` to the thread log, then return their frames (id = sequence).

        ``last``: they end the run (``RUN_FINISHED``, the interrupting one included, or
        ``RUN_ERROR``), and the lease is given back in the same write: a client (or a tail)
        that reads them finds the thread free for its next run, never ``THREAD_BUSY``."""
        if not events:
            return b""
        self.check()
        texts = [encode_event(e) for e in events]
        if last:
            # Renewals stop first: one racing the write would find the lease gone and take
            # the run for one that lost it.
            self.keeper.drop(self.thread_id, self.lease_id)
        sequences = await self.threads.append_events(
            self.thread_id,
            lease_id=self.lease_id,
            run_id=self.run_id,
            events=[t.decode() for t in texts],
            release=last,
        )
        self._released = last
        # Joined off the loop when it is megabytes (a long thread's snapshot at a pause).
        return await joined([encode_frame(t, s) for t, s in zip(texts, sequences, strict=True)])

    async def release(self) -> None:
        """Give the lease back unless the run's last write did (a run that ended early, or
        whose client went away); runs even in a cancelled scope."""
        if not self._released:
            await self.keeper.release(self.thread_id, self.lease_id)
