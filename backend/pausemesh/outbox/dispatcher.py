"""Sends one channel of the outbox: claim due deliveries with a lease, send them, settle them.

The one delivery loop of every outbox channel: A2A push notifications (``a2a/push_delivery.py``
gives it the A2A sender) and the event webhooks (``outbox/webhook_sender.py``). Every replica
runs one ``OutboxDispatcher`` per channel; the store's claim gives each due delivery to one of
them. A delivery that fails (connection refused, timeout, a non-2xx answer, or anything else
that goes wrong while it is sent) is retried with exponential backoff and jitter
(``backoff_seconds`` doubling up to ``backoff_max_seconds``, each delay drawn from its upper
half) until ``max_attempts``; a receiver answering 410 Gone is not retried, nor is a URL that
can never be called (the sender says so with a final outcome). A process that dies mid-send
leaves its lease to lapse, and the delivery is sent again, with the same id: delivery is at
least once, and the receiver drops duplicates by the id.

No delivery can stop the others: whatever one raises is that delivery's failed attempt, each
attempt is bounded by ``timeout_seconds`` as a whole (a receiver trickling its answer included),
the claim never hands out a delivery past its attempts and takes at most a quarter of a round
from one task or one URL (``PushStore.claim``), and a destination that failed rests (left out
of the claim) for its backoff; a channel that knows all its destinations (the webhooks) does
not even query the store while every one of them rests. The log says WARNING once when a delivery
first fails and once when it is given up, never once per attempt; the channel's counter counts
the outcomes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection
from datetime import datetime, timedelta
from typing import Protocol

import httpx
import msgspec

from pausemesh.core.clock import SystemClock
from pausemesh.core.ports import Clock
from pausemesh.core.push import PushDelivery, PushFailure, PushStore
from pausemesh.observability.telemetry import MetricSpec, count
from pausemesh.outbox.url_policy import PushUrlPolicy
from pausemesh.stores.backoff import retry_delay

__all__ = (
    "DELIVERED",
    "GONE",
    "OutboxDispatcher",
    "OutboxOptions",
    "SendOutcome",
    "Sender",
    "post_delivery",
)

_BATCH = 20
# At most this many deliveries of one task, or to one URL, per round: the rest of the round
# stays open to everyone else.
_PER_KEY = _BATCH // 4


class SendOutcome(msgspec.Struct, frozen=True):
    """One attempt's outcome: ``error`` None when delivered; ``final``: no other attempt can
    do better (410 Gone, a URL that can never be called)."""

    error: str | None
    final: bool = False


DELIVERED = SendOutcome(None)
GONE = SendOutcome("gone", final=True)


async def post_delivery(
    client: httpx.AsyncClient,
    policy: PushUrlPolicy,
    url: str,
    body: bytes,
    headers: Callable[[bytes], dict[str, str]],
) -> SendOutcome:
    """What every channel's sender does with a delivery once it knows its URL: the address
    policy first (a URL whose text can never be called is final; one refused now is retried,
    DNS may say otherwise later), then one POST of ``body`` with the ``headers`` made for it
    (signed), and the answer as an outcome (410 Gone final, any other non-2xx a failure)."""
    never = policy.static_refusal(url)
    if never is not None:
        return SendOutcome(never, final=True)
    refused = await policy.refusal(url)
    if refused is not None:
        return SendOutcome(refused)
    response = await client.post(url, content=body, headers=headers(body))
    if response.status_code == 410:
        return GONE
    if not response.is_success:
        return SendOutcome(f"HTTP {response.status_code}")
    return DELIVERED


class Sender(Protocol):
    async def __call__(self, client: httpx.AsyncClient, delivery: PushDelivery) -> SendOutcome:
        """Send one delivery once (the dispatcher bounds its time and catches what it raises)."""
        ...


class OutboxOptions(msgspec.Struct, frozen=True, kw_only=True):
    max_attempts: int = 12
    backoff_seconds: float = 1.0
    backoff_max_seconds: float = 300.0
    lease_seconds: float = 30.0
    timeout_seconds: float = 10.0
    poll_seconds: float = 1.0


class OutboxDispatcher:
    """Delivers the outbox rows of ``channel`` with ``sender``; ``what`` names them in the log
    (``push delivery``, ``webhook delivery``) in the ``logger`` log, ``metric`` counts their
    outcomes."""

    def __init__(
        self,
        store: Callable[[], PushStore],
        sender: Sender,
        *,
        channel: str,
        holder: str,
        metric: MetricSpec,
        what: str,
        logger: str,
        options: OutboxOptions | None = None,
        clock: Clock | None = None,
        destinations: Callable[[], Collection[str]] | None = None,
    ) -> None:
        self._store = store
        # Every URL this channel delivers to, when known (the webhook subscriptions; None for
        # A2A push, whose URLs clients choose): while each of them rests, no round can claim.
        self._destinations = destinations
        self._sender = sender
        self._channel = channel
        self._holder = holder
        self._metric = metric
        self._options = options or OutboxOptions()
        self._clock = clock or SystemClock()
        self._wake = asyncio.Event()
        self._store_failing = False
        # Whether the last round may have left due deliveries of keys it did not try.
        self._more_due = False
        # Destinations resting after a failed attempt: URL -> (until, failures in a row).
        self._resting: dict[str, tuple[datetime, int]] = {}
        self._what = what
        self._log = logging.getLogger(logger)

    def wake(self, urls: Collection[str] = ()) -> None:
        """A delivery was just queued (to ``urls``, when known): look now rather than at the
        next poll, unless every one of them goes to a resting destination."""
        if urls and all(url in self._resting for url in urls):
            return
        self._wake.set()

    def _rest(self, url: str, failed: bool) -> None:
        """A destination that failed rests (its deliveries stay due, unclaimed) for the
        backoff of its failures in a row, so a destination that is down costs a few attempts
        per backoff instead of one per queued delivery; one that answered is awake again."""
        if not failed:
            self._resting.pop(url, None)
            return
        _, failures = self._resting.get(url, (None, 0))
        options = self._options
        delay = retry_delay(failures + 1, options.backoff_seconds, options.backoff_max_seconds)
        self._resting[url] = (self._clock.now() + timedelta(seconds=delay), failures + 1)

    def _resting_urls(self, now: datetime) -> list[str]:
        # A destination quiet for a whole maximum backoff is forgotten (the map stays small
        # however many client-chosen URLs failed once).
        forget = now - timedelta(seconds=self._options.backoff_max_seconds)
        for url in [url for url, (until, _) in self._resting.items() if until < forget]:
            del self._resting[url]
        return [url for url, (until, _) in self._resting.items() if until > now]

    def _all_resting(self, resting: list[str]) -> bool:
        if self._destinations is None or not resting:
            return False
        destinations = self._destinations()
        return bool(destinations) and set(destinations) <= set(resting)

    def _limit(self, resting: list[str]) -> int:
        """A round's claim: a batch, or when the destinations are known, no more than the
        awake ones can take (a quarter of a batch each), so that a store need not look past
        the first due rows of a backlog for what no round could take."""
        if self._destinations is None:
            return _BATCH
        awake = set(self._destinations()) - set(resting)
        return min(_BATCH, _PER_KEY * len(awake)) if awake else _BATCH

    async def run(self) -> None:
        """Deliver until cancelled (the app lifespan runs it as a task)."""
        options = self._options
        timeout = httpx.Timeout(options.timeout_seconds)
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=False) as client:
            while True:
                self._wake.clear()
                try:
                    claimed = await self.deliver_due(client)
                except Exception:  # noqa: BLE001 - a store outage must not end delivery
                    self._round_failed()
                    claimed = 0
                else:
                    self._round_worked()
                # A fair claim may leave due deliveries behind: look again until none is, unless
                # what is left belongs only to destinations that just failed (see deliver_due).
                if claimed and self._more_due:
                    continue
                # asyncio.timeout, not wait_for: on Python 3.11 wait_for returns the inner
                # result when a wake-up and a cancel arrive together, and the task then runs on
                # though cancelled (a shutdown, or a caller's gather, would wait forever).
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(options.poll_seconds):
                        await self._wake.wait()

    def _round_failed(self) -> None:
        # Once when the store starts failing, not once per poll while it is down.
        if not self._store_failing:
            self._store_failing = True
            self._log.warning("%s round failed; retrying", self._what, exc_info=True)
        else:
            self._log.debug("%s round failed again", self._what, exc_info=True)

    def _round_worked(self) -> None:
        if self._store_failing:
            self._store_failing = False
            self._log.info("%s rounds work again", self._what)

    async def deliver_due(self, client: httpx.AsyncClient) -> int:
        """One round: claim what is due and send it; returns how many deliveries it took
        (sent or given up)."""
        options = self._options
        now = self._clock.now()
        resting = self._resting_urls(now)
        if self._all_resting(resting):
            # Not even the store's due query: a backlog to destinations that are down then
            # costs nothing per poll until a rest ends (the poll after it claims again).
            self._more_due = False
            return 0
        limit = self._limit(resting)
        claim = await self._store().claim(
            now=now,
            holder=self._holder,
            lease_until=now + timedelta(seconds=options.lease_seconds),
            limit=limit,
            max_attempts=options.max_attempts,
            per_key=_PER_KEY,
            channel=self._channel,
            skip_urls=resting,
        )
        for failure in claim.given_up:
            self._gave_up(failure)
        outcomes = await asyncio.gather(*(self._deliver(client, d) for d in claim.deliveries))
        # A round that took less than its limit gave every due key its share: what is left is
        # more of the same keys. When all of them failed, the next round waits for the poll
        # (or a wake-up) instead of spinning on a destination that is down, which then rests:
        # its backlog costs a round when its rest ends, not the store's every write.
        self._more_due = len(claim.deliveries) >= limit or any(outcomes) or bool(claim.given_up)
        return len(claim.deliveries) + len(claim.given_up)

    async def _deliver(self, client: httpx.AsyncClient, delivery: PushDelivery) -> bool:
        """One attempt, settled; whether it was delivered."""
        try:
            async with asyncio.timeout(self._options.timeout_seconds):
                outcome = await self._sender(client, delivery)
        except Exception as failure:  # noqa: BLE001 - whatever one delivery raises is its own failed attempt
            outcome = SendOutcome(type(failure).__name__)
        now = self._clock.now()
        options = self._options
        if not outcome.final:
            self._rest(str(delivery.config.get("url", "")), failed=outcome.error is not None)
        retry_at = None
        retry = not outcome.final and delivery.attempts < options.max_attempts
        if outcome.error is not None and retry:
            delay = retry_delay(
                delivery.attempts, options.backoff_seconds, options.backoff_max_seconds
            )
            retry_at = now + timedelta(seconds=delay)
        try:
            settled = await self._store().settle(
                delivery.delivery_id,
                holder=self._holder,
                now=now,
                delivered=outcome.error is None,
                retry_at=retry_at,
                error=outcome.error,
            )
        except Exception:  # noqa: BLE001 - the lease lapses and the delivery is claimed again
            self._log.debug(
                "%s %s: could not settle", self._what, delivery.delivery_id, exc_info=True
            )
            return False
        if not settled:
            self._log.warning(
                "%s %s: lease lapsed before it settled", self._what, delivery.delivery_id
            )
            return False
        self._report(delivery, outcome, retry_at is not None)
        return outcome.error is None

    def _report(self, delivery: PushDelivery, outcome: SendOutcome, retrying: bool) -> None:
        if outcome.error is None:
            count(self._metric, "delivered")
            if delivery.attempts > 1:
                self._log.info(
                    "%s %s delivered at attempt %d",
                    self._what,
                    delivery.delivery_id,
                    delivery.attempts,
                )
            return
        if not retrying:
            self._gave_up(
                PushFailure(
                    delivery_id=delivery.delivery_id,
                    task_id=delivery.task_id,
                    attempts=delivery.attempts,
                    error=outcome.error,
                )
            )
            return
        count(self._metric, "retry")
        # One WARNING per delivery at its first failure; later attempts at DEBUG.
        level = logging.WARNING if delivery.attempts == 1 else logging.DEBUG
        self._log.log(
            level,
            "%s %s for task %s failed (attempt %d of %d, retrying): %s",
            self._what,
            delivery.delivery_id,
            delivery.task_id,
            delivery.attempts,
            self._options.max_attempts,
            outcome.error,
        )

    def _gave_up(self, failure: PushFailure) -> None:
        count(self._metric, "failed")
        self._log.warning(
            "%s %s for task %s given up after %d attempts: %s",
            self._what,
            failure.delivery_id,
            failure.task_id,
            failure.attempts,
            failure.error,
        )
