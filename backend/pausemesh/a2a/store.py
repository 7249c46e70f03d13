"""An a2a-sdk ``VersionedTaskStore`` over PauseMesh's durable thread store.

Each A2A task is one thread record (``a2a-task:<task id>``) whose ``state`` holds the task in
ProtoJSON; the record's ``owner`` scopes it to the principal that created it (another principal
is told the task does not exist). Memory, SQLite and PostgreSQL thread stores all work, so an
input-required task survives a restart and is visible to every replica sharing the database.

The task's version is the record's CAS version, so the SDK's concurrent-change guard holds
across requests, processes and replicas: a write derived from a stale read raises
``ConcurrentTaskModificationError`` and the SDK re-reads the task. **Terminal means terminal**
here, whatever the executor does: a completed, failed, cancelled or rejected task accepts no
further write (no second completion, artifact or history message); the SDK then hands the
caller the stored final task. ``list`` serves A2A ``ListTasks`` from the caller's records.

With a push store, a write that moves the task into a state a client is told about
(input-required, auth-required, completed, canceled, failed, rejected) also queues a push
notice, in the same transaction as the task itself (the outbox ``PushDispatcher`` sends).
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

import msgspec
from a2a.server.agent_execution.active_task import TERMINAL_TASK_STATES
from a2a.server.cluster import (
    ConcurrentTaskModificationError,
    StoredTask,
    TaskVersion,
    VersionedTaskStore,
)
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.types import ListTasksRequest, ListTasksResponse, Task, TaskState
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError, UnsupportedOperationError
from google.protobuf.json_format import MessageToDict, ParseDict  # type: ignore[import-untyped]

from pausemesh.core.clock import SystemClock
from pausemesh.core.errors import VersionConflictError
from pausemesh.core.ports import Clock
from pausemesh.core.push import PushNotice, PushStore
from pausemesh.core.threads import PROTOCOL_THREAD_PREFIXES, ThreadRecord, ThreadStore

__all__ = (
    "NOTIFIED_STATES",
    "PRINCIPAL_STATE_KEY",
    "ThreadBackedTaskStore",
    "is_terminal",
    "principal_of_call",
    "task_thread_id",
)

PRINCIPAL_STATE_KEY = "pausemesh.principal"
# AG-UI refuses thread ids with this prefix, so a chat run never touches a task record.
_PREFIX = PROTOCOL_THREAD_PREFIXES[0]
_LIST_BATCH = 200
# The states a push notification announces: the client has to act, or the task is over.
NOTIFIED_STATES = frozenset(
    {
        TaskState.TASK_STATE_INPUT_REQUIRED,
        TaskState.TASK_STATE_AUTH_REQUIRED,
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_REJECTED,
    }
)


def task_thread_id(task_id: str) -> str:
    return _PREFIX + task_id


def principal_of_call(context: ServerCallContext | None) -> str | None:
    """The principal our call-context builder put in the SDK's per-call state."""
    if context is None:
        return None
    principal = context.state.get(PRINCIPAL_STATE_KEY)
    return principal if isinstance(principal, str) else None


def is_terminal(task: Task) -> bool:
    return task.status.state in TERMINAL_TASK_STATES


def _to_json(task: Task) -> dict[str, Any]:
    document: dict[str, Any] = MessageToDict(task)
    return document


def _from_json(document: Any) -> Task | None:
    if not isinstance(document, dict) or not document:
        return None
    task: Task = ParseDict(document, Task(), ignore_unknown_fields=True)
    return task


def _listed(record: ThreadRecord, params: ListTasksRequest) -> Task | None:
    """The record's task if it passes the request's filters."""
    task = _from_json(record.state)
    if task is None:
        return None
    if params.context_id and task.context_id != params.context_id:
        return None
    if params.status and task.status.state != params.status:
        return None
    if params.HasField("status_timestamp_after") and (
        not task.status.HasField("timestamp")
        or task.status.timestamp.ToNanoseconds() < params.status_timestamp_after.ToNanoseconds()
    ):
        return None
    return task


def _page_token(record: ThreadRecord) -> str:
    position = [record.updated_at.isoformat(), record.thread_id]
    return base64.urlsafe_b64encode(msgspec.json.encode(position)).decode().rstrip("=")


