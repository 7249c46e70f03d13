"""The gateway: each job's operation dispatched to its upstream at most once.

``Gateway.run(job, arguments, principal)``:

1. ``execute`` permission, the closed pinned schema, the business key (from the operator's
   template, never from a field the caller names) → the operation id;
2. an operation already recorded for that id is answered from the record — the recorded
   reply (``RECONCILIATION_ONLY``), ``OUTCOME_UNKNOWN``, ``OPERATION_CONFLICT`` for other
   arguments, ``BUSY`` while another worker may still record its reply (``reconcile``) —
   with no upstream connection at all;
3. otherwise: optional human approval (``approver``), the tool's definition as the current
   upstream connection lists it compared with the pin (``TOOL_CHANGED``, nothing recorded
   or sent), the attempt recorded durably and fenced by this worker's epoch — the insert
   decides, so of any number of processes on one database one dispatches — **one**
   ``tools/call``, the reply recorded (fenced again, and the store refuses it after
   ``reply_deadline`` or once any process declared the operation unknown: ``REPLY_TOO_LATE``).

Anything after the attempt that leaves no recorded reply — a crash, a timeout, the upstream
exiting, an unreadable or oversized reply, retirement before the reply is recorded — leaves
the operation ``OUTCOME_UNKNOWN`` for good; the process declares it unknown in the store
before it answers so. Two calls of one operation in this process at
once: one dispatches, the other gets ``BUSY`` without reading the ledger.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

import msgspec
from mcp_types import Tool

from pausemesh.core.canonical import canonical_json, canonical_sha256
from pausemesh.core.clock import SystemClock
from pausemesh.core.errors import (
    GatewayError,
    InvalidInputError,
    OperationConflictError,
    ReplyTooLateError,
    RuntimeNotCurrentError,
    StoreError,
)
from pausemesh.core.fencing import FencedOperations
from pausemesh.core.operations import EXECUTE, OperationLedger, OperationRecord, operation_id
from pausemesh.core.ports import Clock
from pausemesh.core.schema import SchemaValidatorCache
from pausemesh.core.webhooks import WebhookRoutes
from pausemesh.gateway.catalog import input_schema, job_tools
from pausemesh.gateway.config import GatewayConfig, Job
from pausemesh.gateway.inspect import DECLINED_RESULT, upstream_result
from pausemesh.gateway.inspect_tools import Inspection
from pausemesh.gateway.lock import GatewayLock, agent_schema
from pausemesh.gateway.reconcile import (
    answer_recorded,
    recorded_answer,
    reply_deadline,
    wanted_attempt,
)
from pausemesh.gateway.results import (
    BUSY,
    DENIED,
    OPERATION_CONFLICT,
    OUTCOME_UNKNOWN,
    REFUSED,
    RESPONSE_RETAINED,
    TOOL_CHANGED,
    Stop,
    outcome,
)
from pausemesh.gateway.upstream import UpstreamPool, UpstreamSession, definition_of
from pausemesh.observability.telemetry import GATEWAY_DISPATCHES, count, span

__all__ = ("MAX_RETAINED_BYTES", "Approver", "Gateway", "Pending")

_log = logging.getLogger("pausemesh.gateway")

MAX_RETAINED_BYTES: Final = 16_384


@dataclass(frozen=True, slots=True)
class Pending:
    """The approval is still open: hand ``value`` (a protocol object) back to the caller."""

    value: Any


Approver = Callable[[Job, str, dict[str, Any]], Awaitable["bool | Pending"]]
"""Asks a person to approve ``job`` for ``(operation id, arguments)``: True, False or Pending."""


class Gateway:
    """One gateway process: its config, lock, stores, upstream sessions and worker epoch."""

    def __init__(
        self,
        config: GatewayConfig,
        lock: GatewayLock,
        *,
        ledger: OperationLedger,
        fencing: FencedOperations,
        worker: str | None = None,
        clock: Clock | None = None,
        webhooks: WebhookRoutes | None = None,
    ) -> None:
        self.config = config
        self.lock = lock
        self.ledger = ledger
        self.fencing = fencing
        self.worker = worker or config.worker
        self.clock = clock or SystemClock()
        # Subscriptions to ``operation.outcome_unknown``: queued with the declaration.
        self.webhooks = webhooks
        self.pool = UpstreamPool(dict(config.upstreams))
        self.epoch: int | None = None
        schemas = SchemaValidatorCache()
        # One compiled validator per job's closed schema, checked once at start.
        self._validators = {
            name: schemas.validator_for(agent_schema(lock.jobs[name].definition))
            for name in config.jobs
        }
        self._inflight: set[str] = set()
        self._inspection = Inspection(config, ledger, fencing, self.worker)

    async def start(self) -> int:
        """Claim this worker's next epoch (fencing any older process with this name); every
        later action is fenced by it."""
        self.epoch = await self.fencing.claim_worker(
            self.config.domain, self.worker, now=self.clock.now()
        )
        return self.epoch

    async def close(self) -> None:
        await self.pool.close()

    # -- what the agent sees --------------------------------------------------------------

    def job_tools(self) -> list[Tool]:
        return job_tools(self.config, self.lock)

    def input_schema(self, name: str) -> dict[str, Any] | None:
        return input_schema(self.config, self.lock, name)

    # -- run ------------------------------------------------------------------------------

    def _arguments(self, job: Job, arguments: dict[str, Any]) -> tuple[str, str]:
        problems = sorted(e.message for e in self._validators[job.name].iter_errors(arguments))
        if problems:
            raise Stop(
                outcome(REFUSED, job.name, reason="INVALID_ARGUMENTS", message="; ".join(problems))
            )
        try:
            key = job.business_key_for(arguments)
        except GatewayError as error:
            raise Stop(
                outcome(REFUSED, job.name, reason=error.code, message=error.message)
            ) from None
        return key, operation_id(self.config.domain, key)

    async def run(
        self,
        name: str,
        arguments: dict[str, Any],
        principal: str | None,
        *,
        approver: Approver | None = None,
        roles: frozenset[str] = frozenset(),
    ) -> dict[str, Any] | Pending:
        """One job call: at most one dispatch per business key (a span and a count each)."""
        with span("gateway.dispatch", job=name) as current:
            result = await self._run_job(name, arguments, principal, approver, roles)
            status = result.get("status") if isinstance(result, dict) else "PENDING"
            status = status if isinstance(status, str) else "UNKNOWN"
            current.set_attribute("pausemesh.status", status)
            count(GATEWAY_DISPATCHES, status)
            return result

    async def _run_job(  # noqa: PLR0911 - one early answer per refusal, in the documented order
        self,
        name: str,
        arguments: dict[str, Any],
        principal: str | None,
        approver: Approver | None,
        roles: frozenset[str],
    ) -> dict[str, Any] | Pending:
        job = self.config.job(name)
        if job is None:
            return outcome(REFUSED, name, reason="UNKNOWN_JOB")
        if "execute" not in self.config.access.permissions(principal, roles):
            return outcome(DENIED, name, reason="EXECUTE_NOT_PERMITTED")
        try:
            key, op = self._arguments(job, arguments)
        except Stop as stop:
            return stop.body
        if op in self._inflight:
            return outcome(BUSY, name, operation_id=op)
        self._inflight.add(op)
        try:
            return await self._run(job, key, op, arguments, approver)
        except Stop as stop:
            return stop.body
        except StoreError as error:
            _log.warning("gateway store failed: %s", error.code)
            return outcome(REFUSED, name, operation_id=op, reason=error.code)
        finally:
            self._inflight.discard(op)

    async def _run(
        self,
        job: Job,
        key: str,
        op: str,
        arguments: dict[str, Any],
        approver: Approver | None,
    ) -> dict[str, Any] | Pending:
        pinned = self.lock.jobs[job.name]
        wanted = wanted_attempt(self.config.domain, job, pinned, key, arguments, self.clock.now())
        existing = await self.ledger.get(op)
        if existing is not None:
            return await self._answer(job, existing, wanted)
        if job.require_approval:
            if approver is None:
                return outcome(REFUSED, job.name, operation_id=op, reason="APPROVAL_UNAVAILABLE")
            decision = await approver(job, op, arguments)
            if isinstance(decision, Pending):
                return decision
            if not decision:
                return await self._decline(job, wanted)
        session = await self._session(job, op)
        await self._check_definition(job, op, session)
        attempt = await self._begin(job, wanted)
        # From here the call is sent and its reply recorded even if the agent gives up
        # waiting (its request cancelled): a lost reply would make the outcome unknown.
        return await asyncio.shield(self._dispatch(job, attempt, session, arguments))

    async def _answer(
        self, job: Job, record: OperationRecord, wanted: OperationRecord
    ) -> dict[str, Any]:
        return await answer_recorded(
            self.fencing,
            self.config.domain,
            self.worker,
            job,
            record,
            wanted,
            now=self.clock.now(),
            webhooks=self.webhooks,
        )

    async def _dispatch(
        self,
        job: Job,
        attempt: OperationRecord,
        session: UpstreamSession,
        arguments: dict[str, Any],
    ) -> dict[str, Any]:
        """The one ``tools/call`` of ``attempt``, then its reply recorded (fenced)."""
        op = attempt.operation_id
        try:
            reply = await session.call_once(job.tool, arguments, job.timeout_seconds)
        except Exception as error:  # noqa: BLE001 - any failure after dispatch: outcome unknown
            _log.warning("upstream call of %s failed after dispatch: %s", op, type(error).__name__)
            if session.timed_out(error):
                return await self._unknown(job, op, "UPSTREAM_TIMEOUT")
            await self.pool.discard(session)
            return await self._unknown(job, op, "UPSTREAM_FAILED")
        retained = {
            "upstreamResult": reply.model_dump(by_alias=True, exclude_none=True, mode="json")
        }
        if len(canonical_json(retained).encode()) > MAX_RETAINED_BYTES:
            return await self._unknown(job, op, "REPORT_LIMIT")
        return await self._record(job, attempt, retained)

    async def _unknown(self, job: Job, op: str, reason: str) -> dict[str, Any]:
        """``OUTCOME_UNKNOWN`` for this worker's own attempt, declared in the store first (so
        ``pausemesh ops resolve`` need not wait for the reply deadline)."""
        try:
            record = await self.fencing.declare_unknown(
                op,
                declared_by=self.worker,
                reason=reason,
                now=self.clock.now(),
                webhooks=self.webhooks,
            )
        except (StoreError, InvalidInputError) as error:
            # This process records no reply for it either way; the deadline still fences it.
            _log.warning("could not declare %s unknown: %s", op, error.code)
        else:
            if record.completed:  # an operator resolved it meanwhile: that is the outcome
                return recorded_answer(job, record, record)
        return outcome(OUTCOME_UNKNOWN, job.name, operation_id=op, reason=reason)

    async def _session(self, job: Job, op: str) -> UpstreamSession:
        try:
            return await self.pool.get(job.upstream)
        except GatewayError as error:
            raise Stop(outcome(REFUSED, job.name, operation_id=op, reason=error.code)) from None

    async def _check_definition(self, job: Job, op: str, session: UpstreamSession) -> None:
        try:
            live = definition_of(await session.list_tool(job.tool))
        except GatewayError as error:
            if error.code == "UPSTREAM_UNAVAILABLE":
                await self.pool.discard(session)
            status = TOOL_CHANGED if error.code == "TOOL_MISSING" else REFUSED
            raise Stop(outcome(status, job.name, operation_id=op, reason=error.code)) from None
        if canonical_sha256(live) != self.lock.jobs[job.name].digest:
            raise Stop(
                outcome(
                    TOOL_CHANGED,
                    job.name,
                    operation_id=op,
                    message="The upstream tool no longer matches its pinned definition; nothing was sent.",
                )
            )

    async def _begin(self, job: Job, wanted: OperationRecord) -> OperationRecord:
        """Record the attempt (fenced): this call now owns the one dispatch."""
        assert self.epoch is not None  # noqa: S101 - set by start()
        # The attempt is timed when it is recorded (an approval may have taken minutes).
        wanted = msgspec.structs.replace(wanted, attempted_at=self.clock.now())
        try:
            begun = await self.fencing.begin_fenced(
                wanted, worker=self.worker, epoch=self.epoch, job=job.name
            )
        except RuntimeNotCurrentError:
            raise Stop(
                outcome(
                    REFUSED,
                    job.name,
                    operation_id=wanted.operation_id,
                    reason="RUNTIME_NOT_CURRENT",
                )
            ) from None
        except OperationConflictError:
            raise Stop(
                outcome(OPERATION_CONFLICT, job.name, operation_id=wanted.operation_id)
            ) from None
        if begun.decision != EXECUTE:
            # Another process began it between our read and our insert.
            raise Stop(await self._answer(job, begun.record, wanted))
        return begun.record

    async def _record(
        self, job: Job, attempt: OperationRecord, retained: dict[str, Any]
    ) -> dict[str, Any]:
        op = attempt.operation_id
        assert self.epoch is not None  # noqa: S101 - set by start()
        try:
            record = await self.fencing.complete_fenced(
                op,
                attempt_id=attempt.attempt_id,
                result=retained,
                worker=self.worker,
                epoch=self.epoch,
                now=self.clock.now(),
                deadline=reply_deadline(job, attempt),
            )
        except (
            RuntimeNotCurrentError,
            ReplyTooLateError,
            StoreError,
            InvalidInputError,
            OperationConflictError,
        ) as error:
            # RUNTIME_NOT_CURRENT (retired), REPLY_TOO_LATE (after the deadline, or another
            # process already told a client OUTCOME_UNKNOWN), a store error or a conflict.
            return await self._unknown(job, op, error.code)
        return outcome(
            RESPONSE_RETAINED,
            job.name,
            operation_id=op,
            # The recorded copy, so this answer and every later reconciliation are identical.
            upstreamResult=upstream_result(record),
            contentTrust="UNTRUSTED_DATA",
        )

    async def _decline(self, job: Job, wanted: OperationRecord) -> dict[str, Any]:
        """Record the declined approval as the operation's outcome: nothing is ever sent."""
        attempt = await self._begin(job, wanted)
        assert self.epoch is not None  # noqa: S101 - set by start()
        try:
            await self.fencing.complete_fenced(
                wanted.operation_id,
                attempt_id=attempt.attempt_id,
                result=DECLINED_RESULT,
                worker=self.worker,
                epoch=self.epoch,
                now=self.clock.now(),
                deadline=reply_deadline(job, attempt),
            )
        except RuntimeNotCurrentError:
            return outcome(
                REFUSED, job.name, operation_id=wanted.operation_id, reason="RUNTIME_NOT_CURRENT"
            )
        except ReplyTooLateError:
            # Another process declared the attempt unknown first; nothing was sent.
            return await self._unknown(job, wanted.operation_id, "REPLY_TOO_LATE")
        return outcome(
            DENIED, job.name, operation_id=wanted.operation_id, reason="APPROVAL_DECLINED"
        )

    # -- inspection -----------------------------------------------------------------------

    async def status(
        self,
        arguments: dict[str, Any],
        principal: str | None,
        roles: frozenset[str] = frozenset(),
    ) -> dict[str, Any]:
        return await self._inspection.status(arguments, principal, self.epoch, roles)

    async def why(
        self,
        arguments: dict[str, Any],
        principal: str | None,
        roles: frozenset[str] = frozenset(),
    ) -> dict[str, Any]:
        return await self._inspection.why(arguments, principal, self.epoch, roles)
