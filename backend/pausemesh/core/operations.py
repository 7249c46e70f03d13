"""Durable operations: run a side effect at most once per business key.

The operation id is a pure function of ``(domain, business_key)`` — never of the caller, run
or thread — so a resumed or replayed run lands on the same operation. The terms (tool and
arguments) are committed with the first attempt, which is recorded *before* dispatch; the
outcome is recorded after. What a later ``begin`` for the same key reports:

=======================  ==========================================================
``EXECUTE``              first attempt: the caller now owns it and must dispatch once
``RECONCILIATION_ONLY``  an outcome is recorded: return it, dispatch nothing
``OUTCOME_UNKNOWN``      attempted, no outcome (crash, error or still in flight):
                         sticky, never retried automatically
``OperationConflictError``  same key, different terms (raised)
=======================  ==========================================================

Every ledger (memory, SQLite, PostgreSQL) stores the same ``OperationRecord`` and decides
with ``decide``, so they cannot drift apart.

**Cooperating targets** (the continuity gateway's cooperating profile, Stripe-style keys): a
target that keeps its effects keyed by the operation id can declare a ``StatusLookup``. For an
``OUTCOME_UNKNOWN`` operation ``run_once`` then asks it, and never resends blindly:

- ``TargetFound(result)``: the effect happened; its result becomes the recorded outcome,
  audited as ``RECOVERED`` (``OperationRecovery``);
- ``TargetNeverSaw()``: the target confirms it never saw the key; the action may be sent
  again under the same key, **once** per such confirmation (the numbered ``RESENT`` audit
  entry is claimed before dispatch, so of any number of callers exactly one resends);
- no answer (the lookup raises): still ``OUTCOME_UNKNOWN``.

A resend can die too before it reaches the target (its process is killed). Its claim then
stands, and only a *fresh* "never saw it" (asked after that claim, once the claim is
``RESEND_SETTLE`` old, so a resend still on its way is not overtaken) permits the next one,
at most ``MAX_RESENDS`` in all (``next_resend``). Each resend is sent under the same key to a
target that keeps its effects by that key, so even a late earlier resend cannot make a
second effect; and none is blind.

Targets without a lookup stay sticky; an operator settles them.

**Declared unknown.** When ``run_once`` reports an unknown outcome (``OutcomeUnknownError``:
no lookup, the target gave no answer, or every permitted resend was used) or its action raised
without a lookup, it first writes the declaration (``OperationLedger.declare_unknown``: who,
why, when; once per operation, the first stays) and, in the same transaction, the
``operation.outcome_unknown`` webhooks its subscriptions owe (``WebhookRoutes``): an operator
is needed. Not while a resend claimed by another caller may still be on its way (a lost claim,
or the last resend younger than ``RESEND_SETTLE``): that one may yet settle it. A declaration
fences nothing here (unlike the gateway's): a recovery or an operator's resolution still
records the outcome, and ``pausemesh ops status`` shows both.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, runtime_checkable

import msgspec

from pausemesh.core.canonical import canonical_json, canonical_sha256, sha256_hex
from pausemesh.core.clock import SystemClock
from pausemesh.core.errors import (
    InvalidInputError,
    OperationConflictError,
    OutcomeUnknownError,
    PauseMeshError,
)
from pausemesh.core.ports import Clock
from pausemesh.core.validation import check_id, check_payload
from pausemesh.observability.telemetry import OPERATION_DECISIONS, count, span

if TYPE_CHECKING:
    from pausemesh.core.push import OutboxEntry

__all__ = (
    "ACTION_FAILED",
    "EXECUTE",
    "MAX_RESENDS",
    "NO_OUTCOME_RECORDED",
    "OUTCOME_UNKNOWN",
    "RECONCILIATION_ONLY",
    "RECOVERED",
    "RESENDS_USED_UP",
    "RESEND_SETTLE",
    "RESENT",
    "TARGET_DID_NOT_ANSWER",
    "OperationBegin",
    "OperationDecision",
    "OperationLedger",
    "OperationRecord",
    "OperationRecovery",
    "OperationResult",
    "OutcomeUnknownWebhooks",
    "RecoveryStep",
    "StatusLookup",
    "TargetAnswer",
    "TargetFound",
    "TargetNeverSaw",
    "UnknownDeclaration",
    "ask_target",
    "begun",
    "check_completion",
    "check_terms",
    "decide",
    "new_attempt",
    "next_resend",
    "operation_id",
    "result_hash",
    "run_once",
    "terms_hash",
)

EXECUTE: Final = "EXECUTE"
RECONCILIATION_ONLY: Final = "RECONCILIATION_ONLY"
OUTCOME_UNKNOWN: Final = "OUTCOME_UNKNOWN"

RECOVERED: Final = "RECOVERED"
RESENT: Final = "RESENT"

# How many resends an operation may get in all, each after its own "never saw it".
MAX_RESENDS: Final = 3
# How old the last resend's claim must be before a fresh "never saw it" permits another: its
# sender had that long to reach the target (a live run renews its lease; a dead one's lapses
# within seconds), so an answer inside it may just predate a resend still on its way.
RESEND_SETTLE: Final = timedelta(seconds=10)

# Why ``run_once`` declared an outcome unknown (``UnknownDeclaration.reason``).
NO_OUTCOME_RECORDED: Final = "NO_OUTCOME_RECORDED"  # an earlier attempt, no outcome, no lookup
ACTION_FAILED: Final = "ACTION_FAILED"  # the action raised; no lookup can settle it later
TARGET_DID_NOT_ANSWER: Final = "TARGET_DID_NOT_ANSWER"  # the status lookup raised
RESENDS_USED_UP: Final = "RESENDS_USED_UP"  # "never saw it" after the last permitted resend

OperationDecision = Literal["EXECUTE", "RECONCILIATION_ONLY", "OUTCOME_UNKNOWN"]
RecoveryStep = Literal["RECOVERED", "RESENT"]

_log = logging.getLogger("pausemesh.operations")
_ID_VERSION = "pausemesh-operation/1"
_MAX_KEY = 200


class OperationRecord(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One operation: its terms and attempt (written once, before dispatch), then its outcome."""

    operation_id: str
    domain: str
    business_key: str
    tool: str
    arguments: Any
    terms_hash: str
    # Server-made, random: only the attempt's owner can record its outcome.
    attempt_id: str
    attempted_at: datetime
    result: Any = None
    # sha256(canonical(result)) once completed; None while the outcome is unknown.
    result_hash: str | None = None
    completed_at: datetime | None = None

    @property
    def completed(self) -> bool:
        return self.result_hash is not None


