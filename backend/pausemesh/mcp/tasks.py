"""MCP Tasks (2025-11-25, SEP-1686) over durable pauses: the task is a view of its continuation.

A task-augmented ``tools/call`` (``params.task``) from a 2025-11-25 client becomes a task
record in the thread store (``mcp-task:<task id>``, owned by the caller's principal): what was
called (tool, arguments), the pause it opened (its continuation, whose id is the task id) and
the sealed ``requestState`` that lets the tool be resumed by a 2026-07-28-style retry, and,
once known, the tool's result. There is no in-memory registry: ``tasks/get``, ``tasks/result``,
``tasks/list`` and ``tasks/cancel`` read the record and the continuation, so a task survives
restarts and is served by any replica sharing the stores.

Status is derived, never stored apart from its source:

* a result is recorded → ``completed`` (``failed`` if the tool said ``isError`` or the call
  ended in a JSON-RPC error);
* the pause is pending → ``input_required``;
* the pause was answered (or declined) and no result is recorded yet → the tool is finished
  now (``TaskFinisher``: the same resume path as a 2026-07-28 retry, which acts once through
  the continuation) and the result recorded;
* cancelled by ``tasks/cancel`` → ``cancelled``; expired unanswered → ``failed``.

The finisher is the web layer's (it calls the tool through the SDK); this module holds the
records and the rules.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal

import msgspec
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from pausemesh.core.clock import iso_millis
from pausemesh.core.errors import (
    ContinuationNotFoundError,
    InvalidTransitionError,
    ThreadNotFoundError,
    VersionConflictError,
)
from pausemesh.core.ids import uuid7
from pausemesh.core.model import Continuation
from pausemesh.core.service import ContinuationService
from pausemesh.core.threads import MCP_TASK_PREFIX, ThreadRecord, ThreadStore

__all__ = (
    "CANCELLED_BY_TASK",
    "POLL_INTERVAL_MS",
    "RELATED_TASK",
    "McpTasks",
    "TaskEntry",
    "TaskFinisher",
    "TaskStatus",
    "TaskSupport",
    "TaskView",
    "task_not_found",
)

_log = logging.getLogger("pausemesh.mcp")

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
TaskSupport = Literal["optional", "required"]
"""A tool's ``execution.taskSupport`` when it may run as a task (absent means ``forbidden``)."""
TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})
CANCELLED_BY_TASK: Final = "mcp:task_cancelled"
RELATED_TASK: Final = "io.modelcontextprotocol/related-task"
POLL_INTERVAL_MS: Final = 1000
_ATTEMPTS = 8
_LIST_PAGE = 50


class TaskEntry(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    """What a task record holds (``ThreadRecord.state``)."""

    tool: str
    arguments: dict[str, Any]
    # The pause the call opened; None when the call finished without pausing.
    continuation_id: str | None = None
    request_state: str | None = None
    key: str | None = None
    # The tool's CallToolResult (JSON), or the JSON-RPC error the call ended in.
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    # Answers refused so far (they did not fit the question): the question is asked again.
    refusals: int = 0
    # The question as the tool asked it (``inputRequests``), for the 2026-07-28 tasks
    # extension's ``tasks/get``.
    input_requests: dict[str, Any] | None = None
    # Work run by the process that took the call (no pause): the moment (ISO 8601) after which
    # a task with no result recorded is failed, and whether a client cancelled it.
    work_until: str | None = None
    cancelled: bool = False


@dataclass(frozen=True, slots=True)
class TaskView:
    """One task as the protocol shows it."""

    task_id: str
    status: TaskStatus
    message: str | None
    created_at: datetime
    updated_at: datetime
    entry: TaskEntry

    def to_wire(self) -> dict[str, Any]:
        task: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": iso_millis(self.created_at),
            "lastUpdatedAt": iso_millis(self.updated_at),
            # Records are kept (the pause has its own deadline): no retention limit to report.
            "ttl": None,
            "pollInterval": POLL_INTERVAL_MS,
        }
        if self.message is not None:
            task["statusMessage"] = self.message
        return task


TaskFinisher = Callable[[TaskEntry, Continuation], Awaitable[TaskEntry]]
"""Runs the tool to its end after its pause settled; returns the entry with a result/error."""


def task_not_found(task_id: object) -> MCPError:
    """The spec's answer for an unknown (or someone else's) task id: invalid params."""
    return MCPError(
        code=INVALID_PARAMS,
        message="Failed to retrieve task: Task not found",
        data={"taskId": task_id} if isinstance(task_id, str) else None,
    )


def _entry_of(record: ThreadRecord) -> TaskEntry | None:
    try:
        return msgspec.convert(record.state, TaskEntry)
    except msgspec.ValidationError:
        return None


def _outcome(entry: TaskEntry) -> tuple[TaskStatus, str | None] | None:
    if entry.cancelled:
        return "cancelled", "cancelled by the client"
    if entry.error is not None:
        message = entry.error.get("message")
        return "failed", message if isinstance(message, str) else None
    if entry.result is not None:
        return (
            ("failed", "the tool reported an error")
            if entry.result.get("isError")
            else (
                "completed",
                None,
            )
        )
    return None


