"""In-memory event store: the fake for unit tests (same contract as the real stores)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime

from pausemesh.core.approvers import Approver
from pausemesh.core.errors import StoreError, VersionConflictError
from pausemesh.core.model import (
    ContinuationCreated,
    ContinuationEvent,
    ContinuationResumed,
    encode_event,
)
from pausemesh.core.push import OutboxEntry
from pausemesh.stores.batch import (
    approver_index_keys,
    batch_approvers,
    batch_due,
    check_batch,
    decode_stream,
    redacted,
)
from pausemesh.stores.memory.push import InMemoryPushStore

__all__ = ("InMemoryEventStore",)


class InMemoryEventStore:
    def __init__(self) -> None:
        # Snapshots, not objects, so a caller can never mutate what was stored.
        self._streams: dict[str, list[bytes]] = {}
        self._pending: dict[str, datetime] = {}
        # continuation id -> its approvers' index keys, as the SQL stores' index table holds
        self._approvers: dict[str, frozenset[str]] = {}
        # continuation id -> thread id, in insertion order (oldest first)
        self._owed: dict[str, str] = {}
        self._erased: dict[str, datetime] = {}
        self._closed = False
        self._lock = asyncio.Lock()
        # Where the deliveries queued with an append go (the in-memory push store's outbox);
        # None: they are dropped, as a store without webhooks would never be given any.
        self.outbox: InMemoryPushStore | None = None

    def _check_open(self) -> None:
        if self._closed:
            msg = "store is closed"
            raise StoreError(msg, code="STORE_UNAVAILABLE")

    async def load(self, continuation_id: str) -> Sequence[ContinuationEvent]:
        self._check_open()
        return decode_stream(continuation_id, self._streams.get(continuation_id, []))

    async def append(
        self,
        continuation_id: str,
        expected_version: int,
        events: Sequence[ContinuationEvent],
        *,
        outbox: Sequence[OutboxEntry] = (),
    ) -> None:
        self._check_open()
        encoded = check_batch(continuation_id, expected_version, events)
        async with self._lock:
            stream = self._streams.get(continuation_id, [])
            if len(stream) != expected_version:
                raise VersionConflictError(continuation_id, expected_version, len(stream))
            if not encoded:
                return
            self._streams[continuation_id] = [*stream, *encoded]
            first = events[0]
            due = batch_due(events)
            if due is not None:
                self._pending[continuation_id] = due
            else:
                self._pending.pop(continuation_id, None)
            added = batch_approvers(events)
            if added:
                known = self._approvers.get(continuation_id, frozenset())
                self._approvers[continuation_id] = known | frozenset(added)
            for event in events:
                if isinstance(event, ContinuationResumed) and event.continues_thread is not None:
                    self._owed[continuation_id] = event.continues_thread
            if outbox and self.outbox is not None:
                self.outbox.queue(outbox, now=first.occurred_at)

    async def list_due(self, now: datetime, limit: int) -> Sequence[str]:
        self._check_open()
        due = sorted((at, cid) for cid, at in self._pending.items() if at <= now)
        return [cid for _, cid in due[:limit]]

    async def pending_for_approvers(
        self, approvers: Sequence[Approver], *, before: str | None, limit: int
    ) -> Sequence[str]:
        self._check_open()
        wanted = set(approver_index_keys(approvers))
        ids = sorted(
            (
                cid
                for cid, names in self._approvers.items()
                if wanted.intersection(names)
                and cid in self._pending
                and (before is None or cid < before)
            ),
            reverse=True,
        )
        return ids[:limit]

    async def owed_runs(self, *, limit: int) -> Sequence[tuple[str, str]]:
        self._check_open()
        return list(self._owed.items())[:limit]

    async def settle_owed(self, continuation_ids: Sequence[str]) -> None:
        self._check_open()
        for continuation_id in continuation_ids:
            self._owed.pop(continuation_id, None)

    async def erase_correlated(
        self, correlation_id: str, *, owner: str | None, now: datetime
    ) -> int:
        self._check_open()
        erased = 0
        async with self._lock:
            for continuation_id, stream in self._streams.items():
                events = decode_stream(continuation_id, stream)
                first = events[0] if events else None
                if (
                    not isinstance(first, ContinuationCreated)
                    or first.correlation_id != correlation_id
                    or first.owner != owner
                    or continuation_id in self._erased
                ):
                    continue
                self._erased[continuation_id] = now
                self._streams[continuation_id] = [encode_event(redacted(e)) for e in events]
                erased += 1
        return erased

    async def check_readiness(self) -> None:
        self._check_open()

    async def close(self) -> None:
        self._closed = True
