"""The agent protocol (docs/agui.md, "The agent"): what a host's agent receives and may yield.

An agent is an async generator function taking a ``RunContext``::

    async def agent(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        yield TextMessageStartEvent(message_id="m1")
        ...
        yield PauseRequest(message="Which flight should I book?", response_schema={...})

It yields AG-UI events (forwarded to the client and logged on the thread),
``PauseRequest``s and, to name the conversation, a ``ThreadTitle``. The run host owns the run's frame: it sends ``RUN_STARTED`` and
``RUN_FINISHED`` itself (an agent must not yield them), closes whatever the agent left open,
and turns the pause requests of one run into one interrupt cohort. On the next run the agent
finds the person's answers in ``ctx.decisions``, keyed by interrupt id.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from pausemesh.agui.events import Event, Message
from pausemesh.core.approvers import Approver
from pausemesh.core.clock import SystemClock
from pausemesh.core.operations import (
    OperationLedger,
    OperationRecord,
    OperationResult,
    StatusLookup,
    run_once,
)
from pausemesh.core.ports import Clock
from pausemesh.core.webhooks import WebhookRoutes

__all__ = (
    "LAZY_HISTORY_ATTRIBUTE",
    "Agent",
    "AgentOutput",
    "Approver",
    "Decision",
    "HistoryLoader",
    "Operations",
    "PauseRequest",
    "RunContext",
    "ThreadTitle",
    "lazy_history",
    "reads_history_lazily",
)


class PauseRequest(msgspec.Struct, frozen=True, kw_only=True):
    """Ask a person for something. Every pause of one run becomes one interrupt of its cohort.

    ``metadata`` comes back unchanged in the matching ``Decision``: a place for what the agent
    needs to remember about the question (e.g. the options it offered).
    """

    message: str
    reason: str = "input_required"
    response_schema: dict[str, Any] | None = None
    tool_call_id: str | None = None
    # Seconds from now, or an absolute deadline; neither means the server's default TTL. One
    # past PAUSEMESH_MAX_PAUSE_TTL_SECONDS is refused (the run ends with AGENT_PROTOCOL_ERROR).
    expires_in: float | None = None
    expires_at: datetime | None = None
    metadata: dict[str, Any] | None = None
    # Who may decide it: ``Approver.principal(id)``, ``Approver.role(name)`` (roles from the
    # principal resolver) or ``Approver.operation(id)``; never strings. Empty: the thread's
    # owner. Otherwise only they, from the approvals inbox (``/v1/approvals``), and never the
    # owner (four eyes are two people) unless ``allow_requester`` and the owner is one of them.
    # Their decision continues the owner's thread.
    approvers: tuple[Approver, ...] = ()
    allow_requester: bool = False
    # At the deadline, instead of lapsing: "cancel", "deny" (the schema's denying choice) or
    # an answer; the thread then continues with it, decided by "expiry" (docs/approvals.md).
    on_expiry: Any = None
    # Labels for the approvals inbox and the webhooks' filters (docs/approvals.md), and the
    # name of the agent asking, shown there and filtered by (``/v1/approvals?agent=``).
    tags: tuple[str, ...] = ()
    agent: str | None = None
    # Seconds from now, each before the deadline: a reminder (webhook ``pause.reminder``), and
    # an escalation adding ``escalate_to`` as approvers (``pause.escalated``); each fires once.
    remind_after: float | None = None
    escalate_after: float | None = None
    escalate_to: tuple[Approver, ...] = ()


class ThreadTitle(msgspec.Struct, frozen=True):
    """Name the thread (shown in the thread list): ``yield ThreadTitle("Trip to Lisbon")``.

    Saved with the run's transcript (a run that fails saves nothing). It replaces the title
    taken from the first user message and any earlier agent title, never one the owner set
    with ``PATCH /agui/threads/{id}``. The last one a run yields wins; a blank one, or one
    longer than the PATCH limit, ends the run with ``AGENT_PROTOCOL_ERROR``.
    """

    title: str


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    """A person's answer to one interrupt of the previous run."""

    interrupt_id: str
    status: Literal["resolved", "cancelled"]
    # The answer (``resolved``); UNSET for ``cancelled``.
    payload: Any | UnsetType = UNSET
    # The pause it answers, as the agent asked it.
    message: str = ""
    reason: str = "input_required"
    tool_call_id: str | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    # Who answered (the approver for a four-eyes pause), when known.
    resolved_by: str | None = None


