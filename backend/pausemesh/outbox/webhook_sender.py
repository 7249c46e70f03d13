"""The event webhooks' channel of the outbox: each delivery signed per Standard Webhooks.

A delivery is POSTed as its body (``core/webhooks.py``): a pause event's is rendered here from
its stream (``pause_body``: the delivery names the event), another's (an operation whose outcome
is unknown, or a pause delivery queued before) is stored whole. Its decision links are added
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
from pausemesh.core.ports import Clock, EventStore
from pausemesh.core.push import PushDelivery, PushStore
from pausemesh.core.webhooks import WEBHOOK_CHANNEL, WebhookRoutes, pause_body
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
_GONE_EVENT = SendOutcome("the pause event is not in the store", final=True)


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

    __slots__ = ("_clock", "_events", "_links", "_policy", "_routes")

    def __init__(
        self,
        routes: WebhookRoutes,
        policy: PushUrlPolicy,
        *,
        events: EventStore,
        clock: Clock | None = None,
        links: Links | None = None,
    ) -> None:
        self._routes = routes
        self._policy = policy
        # Where a pause event's body is rendered from (its delivery names the event).
        self._events = events
        self._clock = clock or SystemClock()
        self._links = links

    async def payload(self, delivery: PushDelivery) -> dict[str, Any] | None:
        """The delivery's body as a document (None: its pause event is not in the store)."""
        stored = delivery.payload
        if "data" in stored:  # stored whole
            return stored
        pause, version = stored.get("pause"), stored.get("version")
        if not isinstance(pause, str) or not isinstance(version, int):
            return None
        return pause_body(await self._events.load(pause), version)

    def body(self, payload: dict[str, Any]) -> bytes:
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
        payload = await self.payload(delivery)
        if payload is None:
            return _GONE_EVENT

        def headers(body: bytes) -> dict[str, str]:
            timestamp = int(self._clock.now().timestamp())
            signed = sign_headers(subscription.secrets, delivery.delivery_id, body, timestamp)
            signed["content-type"] = "application/json"
            return signed

        return await post_delivery(
            client, self._policy, subscription.url, self.body(payload), headers
        )


def webhook_dispatcher(
    store: Callable[[], PushStore],
    routes: WebhookRoutes,
    policy: PushUrlPolicy,
    *,
    events: EventStore,
    holder: str,
    options: OutboxOptions | None = None,
    clock: Clock | None = None,
    links: Links | None = None,
) -> OutboxDispatcher:
    """The webhook channel's dispatcher; queued deliveries wake it (``routes.wake``).
    ``events``: the store pause events' bodies are rendered from."""
    dispatcher = OutboxDispatcher(
        store,
        WebhookSender(routes, policy, events=events, clock=clock, links=links),
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
