"""Sends the push outbox: claim due deliveries with a lease, POST them signed, settle them.

Every replica runs one ``PushDispatcher``; the store's claim gives each due delivery to one
of them. A delivery that fails (connection refused, timeout, a non-2xx answer, or anything
else that goes wrong while it is sent) is retried with exponential backoff and jitter
(``backoff_seconds`` doubling up to ``backoff_max_seconds``, each delay drawn from its upper
half) until ``max_attempts``; a receiver answering 410 Gone is not retried, nor is a URL that
can never be called (whitespace or control characters: a row stored before registration
refused them). A process that dies mid-send leaves its lease to lapse, and the delivery is
sent again, with the same id: delivery is at least once, and the receiver drops duplicates by
the id.

No delivery can stop the others: whatever one raises is that delivery's failed attempt, each
attempt is bounded by ``timeout_seconds`` as a whole (a receiver trickling its answer included),
the claim never hands out a delivery past its attempts and takes at most a quarter of a round
from one task or one URL (``PushStore.claim``). The log says WARNING once when a delivery
first fails and once when it is given up, never once per attempt; the counter
``pausemesh_a2a_push_deliveries_total`` counts the outcomes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import httpx
import msgspec

from pausemesh.a2a.push_policy import PushUrlPolicy
from pausemesh.a2a.push_signing import PushSigner
from pausemesh.core.clock import SystemClock
from pausemesh.core.ports import Clock
from pausemesh.core.push import PushDelivery, PushFailure, PushStore
from pausemesh.observability.telemetry import A2A_PUSH_DELIVERIES, count
from pausemesh.stores.backoff import retry_delay

__all__ = ("DELIVERY_ID_HEADER", "PushDispatcher", "PushOptions")

_log = logging.getLogger("pausemesh.a2a.push")

DELIVERY_ID_HEADER = "X-A2A-Notification-Id"
_SIGNATURE_HEADER = "X-A2A-Notification-Signature"
_TOKEN_HEADER = "X-A2A-Notification-Token"  # noqa: S105 - a header name, not a secret
_BATCH = 20
# At most this many deliveries of one task, or to one URL, per round: the rest of the round
# stays open to everyone else.
_PER_KEY = _BATCH // 4


class _Outcome(msgspec.Struct, frozen=True):
    error: str | None
    final: bool = False  # no other attempt can do better


_DELIVERED = _Outcome(None)
_GONE = _Outcome("gone", final=True)


class PushOptions(msgspec.Struct, frozen=True, kw_only=True):
    max_attempts: int = 12
    backoff_seconds: float = 1.0
    backoff_max_seconds: float = 300.0
    lease_seconds: float = 30.0
    timeout_seconds: float = 10.0
    poll_seconds: float = 1.0


class PushDispatcher:
    def __init__(
        self,
        store: Callable[[], PushStore],
        signer: PushSigner,
        policy: PushUrlPolicy,
        *,
        holder: str,
        options: PushOptions | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._store = store
        self._signer = signer
        self._policy = policy
        self._holder = holder
        self._options = options or PushOptions()
        self._clock = clock or SystemClock()
        self._wake = asyncio.Event()
        self._store_failing = False

    def wake(self) -> None:
        """A notice was just queued: look now rather than at the next poll."""
        self._wake.set()

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
                # A fair claim may leave due deliveries behind: look again until none is.
                if claimed:
                    continue
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), options.poll_seconds)

    def _round_failed(self) -> None:
        # Once when the store starts failing, not once per poll while it is down.
        if not self._store_failing:
            self._store_failing = True
            _log.warning("push delivery round failed; retrying", exc_info=True)
        else:
            _log.debug("push delivery round failed again", exc_info=True)

    def _round_worked(self) -> None:
        if self._store_failing:
            self._store_failing = False
            _log.info("push delivery rounds work again")

    async def deliver_due(self, client: httpx.AsyncClient) -> int:
        """One round: claim what is due and send it; returns how many deliveries it took
        (sent or given up)."""
        options = self._options
        now = self._clock.now()
        claim = await self._store().claim(
            now=now,
            holder=self._holder,
            lease_until=now + timedelta(seconds=options.lease_seconds),
            limit=_BATCH,
            max_attempts=options.max_attempts,
            per_key=_PER_KEY,
        )
        for failure in claim.given_up:
            _gave_up(failure)
        await asyncio.gather(*(self._deliver(client, d) for d in claim.deliveries))
        return len(claim.deliveries) + len(claim.given_up)

    async def _deliver(self, client: httpx.AsyncClient, delivery: PushDelivery) -> None:
        try:
            async with asyncio.timeout(self._options.timeout_seconds):
                outcome = await self._send(client, delivery)
        except Exception as failure:  # noqa: BLE001 - whatever one delivery raises is its own failed attempt
            outcome = _Outcome(type(failure).__name__)
        now = self._clock.now()
        options = self._options
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
            _log.debug("push delivery %s: could not settle", delivery.delivery_id, exc_info=True)
            return
        if not settled:
            _log.warning("push delivery %s: lease lapsed before it settled", delivery.delivery_id)
            return
        self._report(delivery, outcome, retry_at is not None)

    def _report(self, delivery: PushDelivery, outcome: _Outcome, retrying: bool) -> None:
        if outcome.error is None:
            count(A2A_PUSH_DELIVERIES, "delivered")
            if delivery.attempts > 1:
                _log.info(
                    "push delivery %s delivered at attempt %d",
                    delivery.delivery_id,
                    delivery.attempts,
                )
            return
        if not retrying:
            _gave_up(
                PushFailure(
                    delivery_id=delivery.delivery_id,
                    task_id=delivery.task_id,
                    attempts=delivery.attempts,
                    error=outcome.error,
                )
            )
            return
        count(A2A_PUSH_DELIVERIES, "retry")
        # One WARNING per delivery at its first failure; later attempts at DEBUG.
        level = logging.WARNING if delivery.attempts == 1 else logging.DEBUG
        _log.log(
            level,
            "push delivery %s for task %s failed (attempt %d of %d, retrying): %s",
            delivery.delivery_id,
            delivery.task_id,
            delivery.attempts,
            self._options.max_attempts,
            outcome.error,
        )

    async def _send(self, client: httpx.AsyncClient, delivery: PushDelivery) -> _Outcome:
        config = delivery.config
        url = str(config.get("url", ""))
        never = self._policy.static_refusal(url)
        if never is not None:
            return _Outcome(never, final=True)
        refused = await self._policy.refusal(url)
        if refused is not None:
            return _Outcome(refused)  # DNS may say otherwise later
        body = msgspec.json.encode({"task": delivery.payload})
        token = self._signer.sign(
            delivery_id=delivery.delivery_id,
            task_id=delivery.task_id,
            url=url,
            body=body,
            now=self._clock.now(),
        )
        headers = {
            "content-type": "application/json",
            DELIVERY_ID_HEADER: delivery.delivery_id,
            _SIGNATURE_HEADER: token,
        }
        if config.get("token"):
            headers[_TOKEN_HEADER] = str(config["token"])
        headers["authorization"] = _authorization(config.get("authentication"), token)
        response = await client.post(url, content=body, headers=headers)
        if response.status_code == 410:
            return _GONE
        if not response.is_success:
            return _Outcome(f"HTTP {response.status_code}")
        return _DELIVERED


def _gave_up(failure: PushFailure) -> None:
    count(A2A_PUSH_DELIVERIES, "failed")
    _log.warning(
        "push delivery %s for task %s given up after %d attempts: %s",
        failure.delivery_id,
        failure.task_id,
        failure.attempts,
        failure.error,
    )


def _authorization(authentication: Any, token: str) -> str:
    """The client's own credentials when its configuration has them, else our JWT."""
    if isinstance(authentication, dict):
        scheme, credentials = authentication.get("scheme"), authentication.get("credentials")
        if scheme and credentials:
            return f"{scheme} {credentials}"
    return f"Bearer {token}"
