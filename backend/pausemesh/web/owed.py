"""Runs the server owes threads whose questions were decided elsewhere (``agui/run/owed.py``).

``OwedRuns.poke`` continues a thread right after a decision made through REST or the
approvals inbox that owes it a run (in the background: the decision's response does not wait
for the agent); a decision that owes no thread a run (a plain continuation's) costs nothing;
``run_owed_sweeper`` picks up whatever a poke did not finish (a crash, a busy thread, another
replica's decision) every sweep interval, on every replica.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from pausemesh.agui.run import RunHost
from pausemesh.agui.run.owed import Owed, continue_owed_runs, continue_thread
from pausemesh.core.model import ResumeOutcome

__all__ = ("OwedRuns", "run_owed_sweeper")

_log = logging.getLogger("pausemesh.web")


class OwedRuns:
    """Continues owed threads on this process; ``host`` is None when no agent is served."""

    def __init__(self, host: Callable[[], RunHost] | None) -> None:
        self._host = host
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def enabled(self) -> bool:
        return self._host is not None

    def poke(self, decided: ResumeOutcome) -> None:
        """Continue the thread ``decided`` owes a run, now (in the background); nothing when it
        owes none. The decision recorded the owed run in its own write: if this process
        stops before the run, any replica's sweeper makes it."""
        thread_id = decided.continues_thread
        if self._host is None or thread_id is None:
            return
        task = asyncio.create_task(
            self._continue(thread_id, decided.continuation.continuation_id),
            name="pausemesh-owed-run",
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _continue(self, thread_id: str, continuation_id: str) -> None:
        assert self._host is not None  # noqa: S101 - poke checked it
        host = self._host()
        try:
            outcome = await continue_thread(host, thread_id)
            if outcome is not Owed.BUSY:
                await host.service.store.settle_owed([continuation_id])
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - the sweeper retries; a poke must not crash the app
            _log.warning("continuing thread %s failed; the sweeper retries", thread_id)

    async def sweep(self) -> int:
        if self._host is None:
            return 0
        host = self._host()
        # Inputs queued on threads (double texting) whose runs no process started: a crash,
        # a thread given back by a run that takes no queue into account.
        await host.queued.sweep()
        return await continue_owed_runs(host)

    async def close(self) -> None:
        if self._host is not None:
            with contextlib.suppress(Exception):
                await self._host().close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def run_owed_sweeper(owed: OwedRuns, interval_seconds: float) -> None:
    """Every interval, continue the threads owed a run (crashes, busy threads, replicas)."""
    while True:
        try:
            await owed.sweep()
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a failed sweep is retried; it must not kill the app
            _log.warning("owed-run sweep failed; retrying in %.1fs", interval_seconds)
        await asyncio.sleep(interval_seconds)
