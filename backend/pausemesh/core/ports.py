"""Ports: the small protocols the core depends on. Adapters live in ``stores/`` etc."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from pausemesh.core.approvers import Approver
from pausemesh.core.model import ContinuationEvent
from pausemesh.core.push import OutboxEntry
from pausemesh.core.tokens import IssuedTokenValue
from pausemesh.observability.observations import Observer

__all__ = ("Clock", "EventStore", "JobLock", "Observer", "TokenIssuer")


@runtime_checkable
class EventStore(Protocol):
    """Append-only, versioned continuation streams.

    ``append`` is a compare-and-swap: it writes all of ``events`` or none, and only if
    the stream's current version equals ``expected_version`` (0 = the stream does not
    exist); otherwise it raises ``VersionConflictError``. Events must carry versions
    ``expected_version + 1 ...`` and the stream's id, checked before anything is written.
    ``outbox``: deliveries queued in the same transaction (``core/push.py``; an entry whose
    ``delivery_id`` is already queued is not queued again), so a state change is never
    committed without its webhooks, nor the other way round.
    """

    async def load(self, continuation_id: str) -> Sequence[ContinuationEvent]: ...

    async def append(
        self,
        continuation_id: str,
        expected_version: int,
        events: Sequence[ContinuationEvent],
        *,
        outbox: Sequence[OutboxEntry] = (),
    ) -> None: ...

    async def list_due(self, now: datetime, limit: int) -> Sequence[str]:
        """Ids of pending continuations whose deadline is at or before ``now``."""
        ...

    async def pending_for_approvers(
        self, approvers: Sequence[Approver], *, before: str | None, limit: int
    ) -> Sequence[str]:
        """Ids of pending continuations whose ``created`` event names any of ``approvers``,
        newest id first, strictly before ``before`` if given, at most ``limit``. Every stream
        still pending is a candidate whatever its next due time: a due reminder or escalation
        has not fired yet, and a passed deadline is the service's to apply as it reads the
        stream. Indexed: a store keeps the approvers of a stream in the write that creates it,
        keyed by their text form (``stores/batch.py`` ``approver_index_keys``: kind and name
        in one string, as rows written before typed approvers were). A candidate list: the
        service checks each against the typed entries of its event."""
        ...

    async def owed_runs(self, *, limit: int) -> Sequence[tuple[str, str]]:
        """``(continuation_id, thread_id)`` of resumes that carry ``continues_thread`` and are
        not yet settled (``settle_owed``), oldest first. A store records this in the same
        write as the ``resumed`` event, so a decision is never without its owed run."""
        ...

    async def settle_owed(self, continuation_ids: Sequence[str]) -> None:
        """The owed runs of these continuations are done (or not owed after all)."""
        ...

    async def erase_correlated(
        self, correlation_id: str, *, owner: str | None, now: datetime
    ) -> int:
        """Erase what was asked and answered in ``owner``'s continuations correlated with
        ``correlation_id`` (an erased AG-UI thread's questions): the ``created`` event's
        ``payload`` becomes null and its ``metadata`` empty, a ``resumed`` event's
        ``resumePayload`` null. Ids, versions, statuses, times and token data stay, so each
        still loads as what it was (settled; erase cancels the pending ones first), and an
        erasure ledger records the ids and ``now`` (no content). Idempotent; returns how many
        continuations were erased by this call."""
        ...

    async def check_readiness(self) -> None:
        """Return when the store can serve; raise ``StoreError`` otherwise."""
        ...

    async def close(self) -> None: ...


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...


@runtime_checkable
class TokenIssuer(Protocol):
    def issue(self, continuation_id: str) -> IssuedTokenValue: ...


class JobLock(Protocol):
    """Who runs the background jobs (expiry sweeper, retention): one holder at a time.

    Several processes share a store (``pausemesh serve --workers N``, replicas on one
    PostgreSQL); each asks before a pass, and only the holder runs it. The lock is held while
    its process lives and is freed by the operating system or the database when it dies, so
    another process takes over at its next pass. Correctness never depends on it (appends are
    compare-and-swap); it keeps N processes from doing the same work N times.
    """

    async def try_hold(self) -> bool:
        """True when this process holds the lock now (taking it if it is free)."""
        ...

    async def close(self) -> None: ...
