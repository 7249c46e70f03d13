"""The gateway: each job's operation dispatched to its upstream at most once.

``Gateway.run(job, arguments, principal)``:

1. ``execute`` permission, the closed pinned schema, the business key (from the operator's
   template, never from a field the caller names) → the operation id;
2. an operation already recorded for that id is answered from the record — the recorded
   reply (``RECONCILIATION_ONLY``), ``OUTCOME_UNKNOWN``, ``OPERATION_CONFLICT`` for other
   arguments — with no upstream connection at all;
3. otherwise: optional human approval (``approver``), the live tool compared with the pin
   (``TOOL_CHANGED``, nothing recorded or sent), the attempt recorded durably and fenced by
   this worker's epoch, **one** ``tools/call``, the reply recorded (fenced again).

Anything after the attempt that leaves no recorded reply — a crash, a timeout, the upstream
exiting, an unreadable or oversized reply, retirement before the reply is recorded — leaves
the operation ``OUTCOME_UNKNOWN`` for good. Two calls of one operation in this process at
once: one dispatches, the other gets ``BUSY``.
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
    RuntimeNotCurrentError,
    StoreError,
)
from pausemesh.core.fencing import FencedOperations
from pausemesh.core.operations import (
    EXECUTE,
    OperationLedger,
    OperationRecord,
    decide,
    new_attempt,
    operation_id,
)
from pausemesh.core.ports import Clock
from pausemesh.core.schema import SchemaValidatorCache
from pausemesh.core.telemetry import GATEWAY_DISPATCHES, count, span
from pausemesh.gateway.config import GatewayConfig, Job
from pausemesh.gateway.inspect import (
    DECLINED_RESULT,
    explain,
    inspect_operation,
    operation_state,
    upstream_result,
)
from pausemesh.gateway.lock import GatewayLock, PinnedJob, agent_schema
from pausemesh.gateway.results import (
    BUSY,
    DENIED,
    OPERATION_CONFLICT,
    OUTCOME_UNKNOWN,
    RECONCILIATION_ONLY,
    REFUSED,
    RESPONSE_RETAINED,
    TOOL_CHANGED,
    outcome,
)
from pausemesh.gateway.upstream import UpstreamPool, UpstreamSession, definition_of

__all__ = ("MAX_RETAINED_BYTES", "Approver", "Gateway", "Pending")

_log = logging.getLogger("pausemesh.gateway")

MAX_RETAINED_BYTES: Final = 16_384
_TERMS_VERSION = "pausemesh-gateway-job/1"


@dataclass(frozen=True, slots=True)
class Pending:
    """The approval is still open: hand ``value`` (a protocol object) back to the caller."""

    value: Any


Approver = Callable[[Job, str, dict[str, Any]], Awaitable["bool | Pending"]]
"""Asks a person to approve ``job`` for ``(operation id, arguments)``: True, False or Pending."""


class _Stop(Exception):  # noqa: N818 - control flow inside run, never escapes
    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(body.get("status"))
        self.body = body


def _terms(job: Job, pinned: PinnedJob, arguments: dict[str, Any]) -> dict[str, Any]:
    # Upstream, tool, the pinned definition and the arguments: the alias (job name) is not
    # part of it, so renaming a job does not make new work.
    return {
        "v": _TERMS_VERSION,
        "upstream": job.upstream,
        "definitionDigest": pinned.digest,
        "arguments": arguments,
    }


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
    ) -> None:
        self.config = config
        self.lock = lock
        self.ledger = ledger
        self.fencing = fencing
        self.worker = worker or config.worker
        self.clock = clock or SystemClock()
        self.pool = UpstreamPool(dict(config.upstreams))
        self.epoch: int | None = None
        schemas = SchemaValidatorCache()
        # One compiled validator per job's closed schema, checked once at start.
        self._validators = {
            name: schemas.validator_for(agent_schema(lock.jobs[name].definition))
            for name in config.jobs
        }
        self._inflight: set[str] = set()

    async def start(self) -> int:
        """Claim this worker's current epoch; every later action is fenced by it."""
        self.epoch = await self.fencing.claim_worker(
            self.config.domain, self.worker, now=self.clock.now()
        )
        return self.epoch

    async def close(self) -> None:
        await self.pool.close()

    # -- what the agent sees --------------------------------------------------------------

    def job_tools(self) -> list[Tool]:
        tools = []
        for name, job in self.config.jobs.items():
            pinned = self.lock.jobs[name]
            definition = pinned.definition
            description = f"Runs {job.tool} on {job.upstream} at most once per business key."
            tools.append(
                Tool.model_validate(
                    {
                        "name": name,
                        "description": description,
                        "inputSchema": agent_schema(definition),
                        **(
                            {"annotations": definition["annotations"]}
                            if "annotations" in definition
                            else {}
                        ),
                    }
                )
            )
        return tools

    def input_schema(self, name: str) -> dict[str, Any] | None:
        if name not in self.config.jobs:
            return None
        return agent_schema(self.lock.jobs[name].definition)

    # -- run ------------------------------------------------------------------------------

    def _arguments(self, job: Job, arguments: dict[str, Any]) -> tuple[str, str]:
        problems = sorted(e.message for e in self._validators[job.name].iter_errors(arguments))
        if problems:
            raise _Stop(
                outcome(REFUSED, job.name, reason="INVALID_ARGUMENTS", message="; ".join(problems))
            )
        try:
            key = job.business_key_for(arguments)
        except GatewayError as error:
            raise _Stop(
                outcome(REFUSED, job.name, reason=error.code, message=error.message)
            ) from None
        return key, operation_id(self.config.domain, key)

    def _recorded(
        self, job: Job, record: OperationRecord, wanted: OperationRecord
    ) -> dict[str, Any]:
        """The answer for an operation that already has a record (nothing is sent)."""
        op = record.operation_id
        try:
            decide(record, wanted)
        except OperationConflictError:
            return outcome(
                OPERATION_CONFLICT,
                job.name,
                operation_id=op,
                message="This business key was already used with other arguments.",
            )
        state = operation_state(record)
        if state == DENIED:
            return outcome(DENIED, job.name, operation_id=op, reason="APPROVAL_DECLINED")
        if state == OUTCOME_UNKNOWN:
            return outcome(
                OUTCOME_UNKNOWN,
                job.name,
                operation_id=op,
                message="An attempt was recorded without a reply; it is never sent again.",
            )
        assert isinstance(record.result, dict)  # noqa: S101 - state RESPONSE_RETAINED
        return outcome(
            RECONCILIATION_ONLY,
            job.name,
            operation_id=op,
            resolvedByOperator="resolvedResult" in record.result,
            upstreamResult=upstream_result(record),
            contentTrust="UNTRUSTED_DATA",
        )

    def _wanted(self, job: Job, key: str, arguments: dict[str, Any]) -> OperationRecord:
        return new_attempt(
            self.config.domain,
            key,
            job.tool,
            _terms(job, self.lock.jobs[job.name], arguments),
            now=self.clock.now(),
        )

    async def _check_current(self, job: Job) -> None:
        current = await self.fencing.worker_epoch(self.config.domain, self.worker)
        if self.epoch is None or current != self.epoch:
            raise _Stop(outcome(REFUSED, job.name, reason="RUNTIME_NOT_CURRENT"))

    async def run(
        self,
        name: str,
        arguments: dict[str, Any],
        principal: str | None,
        *,
        approver: Approver | None = None,
    ) -> dict[str, Any] | Pending:
        """One job call: at most one dispatch per business key (a span and a count each)."""
        with span("gateway.dispatch", job=name) as current:
            result = await self._run_job(name, arguments, principal, approver)
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
    ) -> dict[str, Any] | Pending:
        job = self.config.job(name)
        if job is None:
            return outcome(REFUSED, name, reason="UNKNOWN_JOB")
        if "execute" not in self.config.access.permissions(principal):
            return outcome(DENIED, name, reason="EXECUTE_NOT_PERMITTED")
        try:
            key, op = self._arguments(job, arguments)
        except _Stop as stop:
            return stop.body
        if op in self._inflight:
            return outcome(BUSY, name, operation_id=op)
        self._inflight.add(op)
        try:
            return await self._run(job, key, op, arguments, approver)
        except _Stop as stop:
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
        wanted = self._wanted(job, key, arguments)
        existing = await self.ledger.get(op)
        if existing is not None:
            return self._recorded(job, existing, wanted)
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
                return outcome(
                    OUTCOME_UNKNOWN, job.name, operation_id=op, reason="UPSTREAM_TIMEOUT"
                )
            await self.pool.discard(session)
            return outcome(OUTCOME_UNKNOWN, job.name, operation_id=op, reason="UPSTREAM_FAILED")
        retained = {
            "upstreamResult": reply.model_dump(by_alias=True, exclude_none=True, mode="json")
        }
        if len(canonical_json(retained).encode()) > MAX_RETAINED_BYTES:
            return outcome(OUTCOME_UNKNOWN, job.name, operation_id=op, reason="REPORT_LIMIT")
        return await self._record(job, attempt, retained)

    async def _session(self, job: Job, op: str) -> UpstreamSession:
        try:
            return await self.pool.get(job.upstream)
        except GatewayError as error:
            raise _Stop(outcome(REFUSED, job.name, operation_id=op, reason=error.code)) from None

    async def _check_definition(self, job: Job, op: str, session: UpstreamSession) -> None:
        try:
            live = definition_of(await session.list_tool(job.tool))
        except GatewayError as error:
            if error.code == "UPSTREAM_UNAVAILABLE":
                await self.pool.discard(session)
            status = TOOL_CHANGED if error.code == "TOOL_MISSING" else REFUSED
            raise _Stop(outcome(status, job.name, operation_id=op, reason=error.code)) from None
        if canonical_sha256(live) != self.lock.jobs[job.name].digest:
            raise _Stop(
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
            raise _Stop(
                outcome(
                    REFUSED,
                    job.name,
                    operation_id=wanted.operation_id,
                    reason="RUNTIME_NOT_CURRENT",
                )
            ) from None
        except OperationConflictError:
            raise _Stop(
                outcome(OPERATION_CONFLICT, job.name, operation_id=wanted.operation_id)
            ) from None
        if begun.decision != EXECUTE:
            # Another process began it between our read and our insert.
            raise _Stop(self._recorded(job, begun.record, wanted))
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
            )
        except RuntimeNotCurrentError:
            return outcome(OUTCOME_UNKNOWN, job.name, operation_id=op, reason="RUNTIME_NOT_CURRENT")
        except (StoreError, InvalidInputError, OperationConflictError) as error:
            return outcome(OUTCOME_UNKNOWN, job.name, operation_id=op, reason=error.code)
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
            )
        except RuntimeNotCurrentError:
            return outcome(
                REFUSED, job.name, operation_id=wanted.operation_id, reason="RUNTIME_NOT_CURRENT"
            )
        return outcome(
            DENIED, job.name, operation_id=wanted.operation_id, reason="APPROVAL_DECLINED"
        )

    # -- inspection -----------------------------------------------------------------------

    async def _inspected(self, arguments: dict[str, Any], principal: str | None) -> dict[str, Any]:
        name = arguments.get("job")
        job = self.config.job(name) if isinstance(name, str) else None
        if job is None:
            raise _Stop(outcome(REFUSED, str(name), reason="UNKNOWN_JOB"))
        permissions = self.config.access.permissions(principal)
        if "inspect" not in permissions:
            raise _Stop(outcome(DENIED, job.name, reason="INSPECT_NOT_PERMITTED"))
        await self._check_current(job)
        missing = [field for field in job.key_fields if field not in arguments]
        extra = sorted(set(arguments) - {"job", *job.key_fields})
        if missing or extra:
            message = f"{job.name} is inspected with job plus {list(job.key_fields)}"
            raise _Stop(outcome(REFUSED, job.name, reason="INVALID_ARGUMENTS", message=message))
        try:
            key = job.business_key_for(arguments)
        except GatewayError as error:
            raise _Stop(
                outcome(REFUSED, job.name, reason=error.code, message=error.message)
            ) from None
        op = operation_id(self.config.domain, key)
        body = await inspect_operation(self.ledger, self.fencing, self.config.domain, op)
        body["job"] = job.name
        body["permission"] = sorted(permissions)
        return body

    async def status(self, arguments: dict[str, Any], principal: str | None) -> dict[str, Any]:
        try:
            return await self._inspected(arguments, principal)
        except _Stop as stop:
            return stop.body

    async def why(self, arguments: dict[str, Any], principal: str | None) -> dict[str, Any]:
        try:
            body = await self._inspected(arguments, principal)
        except _Stop as stop:
            return stop.body
        permissions = set(body["permission"])
        return {
            "status": body["status"],
            "job": body["job"],
            "operationId": body["operationId"],
            "explanation": explain(body),
            "permission": {
                "execute": "execute" in permissions,
                "inspect": "inspect" in permissions,
            },
            "scope": "CURRENT_PERMISSION_ONLY",
            "executionCapability": False,
            "externalOutcome": "NOT_PROVEN",
        }
