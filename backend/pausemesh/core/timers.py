"""A pending pause's timers: a reminder, and an escalation that adds approvers.

``PauseRequest(remind_after=..., escalate_after=..., escalate_to=...)`` keeps them in the
continuation's metadata (``inbox``: ``remindAt``, ``escalateAt``, ``escalateTo``). Each fires
once, while the pause waits and before its deadline, as an event on its stream
(``continuation.reminded``, ``continuation.escalated``: the compare-and-swap on the stream's
version makes it once whichever replica's sweeper gets there first), with its webhook
(``pause.reminder``, ``pause.escalated``) queued in the same write. An escalation adds its
approvers: they may decide the pause from then on, find it in their inbox and get a link.

The stores' due index holds each pending stream's next due time: its first unfired timer, or
its deadline (``next_due``); the sweeper (``ContinuationService.expire_due``) takes what is
due and fires it (``due_event``) or expires it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final, NamedTuple

from pausemesh.core.approvers import Approver, decode_approver, encode_approver
from pausemesh.core.model import (
    CONTINUATION_SCHEMA_VERSION,
    Continuation,
    ContinuationEscalated,
    ContinuationEvent,
    ContinuationReminded,
)

__all__ = (
    "ESCALATE_AT",
    "ESCALATE_TO",
    "REMIND_AT",
    "PauseTimers",
    "due_event",
    "next_due",
    "pause_timers",
    "timer_fields",
    "timers_view",
)

REMIND_AT: Final = "remindAt"
ESCALATE_AT: Final = "escalateAt"
ESCALATE_TO: Final = "escalateTo"


def timer_fields(
    remind_at: datetime | None, escalate_at: datetime | None, escalate_to: Sequence[Approver]
) -> dict[str, Any]:
    """The ``inbox`` metadata keys of a pause's timers."""
    fields: dict[str, Any] = {}
    if remind_at is not None:
        fields[REMIND_AT] = remind_at.isoformat()
    if escalate_at is not None:
        fields[ESCALATE_AT] = escalate_at.isoformat()
        fields[ESCALATE_TO] = [encode_approver(a) for a in escalate_to]
    return fields


def _inbox(metadata: object) -> dict[str, Any]:
    inbox = metadata.get("inbox") if isinstance(metadata, dict) else None
    return inbox if isinstance(inbox, dict) else {}


def _at(inbox: dict[str, Any], key: str) -> datetime | None:
    value = inbox.get(key)
    if not isinstance(value, str):
        return None
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        return None
    return at if at.tzinfo is not None else None


def next_due(
    expires_at: datetime,
    metadata: object,
    *,
    reminded: bool = False,
    escalated: bool = False,
) -> datetime:
    """When the pause next needs the sweeper: its first unfired timer, or its deadline."""
    inbox = _inbox(metadata)
    due = [expires_at]
    if not reminded and (at := _at(inbox, REMIND_AT)) is not None:
        due.append(at)
    if not escalated and (at := _at(inbox, ESCALATE_AT)) is not None:
        due.append(at)
    return min(due)


class PauseTimers(NamedTuple):
    """A pause's timers: when each is due (None: it has none), and whom an escalation adds."""

    remind_at: datetime | None
    escalate_at: datetime | None
    escalate_to: list[Approver]


def pause_timers(metadata: object) -> PauseTimers:
    inbox = _inbox(metadata)
    escalate_at = _at(inbox, ESCALATE_AT)
    to = [] if escalate_at is None else _approvers(inbox.get(ESCALATE_TO))
    return PauseTimers(_at(inbox, REMIND_AT), escalate_at, to)


def timers_view(state: Continuation) -> dict[str, Any]:
    """A pause's timers as ``pausemesh inspect`` shows them: when each is due and whether it
    fired (empty for a pause without any)."""
    inbox = _inbox(state.metadata)
    view: dict[str, Any] = {}
    if (at := _at(inbox, REMIND_AT)) is not None:
        fired = state.reminded_at if isinstance(state.reminded_at, datetime) else None
        view["reminder"] = {"dueAt": at.isoformat(), "firedAt": fired and fired.isoformat()}
    if (at := _at(inbox, ESCALATE_AT)) is not None:
        fired = state.escalated_at if isinstance(state.escalated_at, datetime) else None
        view["escalation"] = {
            "dueAt": at.isoformat(),
            "to": [a.text for a in _approvers(inbox.get(ESCALATE_TO))],
            "firedAt": fired and fired.isoformat(),
        }
    if "onExpiry" in inbox:
        view["onExpiry"] = inbox["onExpiry"]
    return view


def _fired(state: Continuation) -> tuple[bool, bool]:
    return (
        isinstance(state.reminded_at, datetime),
        isinstance(state.escalated_at, datetime),
    )


def due_event(state: Continuation, now: datetime) -> ContinuationEvent | None:
    """The timer event a pending pause owes at ``now`` (the reminder first), or None."""
    if state.status != "pending" or now >= state.expires_at:
        return None
    inbox = _inbox(state.metadata)
    reminded, escalated = _fired(state)
    common: dict[str, Any] = {
        "schema_version": CONTINUATION_SCHEMA_VERSION,
        "continuation_id": state.continuation_id,
        "version": state.version + 1,
        "occurred_at": now,
    }
    remind_at = _at(inbox, REMIND_AT)
    if not reminded and remind_at is not None and remind_at <= now:
        after = next_due(state.expires_at, state.metadata, reminded=True, escalated=escalated)
        return ContinuationReminded(next_due_at=after, **common)
    escalate_at = _at(inbox, ESCALATE_AT)
    if not escalated and escalate_at is not None and escalate_at <= now:
        added = tuple(_approvers(inbox.get(ESCALATE_TO)))
        after = next_due(state.expires_at, state.metadata, reminded=reminded, escalated=True)
        return ContinuationEscalated(approvers=added, next_due_at=after, **common)
    return None


def _approvers(value: object) -> list[Approver]:
    out: list[Approver] = []
    for item in value if isinstance(value, list) else []:
        try:
            out.append(decode_approver(item))
        except ValueError:
            continue
    return out
