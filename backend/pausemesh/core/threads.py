"""The durable AG-UI thread (docs/agui.md): one record per thread plus an append-only event log.

The record holds what a reload needs (owner, messages, state, the open cohort receipt) and is
updated with compare-and-swap on ``version``. Two things live beside the CAS version because
they change on their own schedule:

- the **run lease** (one active run per thread; a second one gets ``THREAD_BUSY``), taken and
  released atomically by the store. It follows the process that holds it: a lease id starts
  with its holder (``lease_holder``: the instance name and the id made at start-up), the holder
  renews all its leases while alive (``renew_leases``, a short TTL), and a restarted instance
  frees its predecessor's leases at once (``release_instance_leases``);
- ``last_sequence``, the head of the event log, advanced by every append.

Log entries keep the event as the exact JSON text that was sent, so a replay is byte-identical.

An interrupt cohort is stored typed (``IssuedCohort``: the host-only ``CohortReceipt`` and the
interrupts as sent); every store encodes it as JSON and decodes it with ``decode_cohort``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final, Literal, Protocol, runtime_checkable

import msgspec

from pausemesh.core.errors import StoreError
from pausemesh.core.keepalive import KeepAlive

__all__ = (
    "DEFAULT_LEASE_SECONDS",
    "MCP_TASK_FEED_PREFIX",
    "MCP_TASK_PREFIX",
    "PROTOCOL_THREAD_PREFIXES",
    "UNREAD_STATE",
    "CohortReceipt",
    "IssuedCohort",
    "ReceiptInterrupt",
    "RunLease",
    "StoredMessage",
    "ThreadCursor",
    "ThreadLogEntry",
    "ThreadRecord",
    "ThreadStore",
    "ThreadSummary",
    "TitleSource",
    "UnreadState",
    "cohort_deadline",
    "decode_cohort",
    "derive_title",
    "is_protocol_thread",
    "lease_holder",
    "new_lease_id",
)

MCP_TASK_PREFIX = "mcp-task:"
MCP_TASK_FEED_PREFIX = "mcp-task-feed:"
PROTOCOL_THREAD_PREFIXES: tuple[str, ...] = (
    "a2a-task:",
    "mcp-pause:",
    MCP_TASK_PREFIX,
    MCP_TASK_FEED_PREFIX,
)
"""Thread ids with these prefixes hold another protocol's records (A2A tasks, the open MCP
pause of a tool call, MCP tasks and their owners' status feeds live in the thread store);
AG-UI clients may not name them, so a chat run can never overwrite one."""

DEFAULT_LEASE_SECONDS = 5
"""How long a run's lease lasts without renewal. The process holding it renews it every third of
this while alive (``core/leases.py``), so this only bounds how long a run whose process died
blocks its thread (``THREAD_BUSY``) when no restart of that process frees it sooner."""


def lease_holder(instance_name: str, instance_id: str) -> str:
    """The prefix of every lease id one process instance takes: ``<name>@<id>/``.

    ``instance_name`` is stable across restarts (e.g. ``host:port``), ``instance_id`` is made at
    start-up, so a restart can tell its predecessor's leases (same name, other id) from its own.
    """
    return f"{instance_name}@{instance_id}/"


def new_lease_id(holder: str) -> str:
    """A fresh lease id under ``holder`` (a ``lease_holder`` prefix)."""
    return f"{holder}{uuid.uuid4().hex}"


class RunLease(msgspec.Struct, frozen=True, kw_only=True):
    """The active run on a thread. ``lease_id`` is server-made: clients may reuse a ``runId``."""

    lease_id: str
    run_id: str
    expires_at: datetime


class ReceiptInterrupt(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    continuation_id: str
    expires_at: str
    issued_version: int
    payload_hash: str


class CohortReceipt(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Host-only record of one issued cohort; ``cohort_id`` content-addresses the rest."""

    schema_version: int
    cohort_id: str
    thread_id: str
    run_id: str
    interrupts: tuple[ReceiptInterrupt, ...]

    @property
    def interrupt_ids(self) -> tuple[str, ...]:
        return tuple(i.continuation_id for i in self.interrupts)


