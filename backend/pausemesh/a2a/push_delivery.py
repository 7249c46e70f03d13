"""Sends the push outbox: claim due deliveries with a lease, POST them signed, settle them.

Every replica runs one ``PushDispatcher``; the store's claim gives each due delivery to one
of them. A delivery that fails (connection refused, timeout, a non-2xx answer) is retried
with exponential backoff (``backoff_seconds`` doubling up to ``backoff_max_seconds``) until
``max_attempts``; a receiver answering 410 Gone is not retried. A process that dies mid-send
leaves its lease to lapse, and the delivery is sent again, with the same id: delivery is at
least once, and the receiver drops duplicates by the id.
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
from pausemesh.core.push import PushDelivery, PushStore

__all__ = ("DELIVERY_ID_HEADER", "PushDispatcher", "PushOptions")

_log = logging.getLogger("pausemesh.a2a.push")

DELIVERY_ID_HEADER = "X-A2A-Notification-Id"
_SIGNATURE_HEADER = "X-A2A-Notification-Signature"
_TOKEN_HEADER = "X-A2A-Notification-Token"  # noqa: S105 - a header name, not a secret
_BATCH = 20


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
                    _log.warning("push delivery round failed; retrying", exc_info=True)
                    claimed = 0
                if claimed >= _BATCH:
                    continue
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), options.poll_seconds)

    async def deliver_due(self, client: httpx.AsyncClient) -> int:
        """One round: claim what is due and send it; returns how many were claimed."""
        now = self._clock.now()
        lease_until = now + timedelta(seconds=self._options.lease_seconds)
        claimed = await self._store().claim(
            now=now, holder=self._holder, lease_until=lease_until, limit=_BATCH
        )
        await asyncio.gather(*(self._deliver(client, d) for d in claimed))
        return len(claimed)

    async def _deliver(self, client: httpx.AsyncClient, delivery: PushDelivery) -> None:
        error = await self._send(client, delivery)
        now = self._clock.now()
        retry_at = None
        if error is not None and error != "gone" and delivery.attempts < self._options.max_attempts:
            delay = self._options.backoff_seconds * 2 ** (delivery.attempts - 1)
            retry_at = now + timedelta(seconds=min(delay, self._options.backoff_max_seconds))
        if error is not None:
            _log.info(
                "push delivery %s attempt %d failed: %s",
                delivery.delivery_id,
                delivery.attempts,
                error,
            )
        settled = await self._store().settle(
            delivery.delivery_id,
            holder=self._holder,
            now=now,
            delivered=error is None,
            retry_at=retry_at,
            error=error,
        )
        if not settled:
            _log.warning("push delivery %s: lease lapsed before it settled", delivery.delivery_id)

    async def _send(self, client: httpx.AsyncClient, delivery: PushDelivery) -> str | None:
        config = delivery.config
        url = str(config.get("url", ""))
        if not await self._policy(url):
            return "the webhook URL is outside the push allow policy"
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
        try:
            response = await client.post(url, content=body, headers=headers)
        except httpx.HTTPError as failure:
            return type(failure).__name__
        if response.status_code == 410:
            return "gone"
        if not response.is_success:
            return f"HTTP {response.status_code}"
        return None


def _authorization(authentication: Any, token: str) -> str:
    """The client's own credentials when its configuration has them, else our JWT."""
    if isinstance(authentication, dict):
        scheme, credentials = authentication.get("scheme"), authentication.get("credentials")
        if scheme and credentials:
            return f"{scheme} {credentials}"
    return f"Bearer {token}"
