"""One follow-up at a time per A2A task, across requests, processes and replicas.

The task's thread record has a run lease (the one AG-UI runs use for their threads); a
follow-up message holds it while the SDK runs the executor and persists what it produced. A
racing follow-up waits for the lease, then re-reads the task: if the first one finished it,
the racer is answered with that final task instead of running the executor again on it. The
versioned task store stays the last guard (no write lands on a terminal task); the lease
keeps two executors from interleaving their writes, which the SDK would otherwise settle by
failing one request (or, on a third conflict, the task).

The lease is never renewed: it expires after ``lease_seconds``, so a follow-up whose process
died blocks the task only that long.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import timedelta

from pausemesh.a2a.store import task_thread_id
from pausemesh.core.clock import SystemClock
from pausemesh.core.errors import ThreadBusyError, ThreadNotFoundError
from pausemesh.core.ids import uuid7
from pausemesh.core.ports import Clock
from pausemesh.core.threads import ThreadStore

__all__ = ("FollowUpGate",)

_POLL_SECONDS = 0.02


class FollowUpGate:
    def __init__(
        self,
        threads: Callable[[], ThreadStore],
        *,
        lease_seconds: float = 30.0,
        clock: Clock | None = None,
    ) -> None:
        self._threads = threads
        self._lease = timedelta(seconds=lease_seconds)
        self._clock = clock or SystemClock()

    @asynccontextmanager
    async def hold(self, task_id: str, *, run_id: str) -> AsyncIterator[None]:
        """Hold the task's lease for the block (waits while another follow-up holds it).

        An unknown task is let through: the SDK answers it with ``TaskNotFoundError``.
        """
        threads = self._threads()
        thread_id = task_thread_id(task_id)
        lease_id = uuid7()
        held = await self._acquire(threads, thread_id, lease_id=lease_id, run_id=run_id)
        try:
            yield
        finally:
            if held:
                await threads.release_lease(thread_id, lease_id=lease_id)

    async def _acquire(
        self, threads: ThreadStore, thread_id: str, *, lease_id: str, run_id: str
    ) -> bool:
        while True:
            now = self._clock.now()
            try:
                await threads.acquire_lease(
                    thread_id,
                    lease_id=lease_id,
                    run_id=run_id,
                    now=now,
                    expires_at=now + self._lease,
                )
            except ThreadBusyError:
                await asyncio.sleep(_POLL_SECONDS)
            except ThreadNotFoundError:
                return False
            else:
                return True