class IssuedCohort(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One interrupt cohort as a thread keeps it: the receipt, and the interrupts as sent (the
    AG-UI wire JSON, which core does not type) for restoring them after a reload."""

    receipt: CohortReceipt
    interrupts: tuple[dict[str, Any], ...]
    # True on a closed cohort that the server closed because every question lapsed, until a
    # run has acknowledged it (the client's cancel of it then runs the agent once).
    lapsed: bool = False
    # True on a closed cohort whose decisions came from elsewhere (REST with a token, the
    # approvals inbox) and that the server continued itself: a later AG-UI resume of it is
    # answered with the stored outcome, whatever it says.
    decided_elsewhere: bool = False

    @property
    def interrupt_ids(self) -> tuple[str, ...]:
        return self.receipt.interrupt_ids


_COHORT: msgspec.json.Decoder[IssuedCohort] = msgspec.json.Decoder(IssuedCohort)


def decode_cohort(data: bytes | str | None) -> IssuedCohort | None:
    """A stored cohort (JSON text, or None for none); ``StoreError`` if it does not decode."""
    if data is None:
        return None
    try:
        return _COHORT.decode(data)
    except msgspec.DecodeError:
        msg = "stored interrupt cohort does not decode"
        raise StoreError(msg, code="CORRUPT_STREAM") from None


TitleSource = Literal["owner", "agent", "derived"]


class UnreadState:
    """``ThreadRecord.state`` when it was not read (``get(state=False)``, a lease): the state
    is a row of its own, read only when wanted. ``save`` of a record holding it leaves the
    stored state as it is (no state bytes written). One instance, ``UNREAD_STATE``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNREAD_STATE"

    def __copy__(self) -> UnreadState:
        return self

    def __deepcopy__(self, memo: object) -> UnreadState:
        return self


UNREAD_STATE: Final = UnreadState()


class ThreadRecord(msgspec.Struct, frozen=True, kw_only=True):
    thread_id: str
    # The principal that created the thread; others are told it does not exist. None = no auth.
    owner: str | None
    messages: list[Any]
    # The AG-UI state (stored in a row of its own), or ``UNREAD_STATE`` where it was not read
    # (``get(state=False)``, ``acquire_lease``): then ``save`` leaves the stored one alone.
    state: Any
    # The open interrupt cohort, or None when none is open.
    open_receipt: IssuedCohort | None
    version: int
    last_sequence: int
    created_at: datetime
    updated_at: datetime
    # The most recently closed cohort (same shape), so a replayed resume can be recognized:
    # an identical one is idempotent, a different answer is refused.
    closed_receipt: IssuedCohort | None = None
    lease: RunLease | None = None
    # Shown in thread lists: set by the owner (``set_title``), by the agent (``save`` with an
    # ``agent_title``) or, on the first ``save`` that carries a user message, taken from it
    # (``derive_title``). Precedence: owner > agent > derived (see ``save``).
    title: str | None = None
    # Who set ``title``: None for no title, or for one stored before this was recorded (kept
    # like an owner's: it may be one).
    title_source: TitleSource | None = None
    # The size in bytes of the record's JSON as the store holds it (messages, state and the two
    # cohort receipts; on PostgreSQL the record body, whose keys add a few bytes), kept with
    # the record: what ``PAUSEMESH_MAX_THREAD_BYTES`` bounds. The event log is not counted.
    # Set by the store; what a caller passes to ``save`` is ignored. A running size: a save
    # measures what it replaces, never the whole history (PostgreSQL: the body plus the
    # messages' rows).
    stored_bytes: int = 0
    # The messages are stored one per row, in order (position 0 the oldest); ``messages`` holds
    # those from position ``messages_from`` on. ``get`` reads them all (0); ``get(tail=n)``
    # only the last ``n`` (``tail=0``: none, what a lease reads). ``save`` keeps the stored
    # messages before ``messages_from`` untouched and replaces the rest with ``messages``, so
    # a run that adds a turn writes that turn, not the thread.
    messages_from: int = 0
    # How many messages the thread holds (set by the store).
    message_count: int = 0
    # When the server first stored each of ``messages`` (same order; None for a message stored
    # before times were kept, issue 44). Set by the store on ``get`` and ``save``; a save keeps
    # the time of a rewritten message (same position, same id) and stamps a new one with its
    # ``now``. What a caller passes to ``save`` is ignored.
    message_times: list[datetime | None] = msgspec.field(default_factory=list)


TITLE_MAX_CHARS = 60


def derive_title(messages: Sequence[Any]) -> str | None:
    """The first user message's text, whitespace collapsed, cut to ``TITLE_MAX_CHARS``."""
    for message in messages:
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):
            # Multimodal content: the text parts, in order.
            content = " ".join(
                p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
            )
        if not isinstance(content, str):
            continue
        text = " ".join(content.split())
        if text:
            if len(text) > TITLE_MAX_CHARS:
                return text[: TITLE_MAX_CHARS - 1].rstrip() + "\u2026"
            return text
    return None


