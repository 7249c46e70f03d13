"""The lease keeper: one process renews every lease it holds, while it is alive.

A lease (a thread's run lease: an AG-UI run, an owed run, the expiry sweep closing a lapsed
cohort, an A2A follow-up) has a short TTL (``DEFAULT_LEASE_SECONDS``) and an id under the
process instance's holder (``core/instance.py``). Renewal does not depend on the lease's user
sending anything: the keeper renews all leases of this process together every third of the
TTL (one statement on PostgreSQL), so a run waiting on a slow agent keeps its thread, a dead
instance's leases (SIGKILL skips every ``finally``) are free within the TTL on every replica,
and a restarted replica frees its predecessor's at once (``release_instance_leases``).

When a renewal finds a lease gone (it lapsed while the store was out of reach, or a restart of
this instance's name freed it, and another writer took the thread), the keeper stops renewing
it and calls the holder's ``on_lost`` at once: a run cancels its agent and writes nothing more
(the store refuses its appends with ``LEASE_LOST`` anyway).

The renewal task runs only while some lease is held, so the keeper needs no start or stop.

Double texting: with a run queue (``watch_queue``), each renewal also asks, in one read, which
held threads have an interrupting input waiting (``RunQueue.interrupting``) and tells their
holders (``on_interrupt``), so a run on any replica hears an interrupt within a third of the
TTL; ``signal`` tells a holder in this process at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import datetime, timedelta

import anyio

from pausemesh.core.ports import Clock
from pausemesh.core.run_queue import QueueSignal, RunQueue
from pausemesh.core.threads import ThreadRecord, ThreadStore, new_lease_id

__all__ = ("LeaseKeeper",)

_log = logging.getLogger("pausemesh.leases")


Interrupted = Callable[[list[QueueSignal]], None]


class _Held:
    __slots__ = ("lease_id", "on_interrupt", "on_lost")

    def __init__(
        self,
        lease_id: str,
        on_lost: Callable[[], None] | None,
        on_interrupt: Interrupted | None = None,
    ) -> None:
        self.lease_id = lease_id
        self.on_lost = on_lost
        self.on_interrupt = on_interrupt


class LeaseKeeper:
    """The leases one process instance holds (thread id -> lease id), renewed in the background."""

    def __init__(self, threads: ThreadStore, *, clock: Clock, ttl: timedelta, holder: str) -> None:
        if ttl <= timedelta(0):
            msg = "a lease TTL must be positive"
            raise ValueError(msg)
        self.threads = threads
        self.clock = clock
        self.ttl = ttl
        self.holder = holder
        self._held: dict[str, _Held] = {}
        # Where interrupting inputs wait (double texting); None: nothing interrupts a run.
        self.queue: RunQueue | None = None
        self._task: asyncio.Task[None] | None = None
        # Set when the last lease is dropped, so the renewal task ends at once, not a beat later.
        self._emptied = asyncio.Event()

    def watch_queue(self, queue: RunQueue) -> None:
        """Tell holders of the interrupting inputs ``queue`` holds for their threads."""
        self.queue = queue

    def signal(self, thread_id: str, signals: list[QueueSignal]) -> None:
        """An interrupting input was queued in this process: tell the holder now, if here."""
        held = self._held.get(thread_id)
        if held is not None and held.on_interrupt is not None:
            _tell(held.on_interrupt, signals)

    def new_lease_id(self) -> str:
        return new_lease_id(self.holder)

    async def acquire(
        self, thread_id: str, *, lease_id: str, run_id: str, now: datetime
    ) -> ThreadRecord:
        """Take ``thread_id``'s lease for ``run_id`` (one TTL from ``now``; ``THREAD_BUSY``
        while another holds it) and renew it from now on; ``hold`` again to add ``on_lost``."""
        record = await self.threads.acquire_lease(
            thread_id, lease_id=lease_id, run_id=run_id, now=now, expires_at=now + self.ttl
        )
        self.hold(thread_id, lease_id)
        return record

    async def release(self, thread_id: str, lease_id: str) -> None:
        """Stop renewing ``lease_id`` and give it back; runs even in a cancelled scope (a client
        that went away), and a store that cannot be reached leaves it to lapse after the TTL."""
        self.drop(thread_id, lease_id)
        with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
            await self.threads.release_lease(thread_id, lease_id=lease_id)

    def hold(
        self,
        thread_id: str,
        lease_id: str,
        *,
        on_lost: Callable[[], None] | None = None,
        on_interrupt: Interrupted | None = None,
    ) -> None:
        """Renew ``lease_id`` from now on (its user has just taken it). ``on_lost`` is called
        (once, synchronously, from the renewal task) if a renewal finds the lease gone;
        ``on_interrupt`` at each renewal that finds interrupting inputs waiting."""
        self._held[thread_id] = _Held(lease_id, on_lost, on_interrupt)
        self._emptied.clear()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._renew_while_held(), name="pausemesh-leases")

    def drop(self, thread_id: str, lease_id: str) -> None:
        """Stop renewing ``lease_id`` (its user released it)."""
        held = self._held.get(thread_id)
        if held is not None and held.lease_id == lease_id:
            del self._held[thread_id]
            if not self._held:
                self._emptied.set()

    @property
    def held(self) -> dict[str, str]:
        return {thread_id: held.lease_id for thread_id, held in self._held.items()}

    async def renew_now(self) -> set[str]:
        """One renewal of every held lease; the thread ids whose lease was lost (their
        ``on_lost`` has been called). The background task calls this every third of the TTL."""
        held = dict(self._held)
        if not held:
            return set()
        leases = {thread_id: h.lease_id for thread_id, h in held.items()}
        renewed = await self.threads.renew_leases(leases, expires_at=self.clock.now() + self.ttl)
        lost: set[str] = set()
        for thread_id, entry in held.items():
            if thread_id in renewed:
                continue
            if self._held.get(thread_id) is not entry:
                continue  # dropped (released) while the renewal ran: nothing was lost
            lost.add(thread_id)
            _log.warning("lost the lease on thread %s", thread_id)
            self.drop(thread_id, entry.lease_id)
            if entry.on_lost is not None:
                try:
                    entry.on_lost()
                except Exception:  # noqa: BLE001 - one holder's callback must not stop the rest
                    _log.exception("stopping the holder of a lost lease failed")
        await self._tell_interrupts(held, renewed)
        return lost

    async def _tell_interrupts(self, held: dict[str, _Held], renewed: set[str]) -> None:
        watched = {
            thread_id: entry
            for thread_id, entry in held.items()
            if entry.on_interrupt is not None and thread_id in renewed
        }
        if not watched or self.queue is None:
            return
        try:
            waiting = await self.queue.interrupting(list(watched))
        except Exception:  # noqa: BLE001 - asked again at the next renewal
            _log.warning("reading the interrupting inputs of %d threads failed", len(watched))
            return
        for thread_id, signals in waiting.items():
            entry = watched[thread_id]
            if self._held.get(thread_id) is entry and entry.on_interrupt is not None:
                _tell(entry.on_interrupt, signals)

    async def _renew_while_held(self) -> None:
        interval = self.ttl.total_seconds() / 3
        while self._held:
            try:
                async with asyncio.timeout(interval):
                    await self._emptied.wait()
            except TimeoutError:
                pass
            try:
                await self.renew_now()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - retried next interval; must not kill the keeper
                _log.warning("renewing %d leases failed; retrying", len(self._held))


def _tell(on_interrupt: Interrupted, signals: list[QueueSignal]) -> None:
    try:
        on_interrupt(signals)
    except Exception:  # noqa: BLE001 - one holder's callback must not stop the rest
        _log.exception("telling a run of an interrupting input failed")
