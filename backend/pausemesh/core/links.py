"""One-click decision links: one per approver of a pause, good for that pause and approver only.

A link is ``<public URL>/v1/links/<pause id>/<slot>/<mac>`` (``?choice=N``: the page offers
that choice alone, for a chat message's one button per choice): ``slot`` is the approver's
position among the pause's approvers and ``mac`` an HMAC-SHA256 of the pause id and that
approver's text form under a key derived from the server key (HMAC with its own label). Nothing
of a link is stored: the database holds neither the link nor a hash of it, and every replica
sharing ``PAUSEMESH_SECRET_KEY`` recognises it. A link is good once and only while the pause
waits: its decision settles the pause, after which every link of it answers 410 Gone (so does
a pause past its deadline, cancelled or decided by other means).

Policy: **the link itself authenticates the approver it names** (like a pre-signed callback
URL): whoever holds it decides as that approver, recorded as deciding (``resolvedBy``: the
principal id, or ``link:role:NAME`` for a role entry). It is sent only in webhook bodies to
the destinations an operator configured, never logged (the access line names the route
template) and never shown to the requester. Operation approvers get no link.

The choices come from the pause's ``responseSchema``: one button per value of its one
enumerated property (``{"decision": "approve" | "reject"}`` gives Approve and Reject, or its
``enumNames``), or Yes and No for one boolean property. A pause whose schema offers no such choice gets no links.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Sequence
from typing import Any, Final

from pausemesh.core.approvers import OPERATION_PREFIX

__all__ = ("DecisionLinks", "choices")

_INFO: Final = b"pausemesh decision links v1"
_MAC_CHARS: Final = 43  # 256 bits in base64url
_MAX_CHOICES: Final = 8  # buttons on a page, not a list to pick from


def choices(schema: object) -> list[tuple[str, Any]]:
    """``(label, answer)`` for each button a link page offers (empty: no links)."""
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        return []
    properties = schema.get("properties")
    if not isinstance(properties, dict) or len(properties) != 1:
        return []
    [(name, spec)] = properties.items()
    if not isinstance(spec, dict):
        return []
    values = spec.get("enum")
    if isinstance(values, list) and 0 < len(values) <= _MAX_CHOICES:
        names = spec.get("enumNames")
        if not isinstance(names, list) or len(names) != len(values):
            names = [str(v).replace("_", " ").capitalize() for v in values]
        return [(str(label), {name: v}) for label, v in zip(names, values, strict=True)]
    if spec.get("type") == "boolean":
        return [("Yes", {name: True}), ("No", {name: False})]
    return []


class DecisionLinks:
    """Mints and recognises the links of pauses under the server key; ``base_url`` is where
    people reach the server (``PAUSEMESH_PUBLIC_URL``)."""

    __slots__ = ("_key", "base_url")

    def __init__(self, server_key: bytes, base_url: str) -> None:
        # Its own key, derived with its own label: a link never matches a token of another use.
        self._key = hmac.new(server_key, _INFO, hashlib.sha256).digest()
        self.base_url = base_url.rstrip("/")

    def _mac(self, *parts: str) -> str:
        digest = hmac.new(self._key, "\n".join(parts).encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode()[:_MAC_CHARS]

    def path(self, pause_id: str, slot: int, approver: str) -> str:
        return f"/v1/links/{pause_id}/{slot}/{self._mac('link', pause_id, str(slot), approver)}"

    def approver(self, pause_id: str, slot: int, mac: str, approvers: Sequence[str]) -> str | None:
        """The approver a link names, if ``mac`` is that link's (None: no such link)."""
        if not 0 <= slot < len(approvers) or approvers[slot].startswith(OPERATION_PREFIX):
            return None
        expected = self._mac("link", pause_id, str(slot), approvers[slot])
        return approvers[slot] if hmac.compare_digest(expected, mac) else None

    def csrf(self, pause_id: str, slot: int, choice: int) -> str:
        """The token the confirmation page puts in its form: a POST without it is refused."""
        return self._mac("csrf", pause_id, str(slot), str(choice))[:22]

    def for_body(self, data: dict[str, Any]) -> list[dict[str, Any]] | None:
        """The links a webhook body's ``data`` carries (None: none: not pending, no choice)."""
        pause_id = data.get("pauseId")
        approvers = data.get("approvers")
        if data.get("status") != "pending" or not isinstance(pause_id, str):
            return None
        offered = choices(data.get("responseSchema"))
        if not offered or not isinstance(approvers, list):
            return None
        out: list[dict[str, Any]] = []
        for slot, approver in enumerate(approvers):
            if not isinstance(approver, str) or approver.startswith(OPERATION_PREFIX):
                continue
            url = self.base_url + self.path(pause_id, slot, approver)
            out.append(
                {
                    "approver": approver,
                    "url": url,
                    # One per button of a chat message: the page then offers that choice alone.
                    "choices": [
                        {"label": label, "url": f"{url}?choice={n}"}
                        for n, (label, _) in enumerate(offered)
                    ],
                }
            )
        return out or None
