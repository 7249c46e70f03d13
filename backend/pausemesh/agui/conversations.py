"""A principal's conversations: the thread list, titles, erasure and retention.

``Conversations`` sits over the thread store and the continuation service. The list is a
keyset page (``(updated_at, thread_id)`` of the last row, sent as an opaque cursor), so a page
never repeats or skips a thread that was not written while paging; a thread written meanwhile
moves to the top and shows on the next first page. Erasure cancels the thread's pending
continuations first (so none of them can be resumed afterwards), then deletes the record and
its log through the store's one erase path.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Final

import msgspec

from pausemesh.core.errors import (
    ContinuationExpiredError,
    ContinuationNotFoundError,
    InvalidInputError,
    InvalidTransitionError,
    ThreadNotFoundError,
)
from pausemesh.core.ports import Clock
from pausemesh.core.service import ContinuationService
from pausemesh.core.threads import ThreadCursor, ThreadRecord, ThreadStore, ThreadSummary

__all__ = (
    "DEFAULT_PAGE_SIZE",
    "ERASE_REASON",
    "MAX_PAGE_SIZE",
    "MAX_TITLE_CHARS",
    "Conversations",
    "PurgeReport",
    "ThreadList",
    "ThreadListItem",
    "check_page_size",
    "check_title",
    "decode_cursor",
    "encode_cursor",
)

_log = logging.getLogger("pausemesh.agui.conversations")

DEFAULT_PAGE_SIZE: Final = 20
MAX_PAGE_SIZE: Final = 100
MAX_TITLE_CHARS: Final = 200
ERASE_REASON: Final = "thread deleted"
_PURGE_BATCH: Final = 100
_DRY_RUN_MAX: Final = 1_000_000
_CURSOR_MAX_CHARS: Final = 1024

_CURSOR: Final = msgspec.json.Decoder(tuple[datetime, str])


def encode_cursor(summary: ThreadSummary) -> str:
    raw = msgspec.json.encode((summary.updated_at, summary.thread_id))
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(text: str) -> ThreadCursor:
    """An opaque cursor back into its position; ``INVALID_CURSOR`` for anything else."""
    try:
        if len(text) > _CURSOR_MAX_CHARS:
            raise ValueError(text)
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        updated_at, thread_id = _CURSOR.decode(raw)
        if updated_at.tzinfo is None:
            raise ValueError(text)
    except (ValueError, binascii.Error, msgspec.DecodeError):
        msg = "cursor is not one this server returned"
        raise InvalidInputError(msg, code="INVALID_CURSOR") from None
    return ThreadCursor(updated_at=updated_at, thread_id=thread_id)


def check_title(title: object) -> str:
    if not isinstance(title, str) or not title.strip() or len(title) > MAX_TITLE_CHARS:
        msg = f"title must be a non-blank string of at most {MAX_TITLE_CHARS} characters"
        raise InvalidInputError(msg, code="INVALID_TITLE")
    return " ".join(title.split())


def check_page_size(limit: int) -> int:
    if not 1 <= limit <= MAX_PAGE_SIZE:
        msg = f"limit must be between 1 and {MAX_PAGE_SIZE}"
        raise InvalidInputError(msg, code="INVALID_LIMIT")
    return limit


class ThreadListItem(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    thread_id: str
    title: str | None
    created_at: datetime
    updated_at: datetime
    pending_interrupts: int
    last_sequence: int


class ThreadList(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """``GET /agui/threads``; ``next_cursor`` is None on the last page."""

    threads: list[ThreadListItem]
    next_cursor: str | None


class PurgeReport(msgspec.Struct, frozen=True, kw_only=True):
    """What a retention purge did (or, in a dry run, would do)."""

    cutoff: datetime
    thread_ids: tuple[str, ...]
    dry_run: bool


class Conversations:
    def __init__(
        self, *, threads: ThreadStore, service: ContinuationService, clock: Clock | None = None
    ) -> None:
        self.threads = threads
        self.service = service
        self.clock: Clock = clock or service.clock

    async def _owned(self, thread_id: str, principal: str | None) -> ThreadRecord:
        record = await self.threads.get(thread_id)
        if record is None or record.owner != principal:
            raise ThreadNotFoundError(thread_id)
        return record

    async def page(
        self, principal: str | None, *, limit: int = DEFAULT_PAGE_SIZE, cursor: str | None = None
    ) -> ThreadList:
        """``GET /agui/threads``: one page of the caller's threads and the next cursor."""
        limit = check_page_size(limit)
        after = None if cursor is None else decode_cursor(cursor)
        # One row more than asked says whether another page exists.
        rows = await self.threads.list_threads(principal, limit=limit + 1, after=after)
        shown = rows[:limit]
        return ThreadList(
            threads=[
                ThreadListItem(
                    thread_id=r.thread_id,
                    title=r.title,
                    created_at=r.created_at,
                    updated_at=r.updated_at,
                    pending_interrupts=r.pending_interrupts,
                    last_sequence=r.last_sequence,
                )
                for r in shown
            ],
            next_cursor=encode_cursor(shown[-1]) if len(rows) > limit else None,
        )

    async def rename(self, thread_id: str, principal: str | None, title: object) -> str:
        checked = check_title(title)
        await self._owned(thread_id, principal)
        await self.threads.set_title(thread_id, checked)
        return checked

    async def delete(self, thread_id: str, principal: str | None) -> None:
        """Erase the caller's thread: pending continuations cancelled, what every question of
        the thread asked and was answered erased from the continuation log, record and log
        gone."""
        record = await self._owned(thread_id, principal)
        await self._erase(record)
        await self.threads.forget_erased()

    async def _erase(self, record: ThreadRecord) -> None:
        if record.open_receipt is not None:
            for continuation_id in record.open_receipt.interrupt_ids:
                try:
                    await self.service.cancel(
                        continuation_id=continuation_id,
                        reason=ERASE_REASON,
                        principal=record.owner,
                    )
                except (
                    ContinuationNotFoundError,
                    ContinuationExpiredError,
                    InvalidTransitionError,
                ):
                    # Already settled (answered, expired, cancelled otherwise): nothing to stop.
                    continue
        now = self.clock.now()
        # What was asked and answered on the thread goes too (before the record, so a failed
        # erase is retried from the thread, which is still there).
        await self.service.store.erase_correlated(record.thread_id, owner=record.owner, now=now)
        await self.threads.erase(record.thread_id, now=now)

    async def purge(
        self,
        *,
        older_than: timedelta,
        dry_run: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> PurgeReport:
        """Erase every thread idle for longer than ``older_than`` (retention).

        ``progress`` is called with the running count after each batch.
        """
        cutoff = self.clock.now() - older_than
        if dry_run:
            ids = await self.threads.idle_threads(updated_before=cutoff, limit=_DRY_RUN_MAX)
            return PurgeReport(cutoff=cutoff, thread_ids=tuple(ids), dry_run=True)
        done: list[str] = []
        while True:
            # Erased threads leave the listing, so each batch starts from the oldest again.
            batch = await self.threads.idle_threads(updated_before=cutoff, limit=_PURGE_BATCH)
            erased = len(done)
            for thread_id in batch:
                record = await self.threads.get(thread_id)
                # Re-checked: a run may have written the thread since it was listed.
                if record is not None and record.updated_at < cutoff:
                    await self._erase(record)
                    done.append(thread_id)
            if len(done) > erased:
                await self.threads.forget_erased()
            if progress is not None and batch:
                progress(len(done))
            if len(batch) < _PURGE_BATCH:
                break
        if done:
            _log.info("retention purged %d threads idle since before %s", len(done), cutoff)
        return PurgeReport(cutoff=cutoff, thread_ids=tuple(done), dry_run=dry_run)
