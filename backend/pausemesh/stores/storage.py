"""``Storage``: the stores one process runs on, opened and closed together.

``pausemesh.bootstrap.open_storage`` builds it from settings; a host that embeds
PauseMesh may build one itself (e.g. over stores it already owns) and pass it in.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from pausemesh.core.fencing import FencedOperations
from pausemesh.core.limits import RateLimiter
from pausemesh.core.operations import OperationLedger
from pausemesh.core.ports import EventStore, JobLock
from pausemesh.core.push import PushStore
from pausemesh.core.run_queue import RunQueue
from pausemesh.core.threads import ThreadStore

__all__ = ("Storage",)

_log = logging.getLogger("pausemesh.stores")


class Storage:
    """The event store plus the optional thread store, operation ledger, (for the gateway)
    fenced operations over that ledger, a shared rate limiter, (for A2A push notifications)
    the push store, and the lock that elects the background-job runner.

    ``close`` closes every store once, then runs ``on_close`` callbacks (the shared
    database connection or pool that the stores borrow).
    """

    def __init__(
        self,
        *,
        events: EventStore,
        threads: ThreadStore | None = None,
        operations: OperationLedger | None = None,
        fencing: FencedOperations | None = None,
        rate_limiter: RateLimiter | None = None,
        push: PushStore | None = None,
        jobs: JobLock | None = None,
        run_queue: RunQueue | None = None,
        on_close: Sequence[Callable[[], Awaitable[None]]] = (),
    ) -> None:
        self.events = events
        self.threads = threads
        self.operations = operations
        self.fencing = fencing
        # Counters shared by every process on this storage (PostgreSQL); None: count per process.
        self.rate_limiter = rate_limiter
        # The A2A push configurations and outbox (on the thread store's database).
        self.push = push
        # Who runs the background jobs when several processes share the store (None: this
        # process alone uses it, so it always runs them).
        self.jobs = jobs
        # The queue of inputs waiting on busy threads (double texting; None: the run host
        # keeps one in the process, which only a single-process store can share).
        self.run_queue = run_queue
        self._on_close = list(on_close)
        self._closed = False

    async def readiness(self) -> None:
        """Return when every store can serve; raise ``StoreError`` otherwise."""
        await self.events.check_readiness()
        for store in (self.threads, self.operations):
            check = getattr(store, "check_readiness", None)
            if check is not None:
                await check()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # Every store gets its chance to close even when one fails; failures are logged.
        stores = (self.operations, self.threads, self.jobs)
        closers = [getattr(store, "close", None) for store in stores]
        closers += [self.events.close, *reversed(self._on_close)]
        for close in closers:
            if close is None:
                continue
            try:
                await close()
            except Exception:  # noqa: BLE001 - shutdown goes on; the log says what failed
                _log.warning("closing %s failed", getattr(close, "__qualname__", close))