def cohort_deadline(cohort: IssuedCohort | None) -> datetime | None:
    """When every question of ``cohort`` has lapsed: its latest ``expiresAt`` (None for none)."""
    if cohort is None or not cohort.receipt.interrupts:
        return None
    return max(datetime.fromisoformat(i.expires_at) for i in cohort.receipt.interrupts)


def is_protocol_thread(thread_id: str) -> bool:
    return thread_id.startswith(PROTOCOL_THREAD_PREFIXES)


class ThreadSummary(msgspec.Struct, frozen=True, kw_only=True):
    """One row of a thread list (no messages: a list reads only what it shows)."""

    thread_id: str
    title: str | None
    created_at: datetime
    updated_at: datetime
    pending_interrupts: int
    last_sequence: int


class ThreadCursor(msgspec.Struct, frozen=True, kw_only=True):
    """Where a page of a thread list ended: the last row's ``(updated_at, thread_id)``."""

    updated_at: datetime
    thread_id: str


class StoredMessage(msgspec.Struct, frozen=True, kw_only=True):
    """One message of a thread with its position (0 the oldest): a page of ``read_messages``."""

    position: int
    message: Any
    # When the server first stored it; None for a message stored before times were kept.
    stored_at: datetime | None = None


class ThreadLogEntry(msgspec.Struct, frozen=True, kw_only=True):
    sequence: int
    run_id: str
    # The event exactly as framed on the wire (compact JSON text).
    event_json: str


