"""Counting a thread store's reads of a thread's head (its ``_head``), for the tests that check
how often woken tails read it."""

from __future__ import annotations

from typing import Protocol

import pytest

__all__ = ("HeadReads",)


class _ReadsHead(Protocol):
    async def _head(self, thread_id: str) -> int: ...


class HeadReads:
    """Installed on ``store`` (through ``monkeypatch``): counts, then reads as the store does."""

    def __init__(self, store: _ReadsHead, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        self._read = store._head
        monkeypatch.setattr(store, "_head", self)

    async def __call__(self, thread_id: str) -> int:
        self.count += 1
        return await self._read(thread_id)
