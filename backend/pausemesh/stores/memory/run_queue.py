"""The in-memory input queue (double texting): the test fake, same contract as SQLite and
PostgreSQL (``core/run_queue.py``)."""

from __future__ import annotations

import itertools
from collections.abc import Collection

import msgspec

from pausemesh.core.run_queue import INTERRUPTING, QueuedInput, QueueSignal, queue_priority

__all__ = ("InMemoryRunQueue",)


class InMemoryRunQueue:
    # No await between a check and its write: each method is atomic on the event loop.

    def __init__(self) -> None:
        self._entries: dict[str, list[QueuedInput]] = {}
        self._positions = itertools.count(1)

    async def enqueue(self, entry: QueuedInput, *, limit: int) -> QueuedInput | None:
        waiting = self._entries.setdefault(entry.thread_id, [])
        for queued in waiting:
            if queued.entry_id == entry.entry_id:
                return queued
        if len(waiting) >= limit:
            return None
        stored = msgspec.structs.replace(entry, position=next(self._positions))
        waiting.append(stored)
        return stored

    async def head(self, thread_id: str) -> QueuedInput | None:
        waiting = self._entries.get(thread_id)
        if not waiting:
            return None
        return min(waiting, key=lambda e: (queue_priority(e.kind), e.position))

    async def contains(self, thread_id: str, entry_id: str) -> bool:
        return any(e.entry_id == entry_id for e in self._entries.get(thread_id, ()))

    async def remove(self, thread_id: str, entry_id: str) -> None:
        waiting = self._entries.get(thread_id)
        if waiting is None:
            return
        waiting[:] = [e for e in waiting if e.entry_id != entry_id]
        if not waiting:
            del self._entries[thread_id]

    async def interrupting(self, thread_ids: Collection[str]) -> dict[str, list[QueueSignal]]:
        out: dict[str, list[QueueSignal]] = {}
        for thread_id in thread_ids:
            signals = [
                QueueSignal(entry_id=e.entry_id, kind=e.kind)
                for e in self._entries.get(thread_id, ())
                if e.kind in INTERRUPTING
            ]
            if signals:
                out[thread_id] = signals
        return out

    async def waiting_threads(self, *, limit: int) -> list[str]:
        return list(self._entries)[:limit]

    async def discard(self, thread_id: str) -> int:
        return len(self._entries.pop(thread_id, ()))

    async def close(self) -> None:
        self._entries.clear()