def _status_of(continuation: Continuation, now: datetime) -> tuple[TaskStatus, str | None]:
    """A task without a recorded outcome, from its pause."""
    expired = continuation.status == "expired" or (
        continuation.is_pending and continuation.expires_at <= now
    )
    if expired:
        return "failed", "the question expired unanswered"
    if continuation.is_pending:
        payload = continuation.payload
        message = payload.get("message") if isinstance(payload, dict) else None
        return "input_required", message if isinstance(message, str) else None
    if continuation.status == "cancelled" and continuation.reason == CANCELLED_BY_TASK:
        return "cancelled", "cancelled by the client"
    # Answered (or declined elsewhere): the tool has yet to finish.
    return "working", None


class McpTasks:
    """The task records behind MCP Tasks, read through the continuation store."""

    def __init__(
        self,
        service: Callable[[], ContinuationService],
        threads: Callable[[], ThreadStore | None],
        on_change: Callable[[str, str | None], Awaitable[None]] | None = None,
    ) -> None:
        """``on_change(task_id, owner)``: told once a task's record changed (its outcome
        recorded, an answer refused; the status feed, ``mcp.task_feed``); a failure there
        never fails the request."""
        self._service = service
        self._threads = threads
        self._on_change = on_change

    @property
    def enabled(self) -> bool:
        """Tasks need a thread store (SQLite and PostgreSQL always have one)."""
        return self._threads() is not None

    @property
    def max_ttl_ms(self) -> int:
        """The longest ``params.task.ttl`` a client may ask for: the pause TTL cap
        (``PAUSEMESH_MAX_PAUSE_TTL_SECONDS``), in milliseconds as the spec counts it."""
        return int(self._service().max_pause_ttl.total_seconds()) * 1000

    def now(self) -> datetime:
        """The service clock's now."""
        return self._service().clock.now()

    def _store(self) -> ThreadStore:
        threads = self._threads()
        if threads is None:
            msg = "MCP tasks need a thread store"
            raise RuntimeError(msg)
        return threads

    async def open(
        self, principal: str | None, entry: TaskEntry, now: datetime | None = None
    ) -> TaskView:
        """Record a new task: its id is its pause's continuation id (or a fresh id);
        ``now``: its creation instant (the clock's now by default)."""
        task_id = entry.continuation_id or uuid7()
        threads = self._store()
        now = now or self._service().clock.now()
        record = await threads.create_or_load(MCP_TASK_PREFIX + task_id, owner=principal, now=now)
        if record.owner != principal:
            raise task_not_found(task_id)
        if _entry_of(record) is None:
            state = msgspec.to_builtins(entry)
            record = await threads.save(msgspec.structs.replace(record, state=state), now=now)
        return await self.view(task_id, principal)

    async def _load(self, task_id: object, principal: str | None) -> tuple[ThreadRecord, TaskEntry]:
        if not isinstance(task_id, str) or not task_id or len(task_id) > 200:
            raise task_not_found(task_id)
        try:
            record = await self._store().get(MCP_TASK_PREFIX + task_id)
        except ThreadNotFoundError:
            record = None
        entry = _entry_of(record) if record is not None else None
        if record is None or entry is None or record.owner != principal:
            raise task_not_found(task_id)
        return record, entry

    async def continuation(self, continuation_id: str, principal: str | None) -> Continuation:
        """The pause behind a task (``ContinuationNotFoundError`` if it is not the caller's)."""
        return await self._service().get(continuation_id, principal=principal)

    async def _continuation(self, entry: TaskEntry, principal: str | None) -> Continuation | None:
        if entry.continuation_id is None:
            return None
        try:
            return await self.continuation(entry.continuation_id, principal)
        except ContinuationNotFoundError:
            return None

    async def settle(self, task_id: str, principal: str | None, finished: TaskEntry) -> TaskView:
        """Record the tool's outcome (the first one recorded stays)."""
        record, _ = await self._load(task_id, principal)
        await self._record_outcome(record, finished)
        return await self.view(task_id, principal)

    async def refused(self, task_id: str, principal: str | None) -> None:
        """Count an answer that did not fit, so an open ``tasks/result`` stream asks again."""
        record, entry = await self._load(task_id, principal)
        threads = self._store()
        for _ in range(_ATTEMPTS):
            bumped = msgspec.structs.replace(entry, refusals=entry.refusals + 1)
            try:
                saved = await threads.save(
                    msgspec.structs.replace(record, state=msgspec.to_builtins(bumped)),
                    now=self._service().clock.now(),
                )
            except VersionConflictError:
                record, entry = await self._load(task_id, principal)
                continue
            await self._told(saved)  # the open tasks/result stream asks again
            return

    async def view(
        self, task_id: object, principal: str | None, finish: TaskFinisher | None = None
    ) -> TaskView:
        """The task now; with ``finish``, a settled pause's tool is run to its end first."""
        record, entry = await self._load(task_id, principal)
        assert isinstance(task_id, str)  # noqa: S101 - _load checked it
        status, message = await self._status(entry, principal)
        if status == "working" and finish is not None:
            continuation = await self._continuation(entry, principal)
            if continuation is not None:
                record, entry = await self._record_outcome(
                    record, await finish(entry, continuation)
                )
                status, message = _outcome(entry) or (status, message)
        return TaskView(task_id, status, message, record.created_at, record.updated_at, entry)

    async def _status(
        self, entry: TaskEntry, principal: str | None
    ) -> tuple[TaskStatus, str | None]:
        known = _outcome(entry)
        if known is not None:
            return known
        if entry.work_until is not None:
            if self._service().clock.now() >= datetime.fromisoformat(entry.work_until):
                return "failed", "the work did not finish in time"
            return "working", None
        continuation = await self._continuation(entry, principal)
        if continuation is None:
            return "failed", "the pause behind this task is gone"
        return _status_of(continuation, self._service().clock.now())

    async def _record_outcome(
        self, record: ThreadRecord, finished: TaskEntry
    ) -> tuple[ThreadRecord, TaskEntry]:
        """Store the first outcome; a concurrent finisher's result wins if it landed first."""
        threads = self._store()
        for _ in range(_ATTEMPTS):
            current = _entry_of(record)
            if current is not None and _outcome(current) is not None:
                return record, current
            state = msgspec.to_builtins(finished)
            try:
                saved = await threads.save(
                    msgspec.structs.replace(record, state=state), now=self._service().clock.now()
                )
            except VersionConflictError:
                fresh = await threads.get(record.thread_id)
                if fresh is None:
                    break
                record = fresh
                continue
            await self._told(saved)
            return saved, finished
        return record, finished

    async def _told(self, record: ThreadRecord) -> None:
        if self._on_change is None:
            return
        try:
            await self._on_change(record.thread_id.removeprefix(MCP_TASK_PREFIX), record.owner)
        except Exception:  # noqa: BLE001 - a status hint is best effort; tasks/get still reads it
            _log.warning("MCP task status hint failed", exc_info=True)

    async def cancel(self, task_id: object, principal: str | None) -> TaskView:
        """Cancel the task's pause; a terminal task is the spec's invalid-params refusal."""
        record, entry = await self._load(task_id, principal)
        status, _ = await self._status(entry, principal)
        if status == "working" and entry.work_until is not None:
            # Work: the cancel is recorded as its outcome; a result that comes later is dropped.
            await self._record_outcome(record, msgspec.structs.replace(entry, cancelled=True))
            view = await self.view(task_id, principal)
            if view.status != "cancelled":
                raise MCPError(
                    code=INVALID_PARAMS,
                    message=f"Cannot cancel task: it ended first ({view.status})",
                )
            return view
        if status in TERMINAL or entry.continuation_id is None:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"Cannot cancel task: already in terminal status '{status}'",
            )
        # Answered (or cancelled otherwise) first: then the task is not cancelled by us.
        with contextlib.suppress(InvalidTransitionError):
            await self._service().cancel(
                continuation_id=entry.continuation_id, reason=CANCELLED_BY_TASK, principal=principal
            )
        view = await self.view(task_id, principal)
        if view.status != "cancelled":
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"Cannot cancel task: it was answered first ({view.status})",
            )
        return view

    async def list(
        self, principal: str | None, cursor: object
    ) -> tuple[list[TaskView], str | None]:
        """The caller's tasks, most recently updated first; ``cursor`` continues a page."""
        before = _decode_cursor(cursor)
        records = await self._store().list_records(
            MCP_TASK_PREFIX, owner=principal, before=before, limit=_LIST_PAGE + 1
        )
        views: list[TaskView] = []
        for record in records[:_LIST_PAGE]:
            entry = _entry_of(record)
            if entry is None:
                continue
            status, message = await self._status(entry, principal)
            task_id = record.thread_id.removeprefix(MCP_TASK_PREFIX)
            views.append(
                TaskView(task_id, status, message, record.created_at, record.updated_at, entry)
            )
        after = None
        if len(records) > _LIST_PAGE:
            last = records[_LIST_PAGE - 1]
            after = _encode_cursor(last.updated_at, last.thread_id)
        return views, after


def _encode_cursor(updated_at: datetime, thread_id: str) -> str:
    return msgspec.json.encode([updated_at.isoformat(), thread_id]).hex()


def _decode_cursor(cursor: object) -> tuple[datetime, str] | None:
    if cursor is None:
        return None
    invalid = MCPError(code=INVALID_PARAMS, message="Invalid cursor")
    if not isinstance(cursor, str) or len(cursor) > 1000:
        raise invalid
    with contextlib.suppress(ValueError, msgspec.DecodeError):
        moment, thread_id = msgspec.json.decode(bytes.fromhex(cursor), type=tuple[str, str])
        if thread_id.startswith(MCP_TASK_PREFIX):
            return datetime.fromisoformat(moment), thread_id
    raise invalid
