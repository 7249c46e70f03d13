"""The lease keeper: one process renews every run lease it holds, while it is alive.

A run's lease has a short TTL (``DEFAULT_LEASE_SECONDS``). Renewal does not depend on the run
sending anything: the keeper renews all leases of this process together every third of the TTL
(one statement on PostgreSQL), so a run waiting on a slow agent keeps its thread, and a run
whose process died (SIGKILL skips every ``finally``) frees it within the TTL on every replica.

The renewal task runs only while some lease is held, so the keeper needs no start or stop.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from pausemesh.core.ports import Clock
from pausemesh.core.threads import ThreadStore, new_lease_id

__all__ = ("LeaseKeeper",)

_log = logging.getLogger("pausemesh.agui")


class LeaseKeeper:
    """The leases one process instance holds (thread id -> lease id), renewed in the background."""

    def __init__(self, threads: ThreadStore, *, clock: Clock, ttl: timedelta, holder: str) -> None:
        self.threads = threads
        self.clock = clock
        self.ttl = ttl
        self.holder = holder
        self._held: dict[str, str] = {}
        self._task: asyncio.Task[None] | None = None
        # Set when the last lease is dropped, so the renewal task ends at once, not a beat later.
        self._emptied = asyncio.Event()

    def new_lease_id(self) -> str:
        return new_lease_id(self.holder)

    def hold(self, thread_id: str, lease_id: str) -> None:
        """Renew ``lease_id`` from now on (the run has just taken it)."""
        self._held[thread_id] = lease_id
        self._emptied.clear()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._renew_while_held(), name="pausemesh-leases")

    def drop(self, thread_id: str, lease_id: str) -> None:
        """Stop renewing ``lease_id`` (the run released it)."""
        if self._held.get(thread_id) == lease_id:
            del self._held[thread_id]
            if not self._held:
                self._emptied.set()

    @property
    def held(self) -> dict[str, str]:
        return dict(self._held)

    async def _renew_while_held(self) -> None:
        interval = self.ttl.total_seconds() / 3
        while self._held:
            try:
                async with asyncio.timeout(interval):
                    await self._emptied.wait()
            except TimeoutError:
                pass
            leases = dict(self._held)
            if not leases:
                return
            try:
                renewed = await self.threads.renew_leases(
                    leases, expires_at=self.clock.now() + self.ttl
                )
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - retried next interval; must not kill the keeper
                _log.warning("renewing %d run leases failed; retrying", len(leases))
                continue
            for thread_id, lease_id in leases.items():
                if thread_id not in renewed:
                    # Another run took the thread after our lease lapsed: our appends are now
                    # fenced off (THREAD_BUSY), so that run stops at its next event.
                    _log.warning("lost the run lease on thread %s", thread_id)
                    self.drop(thread_id, lease_id)
