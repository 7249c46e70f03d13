"""Event webhooks: who is told when a pause is created, decided, cancelled or expires.

Subscriptions come from ``PAUSEMESH_WEBHOOKS_FILE`` (``parse_webhooks``: a destination URL,
the events, optional filters by approver role, agent and tag, the signing secrets).
``WebhookRoutes.for_event`` turns one continuation event into the outbox deliveries it owes;
``Streams.append`` queues them with the event in the same store write (``EventStore.append
(outbox=...)``), so a state change is never committed without its webhooks. The webhook
channel's dispatcher (``outbox/dispatcher.py``, the same one the A2A push outbox runs on)
then sends them, signed per Standard Webhooks (``outbox/webhook_sender.py``).

The body is ``{"type", "timestamp", "data"}``: ``data`` holds what a receiver needs to show
the request (the message, the response schema, who asked, the approvers, the deadline, the
thread and its title, tags, the decision once made) and never a resume token; ``timestamp``
is the event's time. A pause event's delivery stores only which event it is (``{"pause",
"version", "type"}``): the sender renders the body when it sends (``pause_body``), from the
stream as it is then, up to that version, which the events never change (an erasure, which
redacts them, reaches bodies not yet sent). Rendering it with the event cost each pause's
write a fifth of its rate (issue 45). Its ``links`` (one-click decision links) are added by
the sender when it signs, never stored. The delivery id (the ``webhook-id`` header) is the
same on every attempt: ``timed_delivery_id`` of the event (``<continuation id>:<version>``,
its time first) and the subscription.
"""

from __future__ import annotations

import shlex
import urllib.parse
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Final

import msgspec

from pausemesh.core.canonical import sha256_hex
from pausemesh.core.default_outcomes import EXPIRED_REASON, EXPIRY_DECIDER
from pausemesh.core.model import (
    Continuation,
    ContinuationCancelled,
    ContinuationCreated,
    ContinuationEscalated,
    ContinuationEvent,
    ContinuationExpired,
    ContinuationReminded,
    ContinuationResumed,
)
from pausemesh.core.operations import OperationRecord
from pausemesh.core.push import OutboxEntry, delivery_id, timed_delivery_id
from pausemesh.core.reducer import replay
from pausemesh.core.urls import has_unsafe_characters

__all__ = (
    "EVENT_TYPES",
    "INBOX_METADATA",
    "OUTCOME_UNKNOWN_EVENT",
    "WEBHOOK_CHANNEL",
    "WebhookRoutes",
    "WebhookSubscription",
    "event_type",
    "parse_webhooks",
    "pause_body",
)

WEBHOOK_CHANNEL: Final = "webhook"
EVENT_TYPES: Final = frozenset(
    {
        "pause.created",
        "pause.decided",
        "pause.expired",
        "pause.cancelled",
        "pause.reminder",
        "pause.escalated",
        "operation.outcome_unknown",
    }
)
OUTCOME_UNKNOWN_EVENT: Final = "operation.outcome_unknown"
# Where the operator's part is documented (the body's ``operatorAction.docs``): for a
# gateway's operation, and for one an agent ran through the ledger's ``run_once``.
_RESOLVE_DOCS: Final = "docs/gateway.md#runbook-an-operation-is-outcome_unknown"
_LEDGER_RESOLVE_DOCS: Final = "docs/approvals.md#an-agents-operation-whose-outcome-is-unknown"
# The continuation metadata key the inbox reads: {"tags": [...], "agent": str, "threadTitle"}.
INBOX_METADATA: Final = "inbox"
_MAX_SUBSCRIPTIONS: Final = 64


class WebhookSubscription(msgspec.Struct, frozen=True, kw_only=True):
    """One destination: the events it takes and, when set, the pauses it takes them for (a
    pause matches a filter when it names one of its roles, comes from one of its agents, or
    carries one of its tags). ``secrets``: the first signs, every one is sent (rotation)."""

    id: str
    url: str
    events: frozenset[str]
    secrets: tuple[str, ...]
    roles: frozenset[str] = frozenset()
    agents: frozenset[str] = frozenset()
    tags: frozenset[str] = frozenset()

    def wants(self, kind: str, state: Continuation) -> bool:
        if kind not in self.events:
            return False
        if self.roles and not self.roles & {a[5:] for a in state.approvers if a[:5] == "role:"}:
            return False
        if not (self.agents or self.tags):
            return True
        inbox = _inbox(state)
        if self.agents and inbox.get("agent") not in self.agents:
            return False
        return not self.tags or bool(self.tags & set(_strings(inbox.get("tags"))))


def _inbox(state: Continuation) -> dict[str, Any]:
    inbox = state.metadata.get(INBOX_METADATA) if isinstance(state.metadata, dict) else None
    return inbox if isinstance(inbox, dict) else {}


