"""``continuity_status`` and ``continuity_why``: one operation found from a job and its key
arguments, under the ``inspect`` permission, by a worker that is still current."""

from __future__ import annotations

from typing import Any

from pausemesh.core.errors import GatewayError
from pausemesh.core.fencing import FencedOperations
from pausemesh.core.operations import OperationLedger, operation_id
from pausemesh.gateway.config import GatewayConfig
from pausemesh.gateway.inspect import explain, inspect_operation
from pausemesh.gateway.results import DENIED, REFUSED, Stop, outcome

__all__ = ("Inspection",)


class Inspection:
    """The inspection tools of one gateway process (``epoch`` is read when asked)."""

    def __init__(
        self,
        config: GatewayConfig,
        ledger: OperationLedger,
        fencing: FencedOperations,
        worker: str,
    ) -> None:
        self.config = config
        self.ledger = ledger
        self.fencing = fencing
        self.worker = worker

    async def _inspected(
        self,
        arguments: dict[str, Any],
        principal: str | None,
        epoch: int | None,
        roles: frozenset[str],
    ) -> dict[str, Any]:
        name = arguments.get("job")
        job = self.config.job(name) if isinstance(name, str) else None
        if job is None:
            raise Stop(outcome(REFUSED, str(name), reason="UNKNOWN_JOB"))
        permissions = self.config.access.permissions(principal, roles)
        if "inspect" not in permissions:
            raise Stop(outcome(DENIED, job.name, reason="INSPECT_NOT_PERMITTED"))
        current = await self.fencing.worker_epoch(self.config.domain, self.worker)
        if epoch is None or current != epoch:
            raise Stop(outcome(REFUSED, job.name, reason="RUNTIME_NOT_CURRENT"))
        missing = [field for field in job.key_fields if field not in arguments]
        extra = sorted(set(arguments) - {"job", *job.key_fields})
        if missing or extra:
            message = f"{job.name} is inspected with job plus {list(job.key_fields)}"
            raise Stop(outcome(REFUSED, job.name, reason="INVALID_ARGUMENTS", message=message))
        try:
            key = job.business_key_for(arguments)
        except GatewayError as error:
            raise Stop(
                outcome(REFUSED, job.name, reason=error.code, message=error.message)
            ) from None
        op = operation_id(self.config.domain, key)
        body = await inspect_operation(self.ledger, self.fencing, self.config.domain, op)
        body["job"] = job.name
        body["permission"] = sorted(permissions)
        return body

    async def status(
        self,
        arguments: dict[str, Any],
        principal: str | None,
        epoch: int | None,
        roles: frozenset[str] = frozenset(),
    ) -> dict[str, Any]:
        try:
            return await self._inspected(arguments, principal, epoch, roles)
        except Stop as stop:
            return stop.body

    async def why(
        self,
        arguments: dict[str, Any],
        principal: str | None,
        epoch: int | None,
        roles: frozenset[str] = frozenset(),
    ) -> dict[str, Any]:
        try:
            body = await self._inspected(arguments, principal, epoch, roles)
        except Stop as stop:
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
