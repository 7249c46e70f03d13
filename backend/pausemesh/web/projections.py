"""Protocol projections over REST: AG-UI, MCP and A2A views of one pending continuation.

The projection functions live with their protocols (``pausemesh.agui.receipts``,
``pausemesh.mcp.elicitation``, ``pausemesh.a2a.task``); this module only adapts the REST
bodies to them and their results to ``ProjectionBody``. The MCP URL-mode policy comes from
the host (``PauseMeshConfig.mcp_projection_policy``), never from the request: without one,
URL elicitation fails closed with ``INVALID_PROTOCOL_BINDING``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from pausemesh.a2a.task import decode_a2a_task_binding, to_a2a_interrupted_task
from pausemesh.agui.receipts import issue_interrupts
from pausemesh.core.errors import ProtocolAdapterError
from pausemesh.core.model import Continuation
from pausemesh.mcp.elicitation import decode_mcp_projection_context, issue_mcp_elicitation
from pausemesh.mcp.url_policy import McpProjectionPolicy
from pausemesh.web.schemas import (
    A2AProjectionBody,
    AguiProjectionBody,
    McpProjectionBody,
    ProjectionBody,
)

__all__ = ("PROTOCOLS", "project_a2a", "project_agui", "project_mcp")

PROTOCOLS = ("mcp", "a2a", "ag-ui")


def _builtins(value: Any) -> Any:
    return msgspec.to_builtins(value)


def _require_pending(continuation: Continuation) -> None:
    # The projections check this too; checking first keeps the answer the same for all three.
    if continuation.status != "pending":
        raise ProtocolAdapterError(
            f"A {continuation.status} continuation cannot be projected",
            code="INVALID_PROTOCOL_TRANSITION",
        )


def project_agui(continuation: Continuation, body: AguiProjectionBody) -> ProjectionBody:
    """A one-continuation cohort: the interrupting ``RUN_FINISHED`` and its receipt."""
    _require_pending(continuation)
    event, receipt = issue_interrupts([continuation], thread_id=body.thread_id, run_id=body.run_id)
    return ProjectionBody(projection=_builtins(event), receipt=_builtins(receipt))


def project_mcp(
    continuation: Continuation, body: McpProjectionBody, policy: McpProjectionPolicy | None
) -> ProjectionBody:
    """The ``elicitation/create`` request (form or URL mode) and its host-side receipt."""
    _require_pending(continuation)
    context = decode_mcp_projection_context(_builtins(body))
    request, receipt = issue_mcp_elicitation(continuation, context, policy)
    return ProjectionBody(projection=_builtins(request), receipt=_builtins(receipt))


def project_a2a(continuation: Continuation, body: A2AProjectionBody) -> ProjectionBody:
    """The A2A ``SendMessageResponse`` with the input-required / auth-required task."""
    _require_pending(continuation)
    binding = decode_a2a_task_binding(_builtins(body))
    return ProjectionBody(projection=_builtins(to_a2a_interrupted_task(continuation, binding)))
