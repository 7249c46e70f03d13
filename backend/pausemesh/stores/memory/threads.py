"""In-memory thread store: the test fake, same contract as SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import msgspec

from pausemesh.core.errors import (
    LeaseLostError,
    StoreError,
    ThreadBusyError,
    ThreadNotFoundError,
    VersionConflictError,
)
from pausemesh.core.keepalive import KeepAlive
from pausemesh.core.threads import (
    UNREAD_STATE,
    IssuedCohort,
    RunLease,
    StoredMessage,
    ThreadCursor,
    ThreadLogEntry,
    ThreadRecord,
    ThreadSummary,
    cohort_deadline,
    decode_cohort,
    derive_title,
    is_protocol_thread,
)
from pausemesh.stores.thread_notify import ThreadNotifier

__all__ = ("InMemoryThreadStore",)

# Each stored message is followed by ",\n" in the SQLite store's measure.
_SEPARATOR = 2


class InMemoryThreadStore:
    # Every method runs without an await between its check and its write, so each one is
    # atomic on the event loop without a lock.

    def __init__(self) -> None:
        self._records: dict[str, ThreadRecord] = {}
        self._logs: dict[str, list[ThreadLogEntry]] = {}
        # Each thread's messages, one encoded message per element (the record holds none).
        self._messages: dict[str, list[bytes]] = {}
        # When each of them was first stored (parallel to ``_messages``).
        self._times: dict[str, list[datetime | None]] = {}
        # Message ids a rollback removed from each thread (its tombstones).
        self._removed: dict[str, set[str]] = {}
        # Each thread's state, encoded (the record holds none): written by a save that carries
        # one, read only by a ``get`` that wants it.
        self._states: dict[str, bytes] = {}
        self._notifier = ThreadNotifier()
        self._closed = False
        self._erased: dict[str, datetime] = {}

    def _check_open(self) -> None:
        if self._closed:
            msg = "store is closed"
            raise StoreError(msg, code="STORE_UNAVAILABLE")

    def _require(self, thread_id: str) -> ThreadRecord:
        self._check_open()
        record = self._records.get(thread_id)
        if record is None:
            raise ThreadNotFoundError(thread_id)
        return record

    async def list_records(
        self,
        prefix: str,
        *,
        owner: str | None,
        before: tuple[datetime, str] | None,
        limit: int,
    ) -> list[ThreadRecord]:
        self._check_open()
        matching = sorted(
            (
                r
                for r in self._records.values()
                if r.thread_id.startswith(prefix)
                and r.owner == owner
                and (before is None or (r.updated_at, r.thread_id) < before)
            ),
            key=lambda r: (r.updated_at, r.thread_id),
            reverse=True,
        )
        return [self._copy(r) for r in matching[:limit]]

    async def create_or_load(
        self, thread_id: str, *, owner: str | None, now: datetime
    ) -> ThreadRecord:
        self._check_open()
        record = self._records.get(thread_id)
        if record is None:
            if thread_id in self._erased:
                raise ThreadNotFoundError(thread_id)
            record = ThreadRecord(
                thread_id=thread_id,
                owner=owner,
                messages=[],
                state=UNREAD_STATE,
                open_receipt=None,
                version=1,
                last_sequence=0,
                created_at=now,
                updated_at=now,
                stored_bytes=len(b"[]") + len(b"{}"),
            )
            self._records[thread_id] = record
            self._logs[thread_id] = []
            self._messages[thread_id] = []
            self._times[thread_id] = []
            self._states[thread_id] = b"{}"
        return self._copy(record)

    def _copy(
        self, record: ThreadRecord, tail: int | None = None, *, state: bool = True
    ) -> ThreadRecord:
        stored = self._messages.get(record.thread_id, [])
        start = 0 if tail is None else max(len(stored) - max(tail, 0), 0)
        return msgspec.structs.replace(
            record,
            messages=[msgspec.json.decode(m) for m in stored[start:]],
            messages_from=start,
            message_count=len(stored),
            message_times=list(self._times.get(record.thread_id, [])[start:]),
            state=msgspec.json.decode(self._states.get(record.thread_id, b"{}"))
            if state
            else UNREAD_STATE,
            open_receipt=_clone_cohort(record.open_receipt),
            closed_receipt=_clone_cohort(record.closed_receipt),
        )

    async def get(
        self, thread_id: str, *, tail: int | None = None, state: bool = True
    ) -> ThreadRecord | None:
        self._check_open()
        record = self._records.get(thread_id)
        return None if record is None else self._copy(record, tail, state=state)

    async def read_messages(
        self, thread_id: str, *, before: int | None, limit: int
    ) -> list[StoredMessage]:
        self._check_open()
        stored = self._messages.get(thread_id, [])
        times = self._times.get(thread_id, [])
        end = len(stored) if before is None else min(max(before, 0), len(stored))
        start = max(end - max(limit, 0), 0)
        return [
            StoredMessage(position=p, message=msgspec.json.decode(stored[p]), stored_at=times[p])
            for p in range(end - 1, start - 1, -1)
        ]

    async def known_message_ids(self, thread_id: str, ids: Sequence[str]) -> set[str]:
        self._check_open()
        wanted = set(ids)
        if not wanted:
            return set()
        found: set[str] = set()
        for text in self._messages.get(thread_id, []):
            message_id = msgspec.json.decode(text).get("id")
            if message_id in wanted:
                found.add(message_id)
        return found

    async def removed_message_ids(self, thread_id: str, ids: Sequence[str]) -> set[str]:
        self._check_open()
        return self._removed.get(thread_id, set()).intersection(ids)

    async def save(
        self,
        record: ThreadRecord,
        *,
        now: datetime,
        agent_title: str | None = None,
        removed_ids: Sequence[str] = (),
    ) -> ThreadRecord:
        current = self._require(record.thread_id)
        if current.version != record.version:
            raise VersionConflictError(record.thread_id, record.version, current.version)
        if removed_ids:
            self._removed.setdefault(record.thread_id, set()).update(removed_ids)
        title, source = current.title, current.title_source
        if agent_title is not None and (title is None or source in ("agent", "derived")):
            title, source = agent_title, "agent"
        elif title is None and (derived := derive_title(record.messages)) is not None:
            title, source = derived, "derived"
        # Sized as the SQLite store stores it (each message and its separator, the state, the
        # receipts): the same bound trips alike.
        stored = self._messages[record.thread_id]
        start = min(max(record.messages_from, 0), len(stored))
        tail = [msgspec.json.encode(m) for m in record.messages]
        kept = stored[:start]
        # A record whose state was not read keeps the stored one (nothing of it rewritten).
        if record.state is not UNREAD_STATE:
            self._states[record.thread_id] = msgspec.json.encode(record.state)
        state = self._states[record.thread_id]
        receipts = (msgspec.json.encode(c) for c in (record.open_receipt, record.closed_receipt))
        self._messages[record.thread_id] = kept + tail
        times = self._times[record.thread_id]
        self._times[record.thread_id] = times[:start] + [
            times[start + i]
            if start + i < len(stored)
            and (message_id := _message_id(text)) is not None
            and _message_id(stored[start + i]) == message_id
            else now
            for i, text in enumerate(tail)
        ]
        size = len(b"[]") + sum(len(m) + _SEPARATOR for m in kept + tail)
        updated = msgspec.structs.replace(
            current,
            messages=[],
            open_receipt=_clone_cohort(record.open_receipt),
            closed_receipt=_clone_cohort(record.closed_receipt),
            stored_bytes=size + len(state) + sum(len(r) for r in receipts if r != b"null"),
            version=current.version + 1,
            updated_at=now,
            title=title,
            title_source=source,
            message_count=start + len(tail),
        )
        self._records[record.thread_id] = updated
        return msgspec.structs.replace(
            self._copy(updated, 0, state=False),
            state=_clone(record.state) if record.state is not UNREAD_STATE else UNREAD_STATE,
            messages=_clone(record.messages),
            messages_from=start,
            message_times=self._times[record.thread_id][start:],
        )

    async def acquire_lease(
        self, thread_id: str, *, lease_id: str, run_id: str, now: datetime, expires_at: datetime
    ) -> ThreadRecord:
        current = self._require(thread_id)
        held = current.lease
        if held is not None and held.lease_id != lease_id and held.expires_at > now:
            raise ThreadBusyError(thread_id)
        lease = RunLease(lease_id=lease_id, run_id=run_id, expires_at=expires_at)
        updated = msgspec.structs.replace(current, lease=lease)
        self._records[thread_id] = updated
        return self._copy(updated, 0, state=False)

    async def release_lease(self, thread_id: str, *, lease_id: str) -> None:
        current = self._require(thread_id)
        if current.lease is not None and current.lease.lease_id == lease_id:
            self._records[thread_id] = msgspec.structs.replace(current, lease=None)

    async def renew_leases(self, leases: Mapping[str, str], *, expires_at: datetime) -> set[str]:
        renewed: set[str] = set()
        for thread_id, lease_id in leases.items():
            current = self._records.get(thread_id)
            held = None if current is None else current.lease
            if current is None or held is None or held.lease_id != lease_id:
                continue
            lease = msgspec.structs.replace(held, expires_at=expires_at)
            self._records[thread_id] = msgspec.structs.replace(current, lease=lease)
            renewed.add(thread_id)
        return renewed

    async def release_instance_leases(self, instance_name: str, *, keep: str) -> int:
        self._check_open()
        prefix = f"{instance_name}@"
        dropped = 0
        for thread_id, current in list(self._records.items()):
            held = current.lease
            if held is None or not held.lease_id.startswith(prefix):
                continue
            if held.lease_id.startswith(keep):
                continue
            self._records[thread_id] = msgspec.structs.replace(current, lease=None)
            dropped += 1
        return dropped

    async def append_events(
        self,
        thread_id: str,
        *,
        lease_id: str,
        run_id: str,
        events: Sequence[str],
        release: bool = False,
    ) -> list[int]:
        current = self._require(thread_id)
        if current.lease is None or current.lease.lease_id != lease_id:
            raise LeaseLostError(thread_id)
        first = current.last_sequence + 1
        sequences = list(range(first, first + len(events)))
        log = self._logs[thread_id]
        log.extend(
            ThreadLogEntry(sequence=seq, run_id=run_id, event_json=text)
            for seq, text in zip(sequences, events, strict=True)
        )
        self._records[thread_id] = msgspec.structs.replace(
            current,
            last_sequence=current.last_sequence + len(events),
            lease=None if release else current.lease,
        )
        if events:
            self._notifier.notify(thread_id, sequences[-1])
        return sequences

    async def read_events(
        self, thread_id: str, *, after_sequence: int, limit: int = 1000
    ) -> list[ThreadLogEntry]:
        self._check_open()
        log = self._logs.get(thread_id, [])
        # Sequences are 1..n, dense, so the position is the sequence.
        start = max(after_sequence, 0)
        return log[start : start + max(limit, 0)]

    async def wait_for_events(
        self,
        thread_id: str,
        *,
        after_sequence: int,
        wait_seconds: float,
        keep_alive: KeepAlive | None = None,
    ) -> bool:
        async def head() -> int:
            return self._require(thread_id).last_sequence

        return await self._notifier.wait_past(
            thread_id, after_sequence, wait_seconds, head, keep_alive
        )

    def stop_waiting(self) -> None:
        self._notifier.stop()

    async def list_threads(
        self, owner: str | None, *, limit: int, after: ThreadCursor | None = None
    ) -> list[ThreadSummary]:
        self._check_open()
        rows = sorted(
            (
                r
                for r in self._records.values()
                if r.owner == owner
                and not is_protocol_thread(r.thread_id)
                and (
                    after is None
                    or (r.updated_at, r.thread_id) < (after.updated_at, after.thread_id)
                )
            ),
            key=lambda r: (r.updated_at, r.thread_id),
            reverse=True,
        )
        return [_summary(r) for r in rows[: max(limit, 0)]]

    async def set_title(self, thread_id: str, title: str) -> None:
        current = self._require(thread_id)
        self._records[thread_id] = msgspec.structs.replace(
            current, title=title, title_source="owner"
        )

    async def erase(self, thread_id: str, *, now: datetime) -> bool:
        self._check_open()
        self._erased.setdefault(thread_id, now)
        self._logs.pop(thread_id, None)
        self._messages.pop(thread_id, None)
        self._times.pop(thread_id, None)
        self._removed.pop(thread_id, None)
        self._states.pop(thread_id, None)
        return self._records.pop(thread_id, None) is not None

    async def forget_erased(self) -> None:
        pass  # nothing is left once the dicts let go

    async def idle_threads(self, *, updated_before: datetime, limit: int) -> list[str]:
        self._check_open()
        rows = sorted(
            (
                r
                for r in self._records.values()
                if r.updated_at < updated_before and not is_protocol_thread(r.thread_id)
            ),
            key=lambda r: (r.updated_at, r.thread_id),
        )
        return [r.thread_id for r in rows[: max(limit, 0)]]

    async def lapsed_cohorts(self, *, now: datetime, limit: int) -> list[str]:
        self._check_open()
        due = sorted(
            (deadline, r.thread_id)
            for r in self._records.values()
            if (deadline := cohort_deadline(r.open_receipt)) is not None and deadline <= now
        )
        return [thread_id for _, thread_id in due[: max(limit, 0)]]

    async def close(self) -> None:
        self._closed = True


def _summary(record: ThreadRecord) -> ThreadSummary:
    return ThreadSummary(
        thread_id=record.thread_id,
        title=record.title,
        created_at=record.created_at,
        updated_at=record.updated_at,
        pending_interrupts=0
        if record.open_receipt is None
        else len(record.open_receipt.interrupt_ids),
        last_sequence=record.last_sequence,
    )


def _message_id(text: bytes) -> Any:
    message = msgspec.json.decode(text)
    return message.get("id") if isinstance(message, dict) else None


def _clone(value: Any) -> Any:
    # A caller must never be able to mutate what is stored through an alias.
    return msgspec.json.decode(msgspec.json.encode(value))


def _clone_cohort(cohort: IssuedCohort | None) -> IssuedCohort | None:
    return None if cohort is None else decode_cohort(msgspec.json.encode(cohort))
