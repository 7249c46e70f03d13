"""The open pause of a tool call, so a 2025-11-25 question outlives the session that asked it.

A live ``elicitation/create`` is tied to its MCP session: if the client goes away, nobody can
answer it there. The pause itself is durable, so each live question is also recorded in a
slot keyed by what the call was (principal, tool, canonical arguments), a thread-store record
``mcp-pause:<digest>`` naming the pending continuation. A later call of the same tool with the
same arguments, by the same principal, joins that pause instead of opening another: a new
2025-11-25 session is asked the same question again, a 2026-07-28 client gets it as
``input_required`` with a ``requestState`` naming it and answers by the usual retry. The
continuation is resumed once, so whichever path answers first, the tool acts once.

Only live (handshake-era) questions are recorded: a 2026-07-28 pause already outlives any
connection through its ``requestState``. Without a thread store there are no slots and a live
question is as durable as its session.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable

import msgspec

from pausemesh.core.canonical import canonical_sha256
from pausemesh.core.errors import (
    ContinuationNotFoundError,
    InvalidTransitionError,
    VersionConflictError,
)
from pausemesh.core.model import Continuation
from pausemesh.core.service import ContinuationService
from pausemesh.core.threads import PROTOCOL_THREAD_PREFIXES, ThreadRecord, ThreadStore
from pausemesh.mcp.sdk_bridge import Question

__all__ = ("PauseSlots",)

_PREFIX = PROTOCOL_THREAD_PREFIXES[1]
_ATTEMPTS = 8


def _slot_id(question: Question, principal: str | None) -> str:
    return _PREFIX + canonical_sha256(
        ["mcp-pause-slot-v1", principal, question.tool, question.arguments]
    )


class PauseSlots:
    def __init__(
        self,
        service: Callable[[], ContinuationService],
        threads: Callable[[], ThreadStore | None],
    ) -> None:
        self._service = service
        self._threads = threads

    @property
    def enabled(self) -> bool:
        """Whether questions outlive their session here (a thread store is configured)."""
        return self._threads() is not None

    async def pending(
        self, question: Question, principal: str | None, payload: dict[str, object]
    ) -> Continuation | None:
        """The call's open pause, if one is pending and still asks ``payload``."""
        threads = self._threads()
        if threads is None:
            return None
        record = await threads.get(_slot_id(question, principal))
        if record is None or record.owner != principal:
            return None
        return await self._current(record, principal, payload)

    async def open(
        self,
        question: Question,
        principal: str | None,
        payload: dict[str, object],
        create: Callable[[], Awaitable[Continuation]],
    ) -> Continuation:
        """The call's pending pause, or a new one (``create``) recorded as its open pause."""
        threads = self._threads()
        if threads is None:
            return await create()
        slot_id = _slot_id(question, principal)
        service = self._service()
        for _ in range(_ATTEMPTS):
            record = await threads.create_or_load(slot_id, owner=principal, now=service.clock.now())
            current = await self._current(record, principal, payload)
            if current is not None:
                return current
            created = await create()
            state = {"continuationId": created.continuation_id}
            try:
                await threads.save(
                    msgspec.structs.replace(record, state=state), now=service.clock.now()
                )
            except VersionConflictError:
                # Another call opened the pause first: ask that one, drop ours unasked.
                await self._drop(created, principal)
                continue
            return created
        return await create()  # the slot kept changing: ask on our own

    async def _current(
        self, record: ThreadRecord, principal: str | None, payload: dict[str, object]
    ) -> Continuation | None:
        cid = record.state.get("continuationId") if isinstance(record.state, dict) else None
        if not isinstance(cid, str):
            return None
        try:
            current = await self._service().get(cid, principal=principal)
        except ContinuationNotFoundError:
            return None
        return current if current.is_pending and current.payload == payload else None

    async def _drop(self, continuation: Continuation, principal: str | None) -> None:
        with contextlib.suppress(InvalidTransitionError):  # settled meanwhile: nothing to drop
            await self._service().cancel(
                continuation_id=continuation.continuation_id,
                reason="mcp:superseded",
                principal=principal,
            )