class UnknownDeclaration(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A process told a caller ``OUTCOME_UNKNOWN`` for the attempt and declared it (the
    gateway: no reply is recorded after it; the ledger: an operator is needed)."""

    operation_id: str
    declared_by: str
    reason: str
    declared_at: datetime


class OperationBegin(msgspec.Struct, frozen=True, kw_only=True):
    """What ``begin`` reports. ``record`` is the stored operation (the new one for EXECUTE)."""

    decision: OperationDecision
    record: OperationRecord


class OperationResult(msgspec.Struct, frozen=True, kw_only=True):
    """What ``run_once`` returns: the result, and how this call got it (``EXECUTE``: this call
    dispatched it; ``RECOVERED``: the target's lookup found it; ``RESENT``: this call sent it
    again after the target confirmed it never saw the first attempt)."""

    decision: Literal["EXECUTE", "RECONCILIATION_ONLY", "RECOVERED", "RESENT"]
    result: Any
    record: OperationRecord


class OperationRecovery(msgspec.Struct, frozen=True, kw_only=True):
    """One audited recovery step of an operation (write-once per operation, step and number).
    ``number`` counts the resends (1, 2, ...); a ``RECOVERED`` step is always 1."""

    operation_id: str
    step: RecoveryStep
    recorded_at: datetime
    number: int = 1


class TargetFound(msgspec.Struct, frozen=True, kw_only=True):
    """A cooperating target's lookup: it holds the effect under the key; this is its result."""

    result: Any


class TargetNeverSaw(msgspec.Struct, frozen=True, kw_only=True):
    """A cooperating target's lookup: it never received the key (nothing happened)."""


TargetAnswer = TargetFound | TargetNeverSaw
StatusLookup = Callable[[str], Awaitable[TargetAnswer]]
"""A cooperating target's status lookup by idempotency key (the operation id). Raising means
"no answer" and leaves the operation unknown."""


def operation_id(domain: str, business_key: str) -> str:
    """``op:`` + sha256(canonical([version, domain, business_key])); nothing else enters it."""
    return "op:" + canonical_sha256([_ID_VERSION, domain, business_key])


def terms_hash(tool: str, arguments: Any) -> str:
    return canonical_sha256([_ID_VERSION, "terms", tool, arguments])


def check_terms(domain: str, business_key: str, tool: str, arguments: Any) -> None:
    """Raise ``InvalidInputError`` unless the operation's identity and terms are well formed."""
    check_id(domain, "domain")
    if not isinstance(business_key, str) or not business_key or len(business_key) > _MAX_KEY:
        msg = f"business_key must be a non-empty string of at most {_MAX_KEY} characters"
        raise InvalidInputError(msg, code="INVALID_OPERATION")
    check_id(tool, "tool")
    check_payload(arguments, "arguments")


def new_attempt(
    domain: str, business_key: str, tool: str, arguments: Any, *, now: datetime
) -> OperationRecord:
    """The record a ledger inserts for a first attempt (validated, no outcome yet)."""
    check_terms(domain, business_key, tool, arguments)
    # A canonical copy, so nothing the caller mutates later changes what was committed.
    committed = msgspec.json.decode(canonical_json(arguments))
    return OperationRecord(
        operation_id=operation_id(domain, business_key),
        domain=domain,
        business_key=business_key,
        tool=tool,
        arguments=committed,
        terms_hash=terms_hash(tool, committed),
        attempt_id=secrets.token_urlsafe(16),
        attempted_at=now,
    )


def decide(existing: OperationRecord, wanted: OperationRecord) -> OperationBegin:
    """The decision for ``wanted`` when ``existing`` already holds its operation id.

    Raises ``OperationConflictError`` for different terms. A stored record whose digests do
    not recompute is reported as ``OUTCOME_UNKNOWN`` (fail closed: never re-dispatch).
    """
    if existing.terms_hash != wanted.terms_hash:
        raise OperationConflictError(existing.operation_id)
    intact = existing.terms_hash == terms_hash(existing.tool, existing.arguments)
    if existing.completed and intact and existing.result_hash == canonical_sha256(existing.result):
        return OperationBegin(decision=RECONCILIATION_ONLY, record=existing)
    return OperationBegin(decision=OUTCOME_UNKNOWN, record=existing)


def result_hash(result: Any) -> str:
    check_payload(result, "result")
    return sha256_hex(canonical_json(result))


class OutcomeUnknownWebhooks(Protocol):
    """What a declaration needs of the event webhooks (``core/webhooks.WebhookRoutes``, which
    imports this module): the deliveries it owes, and the wake-up once they are committed."""

    def for_unknown_outcome(
        self,
        record: OperationRecord,
        *,
        declared_by: str,
        reason: str,
        since: datetime,
        ledger: bool = False,
    ) -> list[OutboxEntry]: ...

    def queued(self, entries: Sequence[OutboxEntry]) -> None: ...


@runtime_checkable
class OperationLedger(Protocol):
    """Port for the operation ledger. Memory, SQLite and PostgreSQL implement it.

    ``begin`` is atomic per operation id: of any number of concurrent first calls for one
    business key, exactly one gets ``EXECUTE``.
    """

    async def begin(
        self,
        domain: str,
        business_key: str,
        *,
        tool: str,
        arguments: Any,
        now: datetime,
    ) -> OperationBegin:
        """Record the attempt before dispatch, or report what an earlier call recorded."""
        ...

    async def complete(
        self, operation_id: str, *, attempt_id: str, result: Any, now: datetime
    ) -> OperationRecord:
        """Record the outcome of the attempt ``attempt_id`` (write-once).

        Recording the same result again returns the stored record; anything else for an
        operation that already has an outcome, or a foreign ``attempt_id``, raises
        ``OperationConflictError``. An unknown operation raises ``InvalidInputError``.
        """
        ...

    async def recover(
        self, operation_id: str, *, attempt_id: str, result: Any, now: datetime
    ) -> OperationRecord:
        """``complete`` with a result a cooperating target's lookup found, audited as a
        ``RECOVERED`` step in the same transaction. Same errors as ``complete``."""
        ...

    async def claim_resend(
        self, operation_id: str, *, attempt_id: str, number: int, now: datetime
    ) -> bool:
        """Record ``RESENT`` step ``number`` before that resend: True only for the caller that
        recorded it, and only while the operation has exactly ``number - 1`` resends (so a
        caller that read the audit before another claim cannot claim after it).
        ``OperationConflictError`` for a foreign ``attempt_id``."""
        ...

    async def recoveries(self, operation_id: str) -> Sequence[OperationRecovery]:
        """The operation's audited recovery steps, oldest first."""
        ...

    async def declare_unknown(
        self,
        operation_id: str,
        *,
        declared_by: str,
        reason: str,
        now: datetime,
        webhooks: OutcomeUnknownWebhooks | None = None,
    ) -> OperationRecord:
        """Record that the attempt's outcome is unknown (an operator is needed) and queue the
        ``operation.outcome_unknown`` webhooks (``webhooks.for_unknown_outcome``) in the same
        transaction; return the stored record. Writes nothing if the operation has an outcome
        or was declared before (the first declaration stays, and so one event per operation,
        however many callers or replicas declare it). ``OPERATION_NOT_FOUND`` if never begun.
        Wakes the webhook dispatcher of this process (``webhooks.wake``) once committed."""
        ...

    async def unknown_of(self, operation_id: str) -> UnknownDeclaration | None:
        """The operation's declaration, if one was written."""
        ...

    async def get(self, operation_id: str) -> OperationRecord | None: ...

    async def list(self, domain: str, *, limit: int = 100) -> Sequence[OperationRecord]:
        """Operations of ``domain`` in attempt order (oldest first), at most ``limit``."""
        ...

    async def check_readiness(self) -> None:
        """Return when the ledger can serve; raise ``StoreError`` otherwise."""
        ...

    async def close(self) -> None: ...


def begun(operation_id: str, record: OperationRecord | None) -> OperationRecord:
    """For ``complete``: the stored record, or ``OPERATION_NOT_FOUND`` if there is none."""
    if record is None:
        msg = "operation was never begun"
        raise InvalidInputError(msg, code="OPERATION_NOT_FOUND", operation_id=operation_id)
    return record


def check_completion(record: OperationRecord, attempt_id: str, digest: str) -> bool:
    """For ``complete``: True if ``record`` already holds exactly this outcome.

    False means the caller may write the outcome now; conflicts raise.
    """
    if record.attempt_id != attempt_id:
        raise OperationConflictError(record.operation_id)
    if record.result_hash is None:
        return False
    if record.result_hash != digest:
        raise OperationConflictError(record.operation_id)
    return True


def next_resend(
    steps: Sequence[OperationRecovery],
    now: datetime,
    *,
    settle: timedelta = RESEND_SETTLE,
    limit: int = MAX_RESENDS,
) -> int | None:
    """The number of the resend a fresh "never saw it" permits now, given the operation's
    audit ``steps``; None while the last resend is younger than ``settle``, after ``limit``
    resends, or once the outcome was recovered."""
    if any(step.step == RECOVERED for step in steps):
        return None
    resends = [step for step in steps if step.step == RESENT]
    if len(resends) >= limit:
        return None
    if resends and now - max(step.recorded_at for step in resends) < settle:
        return None
    return len(resends) + 1


async def run_once(  # noqa: PLR0917 - the signature the agents call: identity, terms, action
    ledger: OperationLedger,
    domain: str,
    business_key: str,
    tool: str,
    arguments: Any,
    action: Callable[[], Awaitable[Any]],
    *,
    clock: Clock | None = None,
    lookup: StatusLookup | None = None,
    webhooks: OutcomeUnknownWebhooks | None = None,
    declared_by: str = "run_once",
) -> OperationResult:
    """Run ``action`` at most once for ``(domain, business_key)`` and return its JSON result.

    A repeat with the same terms returns the recorded result without calling ``action``.
    Raises ``OperationConflictError`` for different terms and ``OutcomeUnknownError`` when an
    earlier attempt has no recorded outcome. If ``action`` raises, the attempt stays without
    an outcome (the effect may or may not have happened) and the error propagates: the
    operation is then ``OUTCOME_UNKNOWN`` for every later call.

    With a ``lookup`` (a cooperating target keyed by the operation id) an unknown outcome is
    asked for first (see the module docstring); ``OutcomeUnknownError`` only when the target
    gives no answer, or it never saw the key and ``next_resend`` permits no resend now.

    Before it reports an unknown outcome, and when ``action`` raised without a ``lookup``, it
    declares the outcome unknown as ``declared_by`` (the module docstring), queueing
    ``webhooks``' ``operation.outcome_unknown`` deliveries with the declaration.
    """
    declare = _Declare(ledger, webhooks, declared_by)
    with span("operation.run_once", domain=domain, tool=tool) as current:
        try:
            outcome = await _run_once(
                ledger, domain, business_key, tool, arguments, action, clock, lookup, declare
            )
        except PauseMeshError as error:
            count(OPERATION_DECISIONS, error.code)
            raise
        count(OPERATION_DECISIONS, outcome.decision)
        current.set_attribute("pausemesh.operation_id", outcome.record.operation_id)
        current.set_attribute("pausemesh.decision", outcome.decision)
        return outcome


async def _run_once(  # noqa: PLR0917 - run_once's arguments, passed on
    ledger: OperationLedger,
    domain: str,
    business_key: str,
    tool: str,
    arguments: Any,
    action: Callable[[], Awaitable[Any]],
    clock: Clock | None,
    lookup: StatusLookup | None,
    declare: _Declare,
) -> OperationResult:
    now = (clock or SystemClock()).now
    begun = await ledger.begin(domain, business_key, tool=tool, arguments=arguments, now=now())
    if begun.decision == RECONCILIATION_ONLY:
        return OperationResult(
            decision=RECONCILIATION_ONLY, result=begun.record.result, record=begun.record
        )
    if begun.decision == OUTCOME_UNKNOWN:
        if lookup is None:
            await declare(begun.record.operation_id, NO_OUTCOME_RECORDED, now())
            raise OutcomeUnknownError(begun.record.operation_id)
        return await _recover(ledger, begun.record, action, lookup, now, declare)
    try:
        result = await action()
    except Exception:
        # The effect may or may not have happened; with a lookup the next call asks the target.
        if lookup is None:
            await declare(begun.record.operation_id, ACTION_FAILED, now())
        raise
    record = await ledger.complete(
        begun.record.operation_id, attempt_id=begun.record.attempt_id, result=result, now=now()
    )
    return OperationResult(decision=EXECUTE, result=record.result, record=record)


class _Declare:
    """``run_once``'s declarations of an unknown outcome (see the module docstring)."""

    __slots__ = ("by", "ledger", "webhooks")

    def __init__(
        self, ledger: OperationLedger, webhooks: OutcomeUnknownWebhooks | None, declared_by: str
    ) -> None:
        self.ledger = ledger
        self.webhooks = webhooks
        self.by = declared_by

    async def __call__(self, operation_id: str, reason: str, now: datetime) -> None:
        try:
            await self.ledger.declare_unknown(
                operation_id, declared_by=self.by, reason=reason, now=now, webhooks=self.webhooks
            )
        except PauseMeshError as error:
            # A store that is down, a name the store refuses: the caller still hears
            # OUTCOME_UNKNOWN (or the action's error), and the next caller that meets it declares.
            _log.warning(
                "could not declare operation %s unknown (%s): %s", operation_id, reason, error.code
            )


async def ask_target(
    ledger: OperationLedger,
    operation_id: str,
    lookup: StatusLookup,
    now: Callable[[], datetime],
) -> TargetFound | int | None:
    """What a cooperating target's answer about an unknown outcome permits now: its result
    (``TargetFound``), the number of the resend ``next_resend`` permits after a fresh "never
    saw it", or None (no resend permitted now, or no answer: the outcome stays unknown)."""
    answer = await _ask_target(ledger, operation_id, lookup, now)
    return None if isinstance(answer, str) else answer


async def _ask_target(
    ledger: OperationLedger,
    operation_id: str,
    lookup: StatusLookup,
    now: Callable[[], datetime],
) -> TargetFound | int | str | None:
    """``ask_target``, with why no resend is permitted when an operator is needed for it: a
    reason to declare (``TARGET_DID_NOT_ANSWER``, ``RESENDS_USED_UP``); None while a resend
    may still be on its way."""
    # Read before asking: a claim made after this read makes a claim built on it fail, so the
    # answer below is always newer than the last resend that claim builds on.
    steps = await ledger.recoveries(operation_id)
    try:
        answer = await lookup(operation_id)
    except Exception:  # noqa: BLE001 - no answer from the target: the outcome stays unknown
        _log.warning("status lookup for operation %s got no answer", operation_id, exc_info=True)
        return TARGET_DID_NOT_ANSWER
    if isinstance(answer, TargetFound):
        return answer
    permitted = next_resend(steps, now())
    if permitted is None and sum(1 for step in steps if step.step == RESENT) >= MAX_RESENDS:
        return RESENDS_USED_UP
    return permitted


async def _recover(  # noqa: PLR0917 - _run_once's parts for an unknown outcome
    ledger: OperationLedger,
    record: OperationRecord,
    action: Callable[[], Awaitable[Any]],
    lookup: StatusLookup,
    now: Callable[[], datetime],
    declare: _Declare,
) -> OperationResult:
    """Ask the cooperating target about an unknown outcome; resend only after a fresh "never
    saw it" that ``next_resend`` permits, never blindly."""
    operation = record.operation_id
    permitted = await _ask_target(ledger, operation, lookup, now)
    if isinstance(permitted, str):
        await declare(operation, permitted, now())
        raise OutcomeUnknownError(operation)
    if isinstance(permitted, TargetFound):
        recovered = await ledger.recover(
            operation, attempt_id=record.attempt_id, result=permitted.result, now=now()
        )
        _log.info("operation %s recovered from the target's status lookup", operation)
        return OperationResult(decision=RECOVERED, result=recovered.result, record=recovered)
    if permitted is None or not await ledger.claim_resend(
        operation, attempt_id=record.attempt_id, number=permitted, now=now()
    ):
        raise OutcomeUnknownError(operation)
    _log.info("operation %s never reached the target; resend %d", operation, permitted)
    result = await action()
    completed = await ledger.complete(
        operation, attempt_id=record.attempt_id, result=result, now=now()
    )
    return OperationResult(decision=RESENT, result=completed.result, record=completed)
