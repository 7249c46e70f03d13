"""The event webhooks' channel of the outbox: each delivery signed per Standard Webhooks.

A delivery is POSTed as its stored body (``core/webhooks.py``), with its decision links added
here when the server mints them (``links``: never stored, never logged), and three headers:
``webhook-id`` (the delivery id, the same on every retry: receivers drop duplicates by it),
``webhook-timestamp`` (seconds) and ``webhook-signature``: ``v1,<base64 HMAC-SHA256>`` of
``id.timestamp.body`` with each of the subscription's secrets, space-separated, so a receiver
that still holds the previous secret verifies during a rotation (the ``standardwebhooks``
package signs; any Standard Webhooks verifier checks it). Secrets are read from the
subscriptions as configured now, never stored with the delivery: a rotation applies to
deliveries already queued, and a delivery whose subscription is gone is given up.

Destinations are under the A2A push address policy (``outbox/url_policy.py``,
``PAUSEMESH_A2A_PUSH_ALLOW``), checked before every attempt.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import msgspec
from standardwebhooks.webhooks import Webhook

from pausemesh.core.clock import SystemClock
from pausemesh.core.ports import Clock
from pausemesh.core.push import PushDelivery, PushStore
from pausemesh.core.webhooks import WEBHOOK_CHANNEL, WebhookRoutes
from pausemesh.observability.telemetry import WEBHOOK_DELIVERIES
from pausemesh.outbox.dispatcher import (
    OutboxDispatcher,
    OutboxOptions,
    SendOutcome,
    post_delivery,
)
from pausemesh.outbox.url_policy import PushUrlPolicy

__all__ = ("Links", "WebhookSender", "sign_headers", "webhook_dispatcher")

Links = Callable[[dict[str, Any]], list[dict[str, Any]] | None]
"""Given a body's ``data``, the decision links to add to it (None: none)."""

_GONE_SUBSCRIPTION = SendOutcome("the webhook is no longer configured", final=True)


def sign_headers(
    secrets: tuple[str, ...], delivery_id: str, body: bytes, now_seconds: int
) -> dict[str, str]:
    """The Standard Webhooks headers of one attempt: one signature per secret."""
    from datetime import UTC, datetime  # noqa: PLC0415 - the package takes a datetime

    at = datetime.fromtimestamp(now_seconds, UTC)
    signatures = " ".join(Webhook(secret).sign(delivery_id, at, body) for secret in secrets)
    return {
        "webhook-id": delivery_id,
        "webhook-timestamp": str(now_seconds),
        "webhook-signature": signatures,
    }


class WebhookSender:
    """Sends one webhook delivery (the dispatcher's ``Sender``)."""

    __slots__ = ("_clock", "_links", "_policy", "_routes")

    def __init__(
        self,
        routes: WebhookRoutes,
        policy: PushUrlPolicy,
        *,
        clock: Clock | None = None,
        links: Links | None = None,
    ) -> None:
        self._routes = routes
        self._policy = policy
        self._clock = clock or SystemClock()
        self._links = links

    def body(self, delivery: PushDelivery) -> bytes:
        payload = delivery.payload
        data = payload.get("data")
        if self._links is not None and isinstance(data, dict):
            links = self._links(data)
            if links is not None:
                payload = {**payload, "data": {**data, "links": links}}
        return msgspec.json.encode(payload)

    async def __call__(self, client: httpx.AsyncClient, delivery: PushDelivery) -> SendOutcome:
        subscription = self._routes.by_id.get(str(delivery.config.get("subscription")))
        if subscription is None:
            return _GONE_SUBSCRIPTION

        def headers(body: bytes) -> dict[str, str]:
            timestamp = int(self._clock.now().timestamp())
            signed = sign_headers(subscription.secrets, delivery.delivery_id, body, timestamp)
            signed["content-type"] = "application/json"
            return signed

        return await post_delivery(
            client, self._policy, subscription.url, self.body(delivery), headers
        )


def webhook_dispatcher(
    store: Callable[[], PushStore],
    routes: WebhookRoutes,
    policy: PushUrlPolicy,
    *,
    holder: str,
    options: OutboxOptions | None = None,
    clock: Clock | None = None,
    links: Links | None = None,
) -> OutboxDispatcher:
    """The webhook channel's dispatcher; queued deliveries wake it (``routes.wake``)."""
    dispatcher = OutboxDispatcher(
        store,
        WebhookSender(routes, policy, clock=clock, links=links),
        channel=WEBHOOK_CHANNEL,
        holder=holder,
        metric=WEBHOOK_DELIVERIES,
        what="webhook delivery",
        logger="pausemesh.webhooks",
        options=options,
        clock=clock,
        destinations=lambda: [subscription.url for subscription in routes.subscriptions],
    )
    routes.wake = dispatcher.wake
    return dispatcher