@runtime_checkable
class ThreadStore(Protocol):
    """Port for thread records and logs. Memory, SQLite and PostgreSQL implement it.

    Errors: ``ThreadNotFoundError`` for an unknown thread, ``ThreadBusyError`` when another
    run holds a live lease, ``LeaseLostError`` for an append under a lease that no longer holds
    the thread, ``VersionConflictError`` when a CAS loses.
    """

    async def create_or_load(
        self, thread_id: str, *, owner: str | None, now: datetime
    ) -> ThreadRecord:
        """The thread's record, created empty (version 1, sequence 0) if it does not exist.

        The store does not compare ``owner`` with an existing record; callers scope access.
        An erased thread id is never created again: ``ThreadNotFoundError``.
        """
        ...

    async def get(
        self, thread_id: str, *, tail: int | None = None, state: bool = True
    ) -> ThreadRecord | None:
        """The record with all its messages, or with the last ``tail`` only (``messages_from``
        says where they start; ``tail=0`` reads no message: O(1) in the history).
        ``state=False``: the state is not read (``record.state`` is ``UNREAD_STATE``)."""
        ...

    async def read_messages(
        self, thread_id: str, *, before: int | None, limit: int
    ) -> list[StoredMessage]:
        """Up to ``limit`` messages at positions below ``before`` (None: the newest), newest
        first; empty for an unknown thread. A position never changes once a later message is
        stored after it (only a run that rewrites the history moves them)."""
        ...

    async def known_message_ids(self, thread_id: str, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` the thread's stored messages carry (an index lookup per id)."""
        ...

    async def removed_message_ids(self, thread_id: str, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` a save removed from the thread (``save(removed_ids=...)``, a
        rollback's output): an index lookup per id; a later input carrying them drops them."""
        ...

    async def list_records(
        self,
        prefix: str,
        *,
        owner: str | None,
        before: tuple[datetime, str] | None,
        limit: int,
    ) -> list[ThreadRecord]:
        """Up to ``limit`` records whose id starts with ``prefix`` and whose owner is ``owner``
        (None matches only ownerless records), most recently updated first, ties by id
        descending; ``before`` (an ``updated_at`` and id) continues after that record."""
        ...

    async def save(
        self,
        record: ThreadRecord,
        *,
        now: datetime,
        agent_title: str | None = None,
        removed_ids: Sequence[str] = (),
    ) -> ThreadRecord:
        """CAS: store ``messages`` (in place of the stored ones from ``record.messages_from``
        on; those before are kept), ``state`` (unless ``UNREAD_STATE``: the stored state is kept,
        nothing of it written), ``open_receipt`` and ``closed_receipt`` if the
        stored version still equals ``record.version``; return the record with version + 1
        (its ``message_count`` and ``stored_bytes`` updated).

        Lease and ``last_sequence`` are not written by ``save``; nor is ``record.title``. The
        title, decided in the same statement from the stored one: ``agent_title`` (the run's
        agent named the thread) replaces a derived or earlier agent title, never the owner's
        (``set_title``) nor a title of unknown source; without one, a thread that has no title
        takes ``derive_title(record.messages)``.

        ``removed_ids``: message ids the run removed (a rollback), remembered in the same
        write for ``removed_message_ids`` (a tombstone per id, kept until the thread is erased).
        """
        ...

    async def acquire_lease(
        self, thread_id: str, *, lease_id: str, run_id: str, now: datetime, expires_at: datetime
    ) -> ThreadRecord:
        """Take the run lease if free, expired, or already held under ``lease_id`` (renewal);
        the record comes without its messages nor its state (``get(tail=0, state=False)``)."""
        ...

    async def release_lease(self, thread_id: str, *, lease_id: str) -> None:
        """Drop the lease if ``lease_id`` still holds it; otherwise do nothing."""
        ...

    async def renew_leases(self, leases: Mapping[str, str], *, expires_at: datetime) -> set[str]:
        """Extend each lease in ``leases`` (thread id -> lease id) to ``expires_at`` if that
        lease id still holds its thread; return the thread ids renewed (the others were lost)."""
        ...

    async def release_instance_leases(self, instance_name: str, *, keep: str) -> int:
        """Drop every lease taken under ``instance_name`` by an instance other than ``keep`` (a
        ``lease_holder`` prefix): a restarted process frees its dead predecessor's threads.
        Return how many were dropped."""
        ...

    async def append_events(
        self,
        thread_id: str,
        *,
        lease_id: str,
        run_id: str,
        events: Sequence[str],
        release: bool = False,
    ) -> list[int]:
        """Append events (JSON texts) in order; return their sequences (last_sequence + 1, …).

        Fenced by the lease: ``LeaseLostError`` (``LEASE_LOST``) if ``lease_id`` does not hold
        the thread (it lapsed or was freed, and maybe another writer took it).
        ``release``: the events end the run, and the lease is dropped in the same write, so
        whoever reads them (a tail, the client) finds the thread free for the next run.
        Wakes up ``wait_for_events`` waiters once committed.
        """
        ...

    async def read_events(
        self, thread_id: str, *, after_sequence: int, limit: int = 1000
    ) -> list[ThreadLogEntry]:
        """Entries with ``sequence > after_sequence`` in ascending order, at most ``limit``."""
        ...

    async def wait_for_events(
        self,
        thread_id: str,
        *,
        after_sequence: int,
        wait_seconds: float,
        keep_alive: KeepAlive | None = None,
    ) -> bool:
        """Return True as soon as the thread's log holds an entry past ``after_sequence``,
        False after ``wait_seconds`` without one (live tail).

        ``keep_alive``: the tail's response's writer of one keep-alive (``core.keepalive``).
        With it the wait goes on past ``wait_seconds`` while the store can have that writer
        send each keep-alive at once (every ``wait_seconds``), and returns False when one
        cannot go out so; a store may also just time out and let the tail send it."""
        ...

    def stop_waiting(self) -> None:
        """The process drains: end every ``wait_for_events`` of this store now, and make
        later ones return at once (each still answers whether the log moved on). Lets the
        tails end promptly without a task per wait to watch the drain."""
        ...

    async def list_threads(
        self, owner: str | None, *, limit: int, after: ThreadCursor | None = None
    ) -> list[ThreadSummary]:
        """``owner``'s threads, most recently updated first (ties: thread id, descending),
        strictly after ``after`` in that order, at most ``limit``; protocol threads (A2A
        tasks) are not listed. Served by an index on ``(owner, updated_at, thread_id)``."""
        ...

    async def set_title(self, thread_id: str, title: str) -> None:
        """Set the owner's title (outside the CAS: a rename never fails a running save), which
        no later ``save`` replaces; ``ThreadNotFoundError`` for an unknown thread."""
        ...

    async def erase(self, thread_id: str, *, now: datetime) -> bool:
        """Delete the record and its whole log, and remember the id as erased (with ``now``)
        so it is never created again. True if there was a thread to erase."""
        ...

    async def forget_erased(self) -> None:
        """After ``erase`` (and ``EventStore.erase_correlated``): leave no readable copy of
        what was erased in the store's own files, where the store can. SQLite truncates its
        write-ahead log (deleted rows are zeroed in the database already); PostgreSQL leaves
        dead tuples to VACUUM and memory has nothing left (``docs/agui.md``, erasure)."""
        ...

    async def idle_threads(self, *, updated_before: datetime, limit: int) -> list[str]:
        """Ids of threads (not protocol threads) last updated before ``updated_before``,
        oldest first, at most ``limit`` (retention)."""
        ...

    async def lapsed_cohorts(self, *, now: datetime, limit: int) -> list[str]:
        """Ids of threads whose open cohort's every deadline has passed by ``now`` (its
        ``cohort_deadline``), earliest first, at most ``limit``; from an index over open
        cohorts only (the expiry sweeper asks every interval)."""
        ...

    async def close(self) -> None: ...
