"""Double texting: what happens to an AG-UI input that arrives while a run holds its thread.

The host chooses the default (``PAUSEMESH_DOUBLE_TEXTING``, ``PauseMeshConfig.settings``); a
request may choose for itself in ``forwardedProps``::

    {"forwardedProps": {"pausemesh": {"doubleTexting": "enqueue"}}}

- ``reject`` (the default): ``RUN_ERROR`` ``THREAD_BUSY``, as before;
- ``enqueue``: the input waits in the thread's durable queue (``core/run_queue.py``) and runs
  after the current run, in order; its response streams that run when it comes;
- ``interrupt``: the current run is asked to stop (its partial output is kept, its messages
  marked ``metadata.pausemesh.interrupted``), then this input runs, before anything queued;
- ``rollback``: as ``interrupt``, but the stopped run's output is removed from the thread.

A run that carries decisions (it answers a cohort: an approval, an owed run) is never stopped:
an interrupting input waits for it as ``enqueue`` would, so an approved side effect happens
exactly once. The refusals, each a ``RUN_ERROR`` with a stable code, are the constants below
(docs/agui.md, "Double texting").
"""

from __future__ import annotations

from typing import Any, Final, Literal, get_args

from msgspec import UNSET

from pausemesh.agui.input import RunAgentInput
from pausemesh.core.errors import InvalidInputError

__all__ = (
    "INTERRUPTED_EVENT",
    "NOT_QUEUEABLE",
    "POLICIES",
    "QUEUED_INPUT_DROPPED",
    "QUEUE_FULL",
    "DoubleTexting",
    "requested_policy",
)

DoubleTexting = Literal["reject", "enqueue", "interrupt", "rollback"]
POLICIES: Final[tuple[str, ...]] = get_args(DoubleTexting)

# RUN_ERROR codes (``THREAD_BUSY`` stays the code of ``reject``).
QUEUE_FULL: Final = "PAUSEMESH_AGUI_QUEUE_FULL"
NOT_QUEUEABLE: Final = "PAUSEMESH_AGUI_NOT_QUEUEABLE"
QUEUED_INPUT_DROPPED: Final = "PAUSEMESH_AGUI_QUEUED_INPUT_DROPPED"
# The CUSTOM event a stopped run ends with, before its RUN_FINISHED.
INTERRUPTED_EVENT: Final = "pausemesh.run_interrupted"


def requested_policy(run_input: RunAgentInput) -> DoubleTexting | None:
    """The policy ``forwardedProps.pausemesh.doubleTexting`` asks for (None: the host's);
    ``InvalidInputError`` ``INVALID_DOUBLE_TEXTING`` for anything but one of ``POLICIES``."""
    props: Any = run_input.forwarded_props
    if props is UNSET or not isinstance(props, dict):
        return None
    ours = props.get("pausemesh")
    if not isinstance(ours, dict) or "doubleTexting" not in ours:
        return None
    value = ours["doubleTexting"]
    if value not in POLICIES:
        msg = f"forwardedProps.pausemesh.doubleTexting must be one of {', '.join(POLICIES)}"
        raise InvalidInputError(msg, code="INVALID_DOUBLE_TEXTING", field="forwardedProps")
    policy: DoubleTexting = value
    return policy