class Operations:
    """The durable operation ledger, bound to the run's clock.

    ``run_once`` performs a side effect at most once per ``(domain, business_key)``: a resumed
    or replayed run that asks again gets the recorded result and nothing is done twice.
    """

    def __init__(
        self,
        ledger: OperationLedger,
        *,
        clock: Clock | None = None,
        webhooks: WebhookRoutes | None = None,
        declared_by: str = "run_once",
    ) -> None:
        self.ledger = ledger
        self._clock = clock or SystemClock()
        # An unknown outcome is declared as ``declared_by`` (this process's lease holder), with
        # the ``operation.outcome_unknown`` webhooks of ``webhooks`` (see ``run_once``).
        self._webhooks = webhooks
        self._declared_by = declared_by

    async def run_once(
        self,
        domain: str,
        business_key: str,
        *,
        tool: str,
        arguments: Any,
        action: Callable[[], Awaitable[Any]],
        lookup: StatusLookup | None = None,
    ) -> OperationResult:
        """``lookup``: the target's status lookup by operation id, if it cooperates (an unknown
        outcome is then asked for, never resent blindly; see ``pausemesh.core.operations``)."""
        return await run_once(
            self.ledger,
            domain,
            business_key,
            tool,
            arguments,
            action,
            clock=self._clock,
            lookup=lookup,
            webhooks=self._webhooks,
            declared_by=self._declared_by,
        )

    async def list(self, domain: str, *, limit: int = 100) -> Sequence[OperationRecord]:
        return await self.ledger.list(domain, limit=limit)


HistoryLoader = Callable[[int | None], Awaitable[Sequence[Message]]]


def lazy_history(agent: Agent) -> Agent:
    """Mark ``agent`` as reading the thread's history only when it asks for it
    (``await ctx.history(limit=...)``): its ``ctx.messages`` holds only what the run's request
    added, and a run that never asks reads no stored message (its cost does not grow with
    the thread). Unmarked agents get the whole history in ``ctx.messages``."""
    setattr(agent, LAZY_HISTORY_ATTRIBUTE, True)
    return agent


LAZY_HISTORY_ATTRIBUTE = "pausemesh_lazy_history"


def reads_history_lazily(agent: object) -> bool:
    return bool(getattr(agent, LAZY_HISTORY_ATTRIBUTE, False))


class Deferred:
    """A ``RunContext`` value read from the store when the agent first looks at it (the run
    host's ``ctx.state``, ``run/state.py``); ``resolve`` reads it, from inside the agent's
    synchronous access."""

    __slots__ = ()

    def resolve(self) -> Any:
        raise NotImplementedError


class _Lazy:
    """A field whose value may be a ``Deferred``: resolved (once) when first read, so an agent
    that never looks pays nothing and one that does sees a plain value (a dict, not a proxy)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._key = f"_lazy_{name}"

    def __get__(self, obj: object, objtype: type | None = None) -> Any:
        if obj is None:
            # Read by ``dataclass`` for the field's default: there is none.
            raise AttributeError(self._key)
        value = obj.__dict__[self._key]
        if isinstance(value, Deferred):
            value = value.resolve()
            obj.__dict__[self._key] = value
        return value

    def __set__(self, obj: object, value: Any) -> None:
        obj.__dict__[self._key] = value


# Not ``slots``: ``state`` is a descriptor (``_Lazy``), which slots would replace.
@dataclass(frozen=True)
class RunContext:
    thread_id: str
    run_id: str
    # The thread's history (server-side record plus what this request added), oldest first;
    # for a ``lazy_history`` agent only what this request added (see ``history``).
    messages: Sequence[Message]
    # The AG-UI state as the thread left it; the agent changes it with STATE_* events. Read
    # from the store when the agent first looks (a run whose agent never does reads none).
    state: Any = _Lazy()
    # Who is asking (None on a server without a principal resolver): on a run the server
    # makes itself to continue a thread decided out of band, the thread's owner.
    principal: str | None  # type: ignore[misc]  # ``state``'s descriptor gives no default
    # The principal's roles, as its identity provider (JWT roles claim) or API key gave them.
    roles: frozenset[str] = frozenset()
    # Answers to the previous run's interrupts, keyed by interrupt id; empty on a plain run.
    decisions: Mapping[str, Decision] = field(default_factory=dict)
    operations: Operations | None = None
    # The request's frontend tools, context and forwarded props, untouched.
    tools: Sequence[Any] = ()
    context: Sequence[Any] = ()
    forwarded_props: Any = None
    # Reads the stored history on demand (``history``); None: ``messages`` is all of it.
    history_loader: HistoryLoader | None = None

    async def history(self, limit: int | None = None) -> Sequence[Message]:
        """The newest ``limit`` messages of the thread (None: all), oldest first, this run's
        request's own included. Read from the store when asked (a window, not the thread)."""
        if limit is not None and limit <= 0:
            return []
        if self.history_loader is None:
            return list(self.messages if limit is None else self.messages[-limit:])
        return await self.history_loader(limit)


AgentOutput = Event | PauseRequest | ThreadTitle
Agent = Callable[[RunContext], AsyncIterator[AgentOutput]]
