"""Push notifications: durable webhook configurations and an outbox of deliveries.

Protocol-neutral records (the A2A router fills them with ProtoJSON documents) and the port a
store implements. The outbox is written by ``save_task`` in the same transaction as the task
record's change, so a state change is never committed without its deliveries queued (or the
other way round); deliveries are then claimed with a lease, so one replica sends each, and a
claim that lapsed (its process died) is taken again: delivery is at least once, and every
attempt of one delivery carries the same ``delivery_id``.

A claim is bounded and fair, the same on every store:

* a delivery is never claimed once it has had ``max_attempts`` attempts: one whose last
  attempt left no outcome (its process died, or a row from before the cap) is given up by the
  claim (settled failed) and reported in ``PushClaim.given_up``;
* claiming moves a delivery's next attempt to the end of its lease, so a delivery whose
  sender never settles it waits for the lease like any retry instead of staying first in line;
* due deliveries are taken oldest first (next attempt, then id), but at most ``per_key`` of
  one task and at most ``per_key`` of one webhook URL per claim: a task or a URL with many
  deliveries due cannot fill every claim and starve the others.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

import msgspec

from pausemesh.core.threads import ThreadRecord

__all__ = (
    "A2A_CHANNEL",
    "NO_OUTCOME",
    "OutboxEntry",
    "PushClaim",
    "PushConfigRecord",
    "PushDelivery",
    "PushDeliveryState",
    "PushFailure",
    "PushNotice",
    "PushStore",
    "delivery_id",
    "timed_delivery_id",
)

# The error recorded for a delivery given up after a last attempt that left no outcome.
NO_OUTCOME = "no outcome recorded for the last attempt"

# The outbox carries deliveries of several channels (``channel``): the A2A push notifications
# queued by ``save_task`` and the event webhooks queued with a continuation's events
# (``EventStore.append(outbox=...)``, ``core/webhooks.py``). One table, one claim, one
# dispatcher (``outbox/dispatcher.py``) per channel, each with its own sender.
A2A_CHANNEL = "a2a"


def delivery_id(event_id: str, config_id: str) -> str:
    """An opaque id per (state change, webhook): header-safe whatever the config id holds."""
    return hashlib.sha256(f"{event_id}\n{config_id}".encode()).hexdigest()[:32]


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def timed_delivery_id(event_id: str, config_id: str, at: datetime) -> str:
    """``delivery_id``'s form for an event that happened once at ``at``: the time first (14 hex
    digits of microseconds), then 18 of the hash. Ids of later changes sort after earlier ones,
    so the outbox's index on the id grows at its end, one page per commit, instead of taking a
    random page per delivery (a third of what a webhook cost a pause's write on SQLite)."""
    # Aware datetimes subtract in UTC whatever their zone; the integer sum is cheaper than a
    # conversion and a timedelta division (it runs on every pause's write: issue 45).
    since = at - _EPOCH
    micros = (since.days * 86_400 + since.seconds) * 1_000_000 + since.microseconds
    return f"{micros:014x}{delivery_id(event_id, config_id)[:18]}"


class PushConfigRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A client's webhook for one task (``config`` is the protocol's own document)."""

    task_id: str
    config_id: str
    owner: str | None
    config: dict[str, Any]


class PushNotice(msgspec.Struct, frozen=True, kw_only=True):
    """One state change of a task, to be sent to every webhook registered for it."""

    event_id: str
    task_id: str
    payload: dict[str, Any]


class OutboxEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One delivery to queue with a state change: ``task_id`` is its fairness key (one key
    never takes more than its share of a claim), ``config`` names the destination (its
    ``url``) and whatever the channel's sender needs; ``delivery_id`` is stable."""

    delivery_id: str
    task_id: str
    channel: str
    config: dict[str, Any]
    payload: dict[str, Any]


class PushDelivery(msgspec.Struct, frozen=True, kw_only=True):
    """One notice for one webhook; ``delivery_id`` is the same on every attempt."""

    delivery_id: str
    task_id: str
    config: dict[str, Any]
    payload: dict[str, Any]
    attempts: int
    created_at: datetime
    channel: str = A2A_CHANNEL


class PushFailure(msgspec.Struct, frozen=True, kw_only=True):
    """A delivery given up for good (its error: the last one recorded)."""

    delivery_id: str
    task_id: str
    attempts: int
    error: str


class PushClaim(msgspec.Struct, frozen=True, kw_only=True):
    """What one claim did: the deliveries now leased to the claimer, and those it gave up."""

    deliveries: list[PushDelivery]
    given_up: list[PushFailure]


class PushDeliveryState(msgspec.Struct, frozen=True, kw_only=True):
    """Where one delivery stands: ``pending`` (due or scheduled), ``delivered`` or ``failed``
    (given up: past its attempts, ``410 Gone``, or a URL that can never be called)."""

    attempts: int
    status: Literal["pending", "delivered", "failed"]
    last_error: str | None


class PushStore(Protocol):
    async def set_config(self, record: PushConfigRecord, *, now: datetime) -> None:
        """Create or replace the webhook ``(task_id, config_id)``."""
        ...

    async def configs(self, task_id: str, owner: str | None) -> list[PushConfigRecord]:
        """The owner's live webhooks of one task, oldest first."""
        ...

    async def delete_config(
        self, task_id: str, owner: str | None, config_id: str | None, *, now: datetime
    ) -> None:
        """Retire one webhook (every one of the owner's for the task without ``config_id``).

        Deliveries already queued for it are still sent: they were owed when queued."""
        ...

    async def save_task(
        self, record: ThreadRecord, *, now: datetime, notice: PushNotice | None
    ) -> ThreadRecord:
        """``ThreadStore.save`` (same CAS, same errors) that also queues ``notice`` for every
        live webhook of its task, in the same transaction."""
        ...

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
        """Lease up to ``limit`` due deliveries of ``channel`` to ``holder`` (none held by a
        live lease), at most ``per_key`` per task and per URL, none to ``skip_urls`` (resting
        destinations: they stay due), each with fewer than ``max_attempts`` attempts; give
        up the due ones of ``channel`` that have had them. Each claimed delivery's attempt count goes
        up by one and its next attempt moves to ``lease_until``."""
        ...

    async def settle(
        self,
        delivery_id: str,
        *,
        holder: str,
        now: datetime,
        delivered: bool,
        retry_at: datetime | None,
        error: str | None,
    ) -> bool:
        """Record an attempt's outcome if ``holder`` still holds the lease.

        ``delivered`` ends it; otherwise ``retry_at`` schedules the next attempt, or ``None``
        gives up. Returns whether the lease was still held."""
        ...

    async def delivery_state(self, delivery_id: str) -> PushDeliveryState | None:
        """Where one delivery stands, for operators and tests."""
        ...