def _decode_page_token(token: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        at, thread_id = msgspec.json.decode(raw, type=tuple[str, str])
        when = datetime.fromisoformat(at)
    except (ValueError, msgspec.DecodeError):
        raise InvalidParamsError(message="pageToken is not a token this server issued") from None
    if when.tzinfo is None or not thread_id.startswith(_PREFIX):
        raise InvalidParamsError(message="pageToken is not a token this server issued")
    return when, thread_id


def _first_after(matching: list[tuple[ThreadRecord, Task]], after: tuple[datetime, str]) -> int:
    return next(
        (i for i, (r, _) in enumerate(matching) if (r.updated_at, r.thread_id) < after),
        len(matching),
    )


def _notice(task: Task, stored: Task | None) -> PushNotice | None:
    """The push notice for a write of ``task`` over ``stored`` (``None``: nothing to tell)."""
    state = task.status.state
    if state not in NOTIFIED_STATES or (stored is not None and stored.status.state == state):
        return None
    return PushNotice(event_id=uuid.uuid4().hex, task_id=task.id, payload=_to_json(task))


class ThreadBackedTaskStore(VersionedTaskStore):
    def __init__(
        self,
        threads: Callable[[], ThreadStore],
        *,
        clock: Clock | None = None,
        push: Callable[[], PushStore | None] | None = None,
        on_notice: Callable[[], None] | None = None,
    ) -> None:
        # Getters: the store is built with the routes, the thread store opens in the lifespan.
        self._thread_store = threads
        self._clock = clock or SystemClock()
        self._push = push
        self._on_notice = on_notice

    @property
    def _threads(self) -> ThreadStore:
        return self._thread_store()

    async def save(
        self,
        task: Task,
        *,
        event: Event | None,  # noqa: ARG002 - the SDK's signature; the record holds the task
        prev: Task | None,  # noqa: ARG002
        prev_version: TaskVersion,
        context: ServerCallContext,
    ) -> TaskVersion:
        principal = principal_of_call(context)
        now = self._clock.now()
        record = await self._threads.get(task_thread_id(task.id))
        if record is None:
            if task.status.state == TaskState.TASK_STATE_CANCELED:
                raise ConcurrentTaskModificationError(task.id)  # nothing to cancel
            record = await self._threads.create_or_load(
                task_thread_id(task.id), owner=principal, now=now
            )
        if record.owner != principal:
            # Never let one principal overwrite another's task (reads are scoped already).
            msg = "task belongs to another principal"
            raise PermissionError(msg)
        self._check_version(task, record, prev_version)
        updated = msgspec.structs.replace(record, state=_to_json(task))
        push = self._push() if self._push is not None else None
        notice = None if push is None else _notice(task, _from_json(record.state))
        try:
            if push is None:
                saved = await self._threads.save(updated, now=now)
            else:
                saved = await push.save_task(updated, now=now, notice=notice)
        except VersionConflictError:
            raise ConcurrentTaskModificationError(task.id) from None
        if notice is not None and self._on_notice is not None:
            self._on_notice()
        return TaskVersion(saved.version)

    @staticmethod
    def _check_version(task: Task, record: ThreadRecord, prev_version: TaskVersion) -> None:
        stored = _from_json(record.state)
        if stored is None:
            if not prev_version.is_missing:
                raise ConcurrentTaskModificationError(task.id)  # it was there when read
            return
        if is_terminal(stored):
            raise ConcurrentTaskModificationError(task.id)
        if task.status.state == TaskState.TASK_STATE_CANCELED:
            return  # the SDK's contract: a cancel overrides any non-terminal state
        if prev_version != TaskVersion(record.version):
            # Also a first write (MISSING) onto a task another request created meanwhile.
            raise ConcurrentTaskModificationError(task.id)

    async def get(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        record = await self._threads.get(task_thread_id(task_id))
        if record is None or record.owner != principal_of_call(context):
            return None
        task = _from_json(record.state)
        return None if task is None else StoredTask(task, TaskVersion(record.version))

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """The caller's tasks, most recently updated first, filtered and paginated.

        The filters (context, state, status timestamp) read the stored task, so each page
        walks the caller's task records; the page token is the position of the page's last
        task and stays valid if tasks change meanwhile.
        """
        after = _decode_page_token(params.page_token) if params.page_token else None
        page_size = params.page_size or DEFAULT_LIST_TASKS_PAGE_SIZE
        matching: list[tuple[ThreadRecord, Task]] = []
        before: tuple[datetime, str] | None = None
        while True:
            batch = await self._threads.list_records(
                _PREFIX, owner=principal_of_call(context), before=before, limit=_LIST_BATCH
            )
            matching.extend((r, t) for r in batch if (t := _listed(r, params)) is not None)
            if len(batch) < _LIST_BATCH:
                break
            before = (batch[-1].updated_at, batch[-1].thread_id)
        start = 0 if after is None else _first_after(matching, after)
        page = matching[start : start + page_size]
        more = start + page_size < len(matching)
        return ListTasksResponse(
            tasks=[task for _, task in page],
            next_page_token=_page_token(page[-1][0]) if more else "",
            page_size=page_size,
            total_size=len(matching),
        )

    async def delete(
        self,
        task_id: str,  # noqa: ARG002 - the SDK's signature
        context: ServerCallContext,  # noqa: ARG002
    ) -> None:
        # Tasks are kept as the durable record of what was asked and answered.
        raise UnsupportedOperationError(message="Deleting tasks is not supported")
