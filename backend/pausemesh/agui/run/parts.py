"""What a run uses of its host: the ports it talks to and the limits it keeps.

``RunHost`` makes one per run from its current settings (``RunHost.lease_run``); ``LeasedRun``
hands each phase the pieces that phase uses, so no phase reaches back into the host.
"""

from __future__ import annotations

from dataclasses import dataclass

from pausemesh.agui.agent import Agent
from pausemesh.core.drain import Drain
from pausemesh.core.leases import LeaseKeeper
from pausemesh.core.operations import OperationLedger
from pausemesh.core.ports import Clock
from pausemesh.core.schema import SchemaValidatorCache
from pausemesh.core.service import ContinuationService
from pausemesh.core.threads import ThreadStore

__all__ = ("RunParts",)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunParts:
    """The ports and limits of one run (see ``RunHost`` for what each limit means)."""

    agent: Agent
    service: ContinuationService
    threads: ThreadStore
    leases: LeaseKeeper
    clock: Clock
    schemas: SchemaValidatorCache
    operations: OperationLedger | None
    drain: Drain | None
    keepalive_seconds: float
    queue_size: int
    run_timeout_seconds: float | None
    max_thread_bytes: int
    # How many of the newest messages a snapshot a run sends carries (a paused run's, a replay's).
    snapshot_messages: int