def _strings(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


class _File(msgspec.Struct, forbid_unknown_fields=True):
    webhooks: list[_Entry]


class _Filters(msgspec.Struct, forbid_unknown_fields=True):
    roles: list[str] = []
    agents: list[str] = []
    tags: list[str] = []


class _Entry(msgspec.Struct, forbid_unknown_fields=True):
    id: str
    url: str
    events: list[str]
    secrets: list[str]
    filters: _Filters = msgspec.field(default_factory=_Filters)


def parse_webhooks(document: bytes) -> tuple[WebhookSubscription, ...]:
    """The subscriptions of a ``PAUSEMESH_WEBHOOKS_FILE`` (JSON); ``ValueError`` naming what
    is wrong. A URL's text and form are checked here; where it points, before each delivery
    (the A2A push address policy, ``PAUSEMESH_A2A_PUSH_ALLOW``)."""
    try:
        parsed = msgspec.json.decode(document, type=_File)
    except msgspec.DecodeError as error:
        msg = f"the webhooks file is not valid: {error}"
        raise ValueError(msg) from None
    if len(parsed.webhooks) > _MAX_SUBSCRIPTIONS:
        msg = f"the webhooks file holds at most {_MAX_SUBSCRIPTIONS} webhooks"
        raise ValueError(msg)
    seen: set[str] = set()
    out: list[WebhookSubscription] = []
    for entry in parsed.webhooks:
        what = f"webhook {entry.id!r}"
        if not entry.id or entry.id in seen or has_unsafe_characters(entry.id):
            msg = f"{what}: each webhook needs its own id, without spaces or control characters"
            raise ValueError(msg)
        seen.add(entry.id)
        _check_url(entry.url, what)
        unknown = set(entry.events) - EVENT_TYPES
        if not entry.events or unknown:
            msg = f"{what}: events must be some of {sorted(EVENT_TYPES)}"
            raise ValueError(msg)
        if not entry.secrets or not all(_secret_ok(s) for s in entry.secrets):
            msg = f"{what}: secrets must be one or more 'whsec_' + base64 secrets of 24+ bytes"
            raise ValueError(msg)
        out.append(
            WebhookSubscription(
                id=entry.id,
                url=entry.url,
                events=frozenset(entry.events),
                secrets=tuple(entry.secrets),
                roles=frozenset(entry.filters.roles),
                agents=frozenset(entry.filters.agents),
                tags=frozenset(entry.filters.tags),
            )
        )
    return tuple(out)


def _check_url(url: str, what: str) -> None:
    try:
        parsed = urllib.parse.urlsplit(url)
        _ = parsed.port
    except ValueError:
        parsed = None
    if (
        parsed is None
        or has_unsafe_characters(url)
        or parsed.scheme not in ("http", "https")
        or not parsed.hostname
        or parsed.username is not None
    ):
        msg = f"{what}: url must be an absolute http(s) URL naming a host, without user info"
        raise ValueError(msg)


def _secret_ok(secret: str) -> bool:
    import base64  # noqa: PLC0415 - only when a file is read
    import binascii  # noqa: PLC0415

    if not secret.startswith("whsec_"):
        return False
    try:
        return len(base64.b64decode(secret[6:], validate=True)) >= 24
    except (binascii.Error, ValueError):
        return False


def event_type(event: ContinuationEvent) -> str:
    """The webhook event a continuation event is."""
    match event:
        case ContinuationCreated():
            return "pause.created"
        case ContinuationResumed():
            # A default outcome at the deadline (core/default_outcomes.py) is an expiry.
            return "pause.expired" if event.resolved_by == EXPIRY_DECIDER else "pause.decided"
        case ContinuationCancelled():
            return "pause.expired" if event.reason == EXPIRED_REASON else "pause.cancelled"
        case ContinuationExpired():
            return "pause.expired"
        case ContinuationReminded():
            return "pause.reminder"
        case ContinuationEscalated():
            return "pause.escalated"


def body_data(state: Continuation) -> dict[str, Any]:
    """What a receiver needs to show one pause (no token, no link: see the module)."""
    payload = state.payload if isinstance(state.payload, dict) else {}
    inbox = _inbox(state)
    data: dict[str, Any] = {
        "pauseId": state.continuation_id,
        "threadId": state.correlation_id,
        "status": state.status,
        "message": payload.get("message"),
        "responseSchema": payload.get("responseSchema"),
        "askedBy": None if isinstance(state.owner, msgspec.UnsetType) else state.owner,
        "approvers": list(state.approvers),
        "createdAt": state.created_at.isoformat(),
        "deadline": state.expires_at.isoformat(),
        "threadTitle": inbox.get("threadTitle"),
        "agent": inbox.get("agent"),
        "tags": _strings(inbox.get("tags")),
    }
    if state.status == "resumed":
        data["decision"] = {
            "resolvedBy": None
            if isinstance(state.resolved_by, msgspec.UnsetType)
            else state.resolved_by,
            "answer": state.resume_payload,
            "decidedAt": None
            if isinstance(state.resumed_at, msgspec.UnsetType)
            else state.resumed_at.isoformat(),
        }
    return data


def pause_body(events: Sequence[ContinuationEvent], version: int) -> dict[str, Any] | None:
    """The body of the webhook owed for event ``version`` of a pause's stream ``events`` (None
    when the stream does not reach it): the pause as that event left it, at the event's time."""
    if not 1 <= version <= len(events):
        return None
    state = replay(events[:version])
    if state is None:
        return None
    event = events[version - 1]
    return {
        "type": event_type(event),
        "timestamp": event.occurred_at.isoformat(),
        "data": body_data(state),
    }


class WebhookRoutes:
    """The subscriptions, and what each continuation event owes them."""

    __slots__ = ("_configs", "by_id", "subscriptions", "wake")

    def __init__(
        self,
        subscriptions: Sequence[WebhookSubscription],
        wake: Callable[[Sequence[str]], None] | None = None,
    ) -> None:
        self.subscriptions = tuple(subscriptions)
        self.by_id = {s.id: s for s in self.subscriptions}
        self._configs = {s.id: {"url": s.url, "subscription": s.id} for s in self.subscriptions}
        # Called after a write queued deliveries (with their URLs): the dispatcher looks now,
        # not at its poll.
        self.wake = wake

    def queued(self, entries: Sequence[OutboxEntry]) -> None:
        """Tell this process's dispatcher that a committed write queued ``entries``, so it
        sends them now rather than at its next poll (nothing when none were queued)."""
        if entries and self.wake is not None:
            self.wake([str(entry.config.get("url", "")) for entry in entries])

    def for_event(self, event: ContinuationEvent, state: Continuation) -> list[OutboxEntry]:
        """The deliveries one continuation event owes (``state``: after it), each naming the
        event (``{"pause", "version", "type"}``: the sender renders its body, ``pause_body``)
        with the stable id ``timed_delivery_id`` of ``<continuation id>:<version>``."""
        if not self.subscriptions:
            return []
        kind = event_type(event)
        wanted = [s for s in self.subscriptions if s.wants(kind, state)]
        if not wanted:
            return []
        continuation_id, version, at = event.continuation_id, event.version, event.occurred_at
        event_id = f"{continuation_id}:{version}"
        payload = {"pause": continuation_id, "version": version, "type": kind}
        return [
            OutboxEntry(
                delivery_id=timed_delivery_id(event_id, subscription.id, at),
                task_id=continuation_id,
                channel=WEBHOOK_CHANNEL,
                config=self._configs[subscription.id],
                payload=payload,
            )
            for subscription in wanted
        ]

    def for_unknown_outcome(
        self,
        record: OperationRecord,
        *,
        declared_by: str,
        reason: str,
        since: datetime,
        ledger: bool = False,
    ) -> list[OutboxEntry]:
        """The ``operation.outcome_unknown`` deliveries owed when ``record``'s attempt is
        declared unknown (an operator is needed). One event per operation: its id is the
        operation id, so a second declaration queues nothing new. A subscription takes it by
        its events list alone (its filters name pauses: roles, agents, tags). The body holds
        the operation's identity, a digest of its business key and what to do; never the
        arguments (they may hold secrets) nor any upstream reply. ``ledger``: declared by an
        agent's ``run_once`` (no gateway config: the commands name the domain instead)."""
        wanted = [s for s in self.subscriptions if OUTCOME_UNKNOWN_EVENT in s.events]
        if not wanted:
            return []
        operation = record.operation_id
        # A gateway's commands take its --config; an agent's operations have none.
        where = f" --domain {shlex.quote(record.domain)}" if ledger else ""
        payload = {
            "type": OUTCOME_UNKNOWN_EVENT,
            "timestamp": since.isoformat(),
            "data": {
                "operationId": operation,
                "source": "ledger" if ledger else "gateway",
                "domain": record.domain,
                "tool": record.tool,
                "businessKeySha256": sha256_hex(record.business_key.encode()),
                "termsHash": record.terms_hash,
                "attemptedAt": record.attempted_at.isoformat(),
                "unknownSince": since.isoformat(),
                "declaredBy": declared_by,
                "reason": reason,
                "operatorAction": {
                    "summary": "Find out whether the effect happened at the target, then"
                    " record what really happened; PauseMesh never dispatches it again.",
                    "command": f"pausemesh ops resolve {operation}{where}"
                    " --result-file <what-happened.json> --reason <why>",
                    "inspect": f"pausemesh ops why {operation}{where}",
                    "docs": _LEDGER_RESOLVE_DOCS if ledger else _RESOLVE_DOCS,
                },
            },
        }
        event_id = f"{OUTCOME_UNKNOWN_EVENT}:{operation}"
        return [
            OutboxEntry(
                delivery_id=delivery_id(event_id, subscription.id),
                task_id=operation,
                channel=WEBHOOK_CHANNEL,
                config={"url": subscription.url, "subscription": subscription.id},
                payload=payload,
            )
            for subscription in wanted
        ]
