"""Unknown booking outcomes, resolved in the conversation (issue 18: visible and resumable).

When a booking's outcome is unknown (its run died between "attempt recorded" and "outcome
recorded", and the airline did not answer the ledger's lookup either), the demo agent says it
is checking with the airline, records CUSTOM ``pausemesh.operation_unknown`` on the thread, and
pauses with a question nobody in the chat answers: its approver is
``Approver.operation(operation id)``, no person. This watcher decides that pause
(``ContinuationService.resume`` by an ``OperationWatcher``) as soon as the outcome can be known:

- the airline answers its status lookup: it found the booking, or it never saw the key and
  the ledger permits a resend now (``next_resend``: none yet, or the last one died before it
  reached the airline and is old enough; at most ``MAX_RESENDS``; after those, "never saw
  it" settles nothing: the booking waits for an operator, never declared failed), or
- an operator recorded what happened (``pausemesh ops resolve``: the operation is completed);

and that decision, like any decision made elsewhere, continues the thread by itself: the owed
run (``agui/run/owed.py``) runs the agent, whose ``run_once`` then records the recovered outcome
(or sends the booking once more, never blindly) and says "Booked ...".

The watcher only asks and decides; the ledger alone records outcomes. It looks at the most
recent bookings of the ledger (``ledger.list``) every interval: enough for the demo, not an
index over every unknown operation of a large deployment.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final

from litestar import Litestar
from litestar.config.app import AppConfig
from litestar.plugins import InitPlugin

from pausemesh.core.errors import PauseMeshError
from pausemesh.core.operations import OperationLedger, OperationRecord, ask_target
from pausemesh.core.ports import Clock
from pausemesh.core.resume import OperationWatcher, Resume
from pausemesh.core.service import ContinuationService
from pausemesh.demo.flights import BOOKING_DOMAIN
from pausemesh.demo.reservations import Airline, airline
from pausemesh.web.plugin import PauseMeshPlugin

__all__ = ("OperationWatchPlugin", "decide_known_outcomes")

_log = logging.getLogger("pausemesh.demo")
_RECENT: Final = 200


async def _knowable(
    record: OperationRecord, ledger: OperationLedger, desk: Airline, clock: Clock
) -> bool:
    """Whether the outcome can be known now: recorded already, the airline found the booking,
    or it never saw it and the ledger permits a resend now. Once every permitted resend was
    used and the airline still never saw the booking, only an operator can settle it."""
    if record.completed:
        return True
    # The decision ``run_once`` will make (no answer from the airline: still unknown, ask later).
    return await ask_target(ledger, record.operation_id, desk.lookup, clock.now) is not None


async def decide_known_outcomes(
    service: ContinuationService, ledger: OperationLedger, desk: Airline | None = None
) -> int:
    """One pass: decide every wait for a booking whose outcome can now be known; how many."""
    desk = desk or airline()
    decided = 0
    for record in await ledger.list(BOOKING_DOMAIN, limit=_RECENT):
        waits = await service.pending_operation_waits(record.operation_id)
        if not waits or not await _knowable(record, ledger, desk, service.clock):
            continue
        for wait in waits:
            try:
                await service.resume(
                    Resume(
                        continuation_id=wait.continuation_id,
                        idempotency_key=f"operation:{record.operation_id}",
                        payload={"operation": record.operation_id},
                        by=OperationWatcher(record.operation_id),
                    )
                )
            except PauseMeshError as error:
                _log.info("wait %s not decided: %s", wait.continuation_id, error.code)
                continue
            decided += 1
    return decided


class OperationWatchPlugin(InitPlugin):
    """Runs ``decide_known_outcomes`` every ``interval_seconds`` in the demo app."""

    __slots__ = ("_pausemesh", "interval_seconds")

    def __init__(self, interval_seconds: float = 2.0) -> None:
        self.interval_seconds = interval_seconds
        self._pausemesh: PauseMeshPlugin | None = None

    async def _watch(self) -> None:
        assert self._pausemesh is not None  # noqa: S101 - set in on_app_init
        while True:
            runtime = self._pausemesh.runtime
            ledger = runtime.storage.operations
            try:
                if ledger is not None:
                    await decide_known_outcomes(runtime.service, ledger)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - retried next interval; must not kill the app
                _log.warning("watching unknown booking outcomes failed; retrying")
            await asyncio.sleep(self.interval_seconds)

    @asynccontextmanager
    async def lifespan(self, _: Litestar) -> AsyncIterator[None]:
        task = asyncio.create_task(self._watch(), name="pausemesh-demo-operation-watch")
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def on_app_init(self, app_config: AppConfig) -> AppConfig:
        found = [p for p in app_config.plugins if isinstance(p, PauseMeshPlugin)]
        if not found:
            msg = "OperationWatchPlugin needs a PauseMeshPlugin in the same app"
            raise RuntimeError(msg)
        self._pausemesh = found[0]
        # After PauseMeshPlugin's lifespan (registered first), so the runtime is up.
        app_config.lifespan.append(self.lifespan)
        return app_config
