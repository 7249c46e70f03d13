"""The gateway's status vocabulary and the shape of what each call returns.

=========================  ==================================================================
``RESPONSE_RETAINED``      this call dispatched once and the reply is durably recorded
``RECONCILIATION_ONLY``    an earlier call's recorded reply (or an operator's resolution);
                           nothing was sent
``OUTCOME_UNKNOWN``        attempted, no recorded reply (crash, timeout, exit, unreadable
                           reply, reply after retirement): sticky, nothing is ever re-sent
``OPERATION_CONFLICT``     the business key was committed with other arguments
``TOOL_CHANGED``           the live upstream definition differs from the pin; nothing sent
``BUSY``                   this operation is being dispatched by another call right now
``DENIED``                 no ``execute``/``inspect`` permission, or a person declined
``REFUSED``                anything else, with a ``reason`` code; nothing sent
=========================  ==================================================================

Every result carries ``status``, ``job`` and (once the business key is known) ``operationId``.
A retained reply is the upstream's ``CallToolResult``, marked ``contentTrust:
UNTRUSTED_DATA``; ``externalOutcome`` is always ``NOT_PROVEN`` — a reply is not proof that
the business effect happened.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = (
    "BUSY",
    "DENIED",
    "NOT_STARTED",
    "OPERATION_CONFLICT",
    "OUTCOME_UNKNOWN",
    "RECONCILIATION_ONLY",
    "REFUSED",
    "RESPONSE_RETAINED",
    "SUCCESS_STATUSES",
    "TOOL_CHANGED",
    "Stop",
    "outcome",
)

RESPONSE_RETAINED: Final = "RESPONSE_RETAINED"
RECONCILIATION_ONLY: Final = "RECONCILIATION_ONLY"
OUTCOME_UNKNOWN: Final = "OUTCOME_UNKNOWN"
OPERATION_CONFLICT: Final = "OPERATION_CONFLICT"
TOOL_CHANGED: Final = "TOOL_CHANGED"
BUSY: Final = "BUSY"
DENIED: Final = "DENIED"
REFUSED: Final = "REFUSED"
NOT_STARTED: Final = "NOT_STARTED"

SUCCESS_STATUSES: Final = frozenset({RESPONSE_RETAINED, RECONCILIATION_ONLY})


def outcome(
    status: str,
    job: str,
    *,
    operation_id: str | None = None,
    reason: str | None = None,
    message: str | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """One result of ``run``; ``fields`` are added as given (camelCase keys)."""
    body: dict[str, Any] = {"status": status, "job": job}
    if operation_id is not None:
        body["operationId"] = operation_id
    if reason is not None:
        body["reason"] = reason
    if message is not None:
        body["message"] = message
    body.update(fields)
    body["externalOutcome"] = "NOT_PROVEN"
    return body


class Stop(Exception):  # noqa: N818 - control flow inside the gateway, never escapes it
    """Ends a gateway call early with ``body`` (an ``outcome``) as its answer."""

    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(body.get("status"))
        self.body = body
