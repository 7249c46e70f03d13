"""One follow-up at a time per A2A task, across requests, processes and replicas.

The task's thread record has a run lease (the one AG-UI runs use for their threads); a
follow-up message holds it while the SDK runs the executor and persists what it produced. A
racing follow-up waits for the lease, then re-reads the task: if the first one finished it,
the racer is answered with that final task instead of running the executor again on it. The
versioned task store stays the last guard (no write lands on a terminal task); the lease
keeps two executors from interleaving their writes, which the SDK would otherwise settle by
failing one request (or, on a third conflict, the task).

The lease is an instance lease of the process's keeper (``core/leases.py``, the one AG-UI runs
use): renewed while the follow-up runs, however long the executor takes; a follow-up whose
process died frees the task within the short TTL, or at once when that replica restarts.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from pausemesh.a2a.store import task_thread_id
from pausemesh.core.errors import ThreadBusyError, ThreadNotFoundError
from pausemesh.core.leases import LeaseKeeper

__all__ = ("FollowUpGate",)

_POLL_SECONDS = 0.02


class FollowUpGate:
    def __init__(self, leases: Callable[[], LeaseKeeper]) -> None:
        # Resolved per follow-up: the runtime (and its keeper) exists only once the app runs.
        self._leases = leases

    @asynccontextmanager
    async def hold(self, task_id: str, *, run_id: str) -> AsyncIterator[None]:
        """Hold the task's lease for the block (waits while another follow-up holds it).

        An unknown task is let through: the SDK answers it with ``TaskNotFoundError``.
        """
        leases = self._leases()
        thread_id = task_thread_id(task_id)
        lease_id = leases.new_lease_id()
        held = await self._acquire(leases, thread_id, lease_id=lease_id, run_id=run_id)
        try:
            yield
        finally:
            if held:
                await leases.release(thread_id, lease_id)

    @staticmethod
    async def _acquire(leases: LeaseKeeper, thread_id: str, *, lease_id: str, run_id: str) -> bool:
        while True:
            try:
                await leases.acquire(
                    thread_id, lease_id=lease_id, run_id=run_id, now=leases.clock.now()
                )
            except ThreadBusyError:
                await asyncio.sleep(_POLL_SECONDS)
            except ThreadNotFoundError:
                return False
            else:
                return True
