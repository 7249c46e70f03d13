"""Which webhook URLs the server may call: the A2A push-notification allow policy, which is
the outbox's address policy (``outbox/url_policy.py``), named here for the A2A router."""

from __future__ import annotations

from pausemesh.outbox.url_policy import RANGES, PushUrlPolicy

__all__ = ("RANGES", "PushUrlPolicy")
