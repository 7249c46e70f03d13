"""The durable queue of a thread's waiting inputs: double texting (docs/agui.md).

An AG-UI input that arrives while a run holds its thread is refused (``reject``, the default)
or, under the other policies, kept here until the thread is free:

- ``enqueue``: it runs after the current run, in the order queued;
- ``interrupt`` and ``rollback``: it runs next (before any ``enqueue`` entry), and its presence
  is the durable signal that asks the running run to stop (``interrupting``), which the
  running replica's lease keeper reads at every renewal (``core/leases.py``).

Whichever replica holds the thread's lease when a run ends (or its sweeper, after a crash)
takes the head (``head``), runs it under the lease and removes it (``remove``) once its run
ended; an entry is removed only after its run saved it into the thread, so a process killed at
any point loses no queued input (the next holder finds it still queued and runs it, or sees
its messages in the thread already and removes it).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

import msgspec

__all__ = (
    "DEFAULT_QUEUE_LIMIT",
    "INTERRUPTING",
    "QueueKind",
    "QueueSignal",
    "QueuedInput",
    "RunQueue",
    "queue_priority",
)

QueueKind = Literal["enqueue", "interrupt", "rollback"]
INTERRUPTING: frozenset[str] = frozenset(("interrupt", "rollback"))
DEFAULT_QUEUE_LIMIT = 16
"""How many inputs one thread may have waiting (``PAUSEMESH_THREAD_QUEUE_LIMIT``)."""


def queue_priority(kind: QueueKind) -> int:
    """The order of kinds at the head: an interrupting input runs before queued ones."""
    return 0 if kind in INTERRUPTING else 1


class QueuedInput(msgspec.Struct, frozen=True, kw_only=True):
    """One waiting input of a thread, as queued."""

    entry_id: str
    thread_id: str
    kind: QueueKind
    # The run's id (the client's ``runId``) and the whole ``RunAgentInput`` as JSON text.
    run_id: str
    input_json: str
    # Who sent it, and the roles the resolver gave them: the run is theirs.
    principal: str | None
    roles: tuple[str, ...]
    # The ids of the messages it brings that the thread did not hold when it was queued.
    message_ids: tuple[str, ...]
    # The thread log's head when it was queued: its run's events come after it.
    after_sequence: int
    queued_at: datetime
    # Set by the store: the order of arrival (ascending).
    position: int = 0


class QueueSignal(msgspec.Struct, frozen=True, kw_only=True):
    """An interrupting entry waiting on a thread (what a running run is asked to stop for)."""

    entry_id: str
    kind: QueueKind


@runtime_checkable
class RunQueue(Protocol):
    """Port for the per-thread input queue. Memory, SQLite and PostgreSQL implement it."""

    async def enqueue(self, entry: QueuedInput, *, limit: int) -> QueuedInput | None:
        """Add ``entry`` behind the thread's waiting entries and return it with its
        ``position``; None when the thread already has ``limit`` entries waiting (nothing
        is written). An ``entry_id`` already queued returns the stored entry."""
        ...

    async def head(self, thread_id: str) -> QueuedInput | None:
        """The entry to run next: the earliest interrupting one, else the earliest."""
        ...

    async def contains(self, thread_id: str, entry_id: str) -> bool:
        """Whether ``entry_id`` is still waiting on ``thread_id``."""
        ...

    async def remove(self, thread_id: str, entry_id: str) -> None:
        """Take ``entry_id`` off the queue (its run ended); nothing if it is not there. Its
        input is not kept."""
        ...

    async def interrupting(self, thread_ids: Collection[str]) -> dict[str, list[QueueSignal]]:
        """For each of ``thread_ids`` with interrupting entries waiting: those entries, in
        order (one read for all: the lease keeper asks at every renewal)."""
        ...

    async def waiting_threads(self, *, limit: int) -> list[str]:
        """Up to ``limit`` ids of threads with entries waiting (the sweeper's look)."""
        ...

    async def discard(self, thread_id: str) -> int:
        """Take every entry of ``thread_id`` off the queue (the thread is gone); how many."""
        ...

    async def close(self) -> None: ...
