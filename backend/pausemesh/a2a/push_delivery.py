"""Sends the A2A push outbox: the outbox dispatcher (``outbox/dispatcher.py``: claim due
deliveries with a lease, send, retry with backoff and jitter, settle) with the A2A sender.

Each delivery is POSTed as ``{"task": ...}`` with its id (``X-A2A-Notification-Id``, the
same on every retry), its ES256 JWT (``a2a/push_signing.py``) and the client's token; a URL
whose text can never be called is given up at once, one the address policy refuses now is
retried (DNS may say otherwise later). The counter ``pausemesh_a2a_push_deliveries_total``
counts the outcomes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import msgspec

from pausemesh.a2a.push_policy import PushUrlPolicy
from pausemesh.a2a.push_signing import PushSigner
from pausemesh.core.clock import SystemClock
from pausemesh.core.ports import Clock
from pausemesh.core.push import A2A_CHANNEL, PushDelivery, PushStore
from pausemesh.observability.telemetry import A2A_PUSH_DELIVERIES
from pausemesh.outbox.dispatcher import (
    OutboxDispatcher,
    OutboxOptions,
    SendOutcome,
    post_delivery,
)

__all__ = ("DELIVERY_ID_HEADER", "PushDispatcher", "PushOptions")

DELIVERY_ID_HEADER = "X-A2A-Notification-Id"
_SIGNATURE_HEADER = "X-A2A-Notification-Signature"
_TOKEN_HEADER = "X-A2A-Notification-Token"  # noqa: S105 - a header name, not a secret

PushOptions = OutboxOptions


class _A2aSender:
    __slots__ = ("_clock", "_policy", "_signer")

    def __init__(self, signer: PushSigner, policy: PushUrlPolicy, clock: Clock) -> None:
        self._signer = signer
        self._policy = policy
        self._clock = clock

    async def __call__(self, client: httpx.AsyncClient, delivery: PushDelivery) -> SendOutcome:
        config = delivery.config
        url = str(config.get("url", ""))

        def headers(body: bytes) -> dict[str, str]:
            token = self._signer.sign(
                delivery_id=delivery.delivery_id,
                task_id=delivery.task_id,
                url=url,
                body=body,
                now=self._clock.now(),
            )
            signed = {
                "content-type": "application/json",
                DELIVERY_ID_HEADER: delivery.delivery_id,
                _SIGNATURE_HEADER: token,
            }
            if config.get("token"):
                signed[_TOKEN_HEADER] = str(config["token"])
            signed["authorization"] = _authorization(config.get("authentication"), token)
            return signed

        body = msgspec.json.encode({"task": delivery.payload})
        return await post_delivery(client, self._policy, url, body, headers)


class PushDispatcher(OutboxDispatcher):
    """The A2A channel of the outbox, signed with ``signer``, under ``policy``."""

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
        super().__init__(
            store,
            _A2aSender(signer, policy, clock or SystemClock()),
            channel=A2A_CHANNEL,
            holder=holder,
            metric=A2A_PUSH_DELIVERIES,
            what="push delivery",
            logger="pausemesh.a2a.push",
            options=options,
            clock=clock,
        )


def _authorization(authentication: Any, token: str) -> str:
    """The client's own credentials when its configuration has them, else our JWT."""
    if isinstance(authentication, dict):
        scheme, credentials = authentication.get("scheme"), authentication.get("credentials")
        if scheme and credentials:
            return f"{scheme} {credentials}"
    return f"Bearer {token}"
