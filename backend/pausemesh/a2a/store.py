"""An a2a-sdk ``TaskStore`` over PauseMesh's durable thread store.

Each A2A task is one thread record (``a2a-task:<task id>``) whose ``state`` holds the task in
ProtoJSON; writes are compare-and-swap on the record version, the record's ``owner`` scopes
it to the principal that created it (another principal is told the task does not exist).
Memory, SQLite and PostgreSQL thread stores all work, so an input-required task survives a
restart and is visible to every replica sharing the database.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
from a2a.server.context import ServerCallContext
from a2a.server.tasks import TaskStore
from a2a.types import ListTasksRequest, ListTasksResponse, Task
from a2a.utils.errors import UnsupportedOperationError
from google.protobuf.json_format import MessageToDict, ParseDict  # type: ignore[import-untyped]

from pausemesh.core.clock import SystemClock
from pausemesh.core.errors import VersionConflictError
from pausemesh.core.ports import Clock
from pausemesh.core.threads import PROTOCOL_THREAD_PREFIXES, ThreadStore

__all__ = ("PRINCIPAL_STATE_KEY", "ThreadBackedTaskStore", "principal_of_call", "task_thread_id")

PRINCIPAL_STATE_KEY = "pausemesh.principal"
# AG-UI refuses thread ids with this prefix, so a chat run never touches a task record.
_PREFIX = PROTOCOL_THREAD_PREFIXES[0]
_MAX_ATTEMPTS = 8


def task_thread_id(task_id: str) -> str:
    return _PREFIX + task_id


def principal_of_call(context: ServerCallContext | None) -> str | None:
    """The principal our call-context builder put in the SDK's per-call state."""
    if context is None:
        return None
    principal = context.state.get(PRINCIPAL_STATE_KEY)
    return principal if isinstance(principal, str) else None


def _to_json(task: Task) -> dict[str, Any]:
    document: dict[str, Any] = MessageToDict(task)
    return document


def _from_json(document: Any) -> Task | None:
    if not isinstance(document, dict) or not document:
        return None
    task: Task = ParseDict(document, Task(), ignore_unknown_fields=True)
    return task


class ThreadBackedTaskStore(TaskStore):
    def __init__(self, threads: Callable[[], ThreadStore], *, clock: Clock | None = None) -> None:
        # A getter: the store is built with the routes, the thread store opens in the lifespan.
        self._thread_store = threads
        self._clock = clock or SystemClock()

    @property
    def _threads(self) -> ThreadStore:
        return self._thread_store()

    async def save(self, task: Task, context: ServerCallContext) -> None:
        principal = principal_of_call(context)
        thread_id = task_thread_id(task.id)
        for _ in range(_MAX_ATTEMPTS):
            now = self._clock.now()
            record = await self._threads.create_or_load(thread_id, owner=principal, now=now)
            if record.owner != principal:
                # Never let one principal overwrite another's task.
                msg = "task belongs to another principal"
                raise PermissionError(msg)
            changed = msgspec.structs.replace(record, state=_to_json(task))
            try:
                await self._threads.save(changed, now=now)
            except VersionConflictError:
                continue
            return
        msg = "task store kept changing under the save"
        raise RuntimeError(msg)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        record = await self._threads.get(task_thread_id(task_id))
        if record is None or record.owner != principal_of_call(context):
            return None
        return _from_json(record.state)

    async def list(
        self,
        params: ListTasksRequest,  # noqa: ARG002 - the SDK's signature
        context: ServerCallContext,  # noqa: ARG002
    ) -> ListTasksResponse:
        raise UnsupportedOperationError(message="ListTasks is not supported by this agent")

    async def delete(
        self,
        task_id: str,  # noqa: ARG002 - the SDK's signature
        context: ServerCallContext,  # noqa: ARG002
    ) -> None:
        # Tasks are kept as the durable record of what was asked and answered.
        raise UnsupportedOperationError(message="Deleting tasks is not supported")
