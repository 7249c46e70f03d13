"""A continuation's event stream, as the service's commands use it.

``Streams`` loads a stream and replays it into its envelope, appends one event (a
compare-and-swap on the version, then observed) and materializes expiry. The commands are made
of these: create, read, cancel and the sweeper in ``core/service.py``, a resume and what an
approver sees in ``core/resume.py``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Final, TypeVarTuple

import msgspec

from pausemesh.core.default_outcomes import EXPIRED_REASON, EXPIRY_DECIDER, on_expiry_of
from pausemesh.core.errors import ContinuationNotFoundError, VersionConflictError
from pausemesh.core.model import (
    CONTINUATION_SCHEMA_VERSION,
    Continuation,
    ContinuationCancelled,
    ContinuationCreated,
    ContinuationEvent,
    ContinuationExpired,
    ContinuationResumed,
)
from pausemesh.core.ports import Clock, EventStore, Observer
from pausemesh.core.reducer import apply_event, replay
from pausemesh.core.timers import due_event
from pausemesh.core.webhooks import WebhookRoutes
from pausemesh.observability.observations import ContinuationTransitionedObservation
from pausemesh.observability.observer import observe_safely
from pausemesh.observability.telemetry import EXPIRIES, EXPIRY_LAG_SECONDS, count, observe, span

__all__ = ("MAX_ATTEMPTS", "LoadedStream", "Streams")

# A stream has at most two events, so a handful of CAS retries always settles.
MAX_ATTEMPTS: Final = 5


_Args = TypeVarTuple("_Args")


class LoadedStream(msgspec.Struct, frozen=True):
    """A stream as loaded: its events, the first of them, and their replay (expiry not yet
    applied)."""

    events: Sequence[ContinuationEvent]
    created: ContinuationCreated
    state: Continuation


class Streams:
    """Load, append to and expire continuation streams in ``store``."""

    __slots__ = ("clock", "observer", "store", "webhooks")

    def __init__(
        self,
        store: EventStore,
        clock: Clock,
        observer: Observer,
        webhooks: WebhookRoutes | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.observer = observer
        # The event webhooks each appended event owes, queued in the same write.
        self.webhooks = webhooks

    async def write(
        self,
        continuation_id: str,
        expected_version: int,
        event: ContinuationEvent,
        after: Continuation,
    ) -> None:
        """Append ``event`` (compare-and-swap on ``expected_version``) with the webhook
        deliveries it owes (``after``: the state it makes), in one store write."""
        webhooks = self.webhooks
        outbox = webhooks.for_event(event, after) if webhooks is not None else []
        if not outbox:
            await self.store.append(continuation_id, expected_version, [event])
            return
        await self.store.append(continuation_id, expected_version, [event], outbox=outbox)
        if webhooks is not None:
            webhooks.queued(outbox)

    async def load(self, continuation_id: str) -> LoadedStream:
        """The stream, whoever asks; ``ContinuationNotFoundError`` when there is none."""
        return _loaded(continuation_id, await self.store.load(continuation_id))

    async def load_owned(self, continuation_id: str, principal: str | None) -> LoadedStream:
        """The stream as ``principal`` sees it as an owner: another principal's continuation
        does not exist, as far as the caller can tell."""
        # Not through ``load``: one coroutine less on every read and resume.
        loaded = _loaded(continuation_id, await self.store.load(continuation_id))
        owner = loaded.state.owner
        if isinstance(owner, str) and owner != principal:
            raise ContinuationNotFoundError(continuation_id)
        return loaded

    async def current(
        self, load: Callable[[*_Args], Awaitable[LoadedStream]], *args: *_Args
    ) -> Continuation:
        """The state ``load(*args)`` gives, expired first when its deadline has passed (a race
        lost to another writer loads again)."""
        for _ in range(MAX_ATTEMPTS):
            state = (await load(*args)).state
            try:
                return await self.expire_if_due(state)
            except VersionConflictError:
                continue
        return (await load(*args)).state

    async def append(self, state: Continuation, event: ContinuationEvent) -> Continuation:
        """Append ``event`` after ``state`` (``VersionConflictError`` when another writer got
        there first) and report the transition."""
        new_state = apply_event(state, event)
        await self.write(state.continuation_id, state.version, event, new_state)
        observe_safely(
            self.observer,
            ContinuationTransitionedObservation(
                continuation_id=state.continuation_id,
                observed_at=event.occurred_at,
                version=new_state.version,
                status=new_state.status,
                correlation_id=state.correlation_id,
            ),
        )
        return new_state

    async def fire_timers(self, state: Continuation) -> Continuation:
        """Append the timer events a pending pause owes now (its reminder, its escalation:
        ``core/timers.py``), each once: a lost race raises ``VersionConflictError``."""
        for _ in range(2):
            event = due_event(state, self.clock.now())
            if event is None:
                break
            with span("continuation.timer", continuation_id=state.continuation_id):
                state = await self.append(state, event)
        return state

    async def expire_if_due(self, state: Continuation, *, by: str = "read") -> Continuation:
        """Append ``expired`` when a pending deadline has passed (raises on a lost race).

        ``by``: who noticed (``sweeper``, or ``read`` for a read, resume or cancel).
        """
        now = self.clock.now()
        if state.status != "pending" or now < state.expires_at:
            return state
        event = _at_deadline(state, now)
        with span(
            "continuation.expire",
            continuation_id=state.continuation_id,
            version=event.version,
            by=by,
        ):
            expired = await self.append(state, event)
        count(EXPIRIES, by)
        observe(EXPIRY_LAG_SECONDS, (now - state.expires_at).total_seconds())
        return expired


def _at_deadline(state: Continuation, now: datetime) -> ContinuationEvent:
    """What a pending pause becomes at its deadline: expired, or its default outcome
    (``core/default_outcomes.py``), which continues its thread."""
    cid, version = state.continuation_id, state.version + 1
    has_default, outcome = on_expiry_of(state.metadata)
    if not has_default:
        return ContinuationExpired(
            schema_version=CONTINUATION_SCHEMA_VERSION,
            continuation_id=cid,
            version=version,
            occurred_at=now,
        )
    if outcome == "cancel":
        return ContinuationCancelled(
            schema_version=CONTINUATION_SCHEMA_VERSION,
            continuation_id=cid,
            version=version,
            occurred_at=now,
            reason=EXPIRED_REASON,
        )
    return ContinuationResumed(
        schema_version=CONTINUATION_SCHEMA_VERSION,
        continuation_id=cid,
        version=version,
        occurred_at=now,
        idempotency_key=f"{EXPIRY_DECIDER}-{cid}",
        resume_payload=outcome,
        resolved_by=EXPIRY_DECIDER,
        continues_thread=state.correlation_id,
    )


def _loaded(continuation_id: str, events: Sequence[ContinuationEvent]) -> LoadedStream:
    state = replay(events)
    created = events[0] if events else None
    if state is None or not isinstance(created, ContinuationCreated):
        raise ContinuationNotFoundError(continuation_id)
    return LoadedStream(events=events, created=created, state=state)
