"""In-memory operation ledger: the fake for tests (same contract as the real ledgers).

A declaration's webhooks go to ``outbox`` (the in-memory push store, as the event store's
``outbox``) with no await between the declaration and the queueing, so on one event loop the
two happen together, as the database ledgers' single transaction makes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import msgspec

from pausemesh.core.canonical import canonical_json
from pausemesh.core.errors import OperationConflictError, StoreError
from pausemesh.core.operations import (
    EXECUTE,
    RECOVERED,
    RESENT,
    OperationBegin,
    OperationRecord,
    OperationRecovery,
    OutcomeUnknownWebhooks,
    RecoveryStep,
    UnknownDeclaration,
    begun,
    check_completion,
    decide,
    new_attempt,
    result_hash,
)
from pausemesh.core.validation import check_id

if TYPE_CHECKING:
    from pausemesh.stores.memory.push import InMemoryPushStore

__all__ = ("InMemoryOperationLedger",)


class InMemoryOperationLedger:
    def __init__(self) -> None:
        # Insertion order is attempt order; no await between read and write, so it is atomic.
        self._records: dict[str, OperationRecord] = {}
        self._recoveries: dict[tuple[str, RecoveryStep, int], OperationRecovery] = {}
        self._unknowns: dict[str, UnknownDeclaration] = {}
        self._closed = False
        # Where a declaration's webhooks are queued; None: they are dropped (no webhooks).
        self.outbox: InMemoryPushStore | None = None

    def _check_open(self) -> None:
        if self._closed:
            msg = "operation ledger is closed"
            raise StoreError(msg, code="STORE_UNAVAILABLE")

    async def begin(
        self,
        domain: str,
        business_key: str,
        *,
        tool: str,
        arguments: Any,
        now: datetime,
    ) -> OperationBegin:
        self._check_open()
        wanted = new_attempt(domain, business_key, tool, arguments, now=now)
        existing = self._records.get(wanted.operation_id)
        if existing is not None:
            return decide(existing, wanted)
        self._records[wanted.operation_id] = wanted
        return OperationBegin(decision=EXECUTE, record=wanted)

    async def complete(
        self, operation_id: str, *, attempt_id: str, result: Any, now: datetime
    ) -> OperationRecord:
        self._check_open()
        digest = result_hash(result)
        record = begun(operation_id, self._records.get(operation_id))
        if check_completion(record, attempt_id, digest):
            return record
        completed = msgspec.structs.replace(
            record,
            result=msgspec.json.decode(canonical_json(result)),
            result_hash=digest,
            completed_at=now,
        )
        self._records[operation_id] = completed
        return completed

    def _audit(self, operation_id: str, step: RecoveryStep, now: datetime, number: int = 1) -> bool:
        if (operation_id, step, number) in self._recoveries:
            return False
        entry = OperationRecovery(
            operation_id=operation_id, step=step, recorded_at=now, number=number
        )
        self._recoveries[operation_id, step, number] = entry
        return True

    async def recover(
        self, operation_id: str, *, attempt_id: str, result: Any, now: datetime
    ) -> OperationRecord:
        completed = await self.complete(operation_id, attempt_id=attempt_id, result=result, now=now)
        self._audit(operation_id, RECOVERED, now)
        return completed

    async def claim_resend(
        self, operation_id: str, *, attempt_id: str, number: int, now: datetime
    ) -> bool:
        self._check_open()
        record = begun(operation_id, self._records.get(operation_id))
        if record.attempt_id != attempt_id:
            raise OperationConflictError(operation_id)
        resends = sum(
            1 for op, step, _ in self._recoveries if op == operation_id and step == RESENT
        )
        return resends == number - 1 and self._audit(operation_id, RESENT, now, number)

    async def recoveries(self, operation_id: str) -> Sequence[OperationRecovery]:
        self._check_open()
        # Insertion order is the order the steps were recorded in.
        return [e for (op, _, _), e in self._recoveries.items() if op == operation_id]

    async def declare_unknown(
        self,
        operation_id: str,
        *,
        declared_by: str,
        reason: str,
        now: datetime,
        webhooks: OutcomeUnknownWebhooks | None = None,
    ) -> OperationRecord:
        self._check_open()
        check_id(declared_by, "declaredBy")
        check_id(reason, "reason")
        record = begun(operation_id, self._records.get(operation_id))
        if record.completed or operation_id in self._unknowns:
            return record
        self._unknowns[operation_id] = UnknownDeclaration(
            operation_id=operation_id, declared_by=declared_by, reason=reason, declared_at=now
        )
        if webhooks is not None:
            entries = webhooks.for_unknown_outcome(
                record, declared_by=declared_by, reason=reason, since=now, ledger=True
            )
            if self.outbox is not None:
                self.outbox.queue(entries, now=now)
                webhooks.queued(entries)
        return record

    async def unknown_of(self, operation_id: str) -> UnknownDeclaration | None:
        self._check_open()
        return self._unknowns.get(operation_id)

    async def get(self, operation_id: str) -> OperationRecord | None:
        self._check_open()
        return self._records.get(operation_id)

    async def list(self, domain: str, *, limit: int = 100) -> Sequence[OperationRecord]:
        self._check_open()
        return [r for r in self._records.values() if r.domain == domain][:limit]

    async def check_readiness(self) -> None:
        self._check_open()

    async def close(self) -> None:
        self._closed = True
