"""In-memory push store (the unit-test fake), over the in-memory thread store.

Nothing here awaits between the thread save and the outbox insert, so on one event loop the
two happen together, as the database stores' single transaction makes them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Literal

import msgspec

from pausemesh.core.push import (
    A2A_CHANNEL,
    NO_OUTCOME,
    OutboxEntry,
    PushClaim,
    PushConfigRecord,
    PushDelivery,
    PushDeliveryState,
    PushFailure,
    PushNotice,
    delivery_id,
)
from pausemesh.core.threads import ThreadRecord, ThreadStore

__all__ = ("InMemoryPushStore",)


class _Row(msgspec.Struct, kw_only=True):
    delivery: PushDelivery
    next_attempt_at: datetime | None
    holder: str | None = None
    lease_until: datetime | None = None
    delivered: bool = False
    error: str | None = None


class InMemoryPushStore:
    def __init__(self, threads: ThreadStore) -> None:
        self._threads = threads
        self._configs: dict[tuple[str, str], PushConfigRecord] = {}
        self._rows: dict[str, _Row] = {}

    async def set_config(self, record: PushConfigRecord, *, now: datetime) -> None:  # noqa: ARG002
        self._configs.pop((record.task_id, record.config_id), None)
        self._configs[(record.task_id, record.config_id)] = record

    async def configs(self, task_id: str, owner: str | None) -> list[PushConfigRecord]:
        return [c for c in self._configs.values() if c.task_id == task_id and c.owner == owner]

    async def delete_config(
        self,
        task_id: str,
        owner: str | None,
        config_id: str | None,
        *,
        now: datetime,  # noqa: ARG002 - the port's signature
    ) -> None:
        for key, config in list(self._configs.items()):
            mine = config.task_id == task_id and config.owner == owner
            if mine and config_id in (None, config.config_id):
                del self._configs[key]

    async def save_task(
        self, record: ThreadRecord, *, now: datetime, notice: PushNotice | None
    ) -> ThreadRecord:
        saved = await self._threads.save(record, now=now)
        if notice is None:
            return saved
        for config in list(self._configs.values()):
            if config.task_id != notice.task_id:
                continue
            key = delivery_id(notice.event_id, config.config_id)
            delivery = PushDelivery(
                delivery_id=key,
                task_id=notice.task_id,
                config=config.config,
                payload=notice.payload,
                attempts=0,
                created_at=now,
            )
            self._rows.setdefault(key, _Row(delivery=delivery, next_attempt_at=now))
        return saved

    def queue(self, entries: Sequence[OutboxEntry], *, now: datetime) -> None:
        """Queue ``entries`` due at ``now`` (the event store's append calls it, with no await
        between the stream's write and this)."""
        for entry in entries:
            delivery = PushDelivery(
                delivery_id=entry.delivery_id,
                task_id=entry.task_id,
                config=entry.config,
                payload=entry.payload,
                attempts=0,
                created_at=now,
                channel=entry.channel,
            )
            self._rows.setdefault(entry.delivery_id, _Row(delivery=delivery, next_attempt_at=now))

    async def claim(
        self,
        *,
        now: datetime,
        holder: str,
        lease_until: datetime,
        limit: int,
        max_attempts: int,
        per_key: int,
        channel: str = A2A_CHANNEL,
        skip_urls: Sequence[str] = (),
    ) -> PushClaim:
        skipped = set(skip_urls)
        due = sorted(
            (
                row
                for row in self._rows.values()
                if row.delivery.channel == channel
                and row.next_attempt_at is not None
                and row.next_attempt_at <= now
                and (row.lease_until is None or row.lease_until <= now)
            ),
            key=lambda row: (row.next_attempt_at or now, row.delivery.delivery_id),
        )
        given_up = []
        for row in due:
            if row.delivery.attempts >= max_attempts:
                row.next_attempt_at = row.holder = row.lease_until = None
                row.error = row.error or NO_OUTCOME
                given_up.append(_failure(row))
        # Ranks as the SQL stores compute them: over every due row, per task and per URL.
        by_task: Counter[str] = Counter()
        by_url: Counter[str] = Counter()
        chosen = []
        for row in due:
            if row.next_attempt_at is None or str(row.delivery.config.get("url")) in skipped:
                continue
            by_task[row.delivery.task_id] += 1
            by_url[str(row.delivery.config.get("url"))] += 1
            fair = max(by_task[row.delivery.task_id], by_url[str(row.delivery.config.get("url"))])
            if fair <= per_key:
                chosen.append(row)
        claimed = []
        for row in chosen[:limit]:
            row.holder, row.lease_until, row.next_attempt_at = holder, lease_until, lease_until
            row.delivery = msgspec.structs.replace(row.delivery, attempts=row.delivery.attempts + 1)
            claimed.append(row.delivery)
        return PushClaim(deliveries=claimed, given_up=given_up)

    async def settle(
        self,
        delivery_id: str,
        *,
        holder: str,
        now: datetime,  # noqa: ARG002 - the port's signature
        delivered: bool,
        retry_at: datetime | None,
        error: str | None,
    ) -> bool:
        row = self._rows.get(delivery_id)
        if row is None or row.holder != holder or row.next_attempt_at is None:
            return False
        row.holder = row.lease_until = None
        row.delivered, row.error = delivered, error
        row.next_attempt_at = None if delivered else retry_at
        return True

    async def delivery_state(self, delivery_id: str) -> PushDeliveryState | None:
        row = self._rows.get(delivery_id)
        if row is None:
            return None
        return PushDeliveryState(
            attempts=row.delivery.attempts, status=_status(row), last_error=row.error
        )


def _status(row: _Row) -> Literal["pending", "delivered", "failed"]:
    if row.delivered:
        return "delivered"
    return "pending" if row.next_attempt_at is not None else "failed"


def _failure(row: _Row) -> PushFailure:
    return PushFailure(
        delivery_id=row.delivery.delivery_id,
        task_id=row.delivery.task_id,
        attempts=row.delivery.attempts,
        error=row.error or NO_OUTCOME,
    )
