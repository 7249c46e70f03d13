"""Protocol projections over REST: AG-UI, MCP and A2A views of one pending continuation.

The projection functions live with their protocols (``pausemesh.agui``, ``.mcp``, ``.a2a``);
this module only adapts the REST bodies to them and their results to ``ProjectionBody``.
They are imported on first use so the REST API keeps serving while a protocol package is
absent from a build; a missing one answers 404 ``UNSUPPORTED_PROTOCOL``.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import msgspec

from pausemesh.core.errors import ProtocolAdapterError
from pausemesh.core.model import Continuation
from pausemesh.web.schemas import (
    A2AProjectionBody,
    AguiProjectionBody,
    McpProjectionBody,
    ProjectionBody,
)

__all__ = ("PROTOCOLS", "project_a2a", "project_agui", "project_mcp")

PROTOCOLS = ("mcp", "a2a", "ag-ui")


def _module(name: str, protocol: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name is None or not name.startswith(error.name):
            raise
        raise ProtocolAdapterError(
            f"The {protocol} projection is not available in this build",
            code="UNSUPPORTED_PROTOCOL",
        ) from None


def _builtins(value: Any) -> Any:
    return msgspec.to_builtins(value)


def _require_pending(continuation: Continuation) -> None:
    if continuation.status != "pending":
        raise ProtocolAdapterError(
            f"A {continuation.status} continuation cannot be projected",
            code="INVALID_PROTOCOL_TRANSITION",
        )


def project_agui(continuation: Continuation, body: AguiProjectionBody) -> ProjectionBody:
    _require_pending(continuation)
    cohort = _module("pausemesh.agui.cohort", "ag-ui")
    event, receipt = cohort.issue_interrupts(
        [continuation], thread_id=body.thread_id, run_id=body.run_id
    )
    return ProjectionBody(projection=_builtins(event), receipt=_builtins(receipt))


def project_mcp(
    continuation: Continuation, body: McpProjectionBody, policy: Any | None
) -> ProjectionBody:
    _require_pending(continuation)
    elicitation = _module("pausemesh.mcp.elicitation", "mcp")
    context = elicitation.decode_mcp_projection_context(_builtins(body))
    request, receipt = elicitation.issue_mcp_elicitation(continuation, context, policy)
    return ProjectionBody(projection=_builtins(request), receipt=_builtins(receipt))


def project_a2a(continuation: Continuation, body: A2AProjectionBody) -> ProjectionBody:
    _require_pending(continuation)
    task = _module("pausemesh.a2a.task", "a2a")
    binding = task.decode_a2a_task_binding(_builtins(body))
    return ProjectionBody(projection=_builtins(task.to_a2a_interrupted_task(continuation, binding)))
