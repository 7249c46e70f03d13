"""Fenced operations: the ledger as a gateway worker uses it (issue 12).

A gateway process runs as a named **worker** holding a **fencing epoch** kept in the
database. Retiring the worker advances the epoch; from then on the process holding the old
epoch can neither begin an operation nor record an outcome — the check and the write are one
transaction, so a reply that arrives after retirement leaves the operation without an
outcome (``OUTCOME_UNKNOWN``). Who dispatched each operation (worker, epoch, job alias) is
kept beside it, and an operator's resolution of an unknown outcome is an audited record
(who, when, why) written with the outcome in one transaction; it never dispatches.

**Fenced replies.** A reply is recorded only before its reply deadline, and only while no
process has declared the operation's outcome unknown. A process that answers a client
``OUTCOME_UNKNOWN`` for an attempt without a reply first writes that declaration
(``declare_unknown``); the declaration and a completion serialise on the operation (SQLite's
write lock; PostgreSQL's row lock on the operation), so once a client was told
``OUTCOME_UNKNOWN`` no late reply can become the outcome — whatever the clocks of the two
processes say. A declaration for an operation that already has an outcome writes nothing (the
caller answers from the returned record); declaring twice keeps the first declaration.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol, runtime_checkable

import msgspec

from pausemesh.core.errors import ReplyTooLateError
from pausemesh.core.operations import (
    OperationBegin,
    OperationRecord,
    OutcomeUnknownWebhooks,
    UnknownDeclaration,
)

__all__ = (
    "Dispatch",
    "FencedOperations",
    "Resolution",
    "UnknownDeclaration",
    "check_reply_in_time",
)


class Dispatch(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Which worker (at which epoch, under which job alias) began an operation."""

    operation_id: str
    worker: str
    epoch: int
    job: str
    dispatched_at: datetime


class Resolution(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """An operator's resolution of an unknown outcome (the audit record)."""

    operation_id: str
    resolved_by: str
    reason: str
    resolved_at: datetime


def check_reply_in_time(
    record: OperationRecord, *, declared: bool, now: datetime, deadline: datetime
) -> None:
    """``ReplyTooLateError`` for a reply to an attempt without an outcome that some process
    declared unknown (``declared``), or that comes at or after ``deadline``. An operation that
    has its outcome is left to the ledger's completion (a repeat of the same reply is fine)."""
    if record.completed:
        return
    if declared:
        raise ReplyTooLateError(record.operation_id, declared=True)
    if now >= deadline:
        raise ReplyTooLateError(record.operation_id, declared=False)


@runtime_checkable
class FencedOperations(Protocol):
    """Port: worker epochs plus the ledger's begin/complete, fenced by them. SQLite and
    PostgreSQL implement it over the same ``operations`` table as ``OperationLedger``."""

    async def claim_worker(self, domain: str, worker: str, *, now: datetime) -> int:
        """Advance the worker's epoch (1 for a new worker) and return it: what this process
        holds. An older process still running under the same name is fenced from now on."""
        ...

    async def retire_worker(self, domain: str, worker: str, *, now: datetime) -> int:
        """Advance the worker's epoch; return the new one. Holders of older epochs are fenced."""
        ...

    async def worker_epoch(self, domain: str, worker: str) -> int | None: ...

    async def begin_fenced(
        self, wanted: OperationRecord, *, worker: str, epoch: int, job: str
    ) -> OperationBegin:
        """``OperationLedger.begin`` for ``wanted`` (made by ``new_attempt``) if ``epoch`` is
        the worker's current one, with the dispatch record; ``RuntimeNotCurrentError``
        (nothing written) otherwise."""
        ...

    async def complete_fenced(
        self,
        operation_id: str,
        *,
        attempt_id: str,
        result: Any,
        worker: str,
        epoch: int,
        now: datetime,
        deadline: datetime,
    ) -> OperationRecord:
        """``OperationLedger.complete`` if ``epoch`` is still current (else
        ``RuntimeNotCurrentError``), ``now`` is before ``deadline`` and no process declared
        the operation unknown (else ``ReplyTooLateError``); refused, the operation keeps no
        outcome. The checks and the write are one transaction."""
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
        """Declare the attempt's outcome unknown before telling a client so; return the stored
        record. Writes nothing if the operation already has an outcome (``record.completed``:
        answer from it) or was declared before (the first declaration stays).
        ``OPERATION_NOT_FOUND`` if never begun. The declaration that is written queues the
        ``operation.outcome_unknown`` webhooks (``webhooks.for_unknown_outcome``) in the same
        transaction, so the event exists exactly when the declaration does."""
        ...

    async def unknown_of(self, operation_id: str) -> UnknownDeclaration | None: ...

    async def resolve(
        self, operation_id: str, *, result: Any, resolved_by: str, reason: str, now: datetime
    ) -> OperationRecord:
        """Record an operator's result for an operation without an outcome, with its audit
        record. ``OPERATION_NOT_FOUND`` if never begun, ``OPERATION_NOT_UNKNOWN`` if it
        already has an outcome."""
        ...

    async def dispatch_of(self, operation_id: str) -> Dispatch | None: ...

    async def resolution_of(self, operation_id: str) -> Resolution | None: ...
