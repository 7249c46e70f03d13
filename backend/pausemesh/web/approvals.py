"""The approvals inbox (four-eyes approvals): pauses the caller may decide, and deciding one.

A pause that names ``approvers`` (``PauseRequest(approvers=[Approver.role("manager"), ...])``)
is decided here by one of them, never by the thread's owner, who asked (four eyes are two
people), unless the pause sets ``allow_requester`` and the owner is one of them.
``GET /v1/approvals`` lists the pending ones the caller may decide, newest first (narrowed by
``tag``, ``agent``, ``askedBy``, ``olderThanSeconds``, ``newerThanSeconds``: the tags and agent
of the pause's ``metadata.inbox``, ``PauseRequest(tags=..., agent=...)``), each with its
reminder and escalation (``core/timers.py``: when due, and when fired);
``POST /v1/approvals/{continuationId}`` with ``{"payload"}`` and an ``Idempotency-Key``
decides one exactly once, validated against its ``responseSchema``. Its owner is refused with
403 ``NOT_AN_APPROVER`` (it knows the pause exists); anyone else who may not decide it is told
it does not exist (404). The decision records the approver (``resolvedBy``) and continues the
owner's thread (``agui/run/owed.py``). ``approvers`` is shown in its text form
(``core/approvers.py``): ``role:NAME``, ``operation:ID`` or a principal id.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any

import msgspec
from litestar import Controller, get, post
from litestar.di import NamedDependency
from litestar.params import HeaderParameter, JSONBody, PathParameter, QueryParameter
from msgspec import UNSET, UnsetType

from pausemesh.core.errors import UnauthenticatedError
from pausemesh.core.model import Continuation
from pausemesh.core.pause import parse_pause_payload
from pausemesh.core.resume import NamedApprover, Resume
from pausemesh.core.service import MAX_PAUSE_TTL_SECONDS
from pausemesh.core.timers import pause_timers
from pausemesh.core.validation import check_id, check_idempotency_key
from pausemesh.core.webhooks import INBOX_METADATA
from pausemesh.stores.storage import Storage
from pausemesh.web.context import PauseMeshCaller
from pausemesh.web.problems import problem_responses
from pausemesh.web.schemas import ID_PATTERN, ContinuationBody, ResumeBody, StrictBody, strict_body

__all__ = (
    "ApprovalController",
    "ApprovalEscalation",
    "ApprovalItem",
    "ApprovalList",
    "ApprovalReminder",
)

DEFAULT_PAGE = 50
MAX_PAGE = 200
# Candidates a filtered page reads at most (then it answers with what it found and a cursor).
_SCAN = 2000

Caller = NamedDependency[PauseMeshCaller]
StorageDep = NamedDependency[Storage]


class ApprovalReminder(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    due_at: datetime
    # When the reminder went out (``pause.reminder``); absent while it has not.
    fired_at: datetime | UnsetType = UNSET


class ApprovalEscalation(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    due_at: datetime
    # The approvers it adds (text form), who may decide the pause once it has fired.
    to: list[str]
    fired_at: datetime | UnsetType = UNSET


class ApprovalItem(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    continuation_id: str
    message: str
    reason: str
    thread_id: str
    asked_by: str | None
    created_at: datetime
    expires_at: datetime
    approvers: list[str]
    response_schema: dict[str, Any] | UnsetType = UNSET
    thread_title: str | UnsetType = UNSET
    tags: list[str] = msgspec.field(default_factory=list)
    agent: str | UnsetType = UNSET
    reminder: ApprovalReminder | UnsetType = UNSET
    escalation: ApprovalEscalation | UnsetType = UNSET


class ApprovalList(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    approvals: list[ApprovalItem]
    next_cursor: str | None


def _principal(caller: PauseMeshCaller) -> str:
    # Approvers are people the resolver names; a server without one has nobody to ask.
    if caller.principal is None:
        raise UnauthenticatedError
    return caller.principal


async def _item(storage: Storage, continuation: Continuation) -> ApprovalItem:
    pause = parse_pause_payload(continuation.payload)
    title: str | None = None
    if storage.threads is not None:
        # Only its title is shown: no message read.
        record = await storage.threads.get(continuation.correlation_id, tail=0, state=False)
        title = None if record is None else record.title
    inbox = _inbox(continuation)
    agent = inbox.get("agent")
    return ApprovalItem(
        tags=_tags(inbox),
        agent=agent if isinstance(agent, str) else UNSET,
        continuation_id=continuation.continuation_id,
        message=pause.message,
        reason=pause.reason,
        thread_id=continuation.correlation_id,
        asked_by=continuation.owner if isinstance(continuation.owner, str) else None,
        created_at=continuation.created_at,
        expires_at=continuation.expires_at,
        approvers=list(continuation.approvers),
        response_schema=UNSET if pause.response_schema is None else pause.response_schema,
        thread_title=UNSET if title is None else title,
        **_timers(continuation),
    )


def _timers(continuation: Continuation) -> dict[str, Any]:
    timers = pause_timers(continuation.metadata)
    out: dict[str, Any] = {}
    if timers.remind_at is not None:
        out["reminder"] = ApprovalReminder(
            due_at=timers.remind_at, fired_at=_fired(continuation.reminded_at)
        )
    if timers.escalate_at is not None:
        out["escalation"] = ApprovalEscalation(
            due_at=timers.escalate_at,
            to=[a.text for a in timers.escalate_to],
            fired_at=_fired(continuation.escalated_at),
        )
    return out


def _fired(at: datetime | UnsetType) -> datetime | UnsetType:
    return at if isinstance(at, datetime) else UNSET


def _inbox(continuation: Continuation) -> dict[str, Any]:
    metadata = continuation.metadata if isinstance(continuation.metadata, dict) else {}
    inbox = metadata.get(INBOX_METADATA)
    return inbox if isinstance(inbox, dict) else {}


def _tags(inbox: dict[str, Any]) -> list[str]:
    tags = inbox.get("tags")
    return [t for t in tags if isinstance(t, str)] if isinstance(tags, list) else []


class InboxFilter(msgspec.Struct, frozen=True, kw_only=True):
    """What the inbox's query narrows to (every one given must hold)."""

    tag: str | None = None
    agent: str | None = None
    asked_by: str | None = None
    older_than: timedelta | None = None
    newer_than: timedelta | None = None

    @property
    def active(self) -> bool:
        return any(v is not None for v in msgspec.structs.astuple(self))

    def matches(self, continuation: Continuation, now: datetime) -> bool:
        inbox = _inbox(continuation)
        age = now - continuation.created_at
        return (
            (self.tag is None or self.tag in _tags(inbox))
            and (self.agent is None or inbox.get("agent") == self.agent)
            and (self.asked_by is None or continuation.owner == self.asked_by)
            and (self.older_than is None or age >= self.older_than)
            and (self.newer_than is None or age <= self.newer_than)
        )


async def _filtered_page(
    caller: PauseMeshCaller,
    principal: str,
    wanted: InboxFilter,
    cursor: str | None,
    limit: int,
) -> tuple[list[Continuation], str | None]:
    """Up to ``limit`` pending approvals that match ``wanted``, and the cursor of the next
    page. At most ``_SCAN`` candidates are read per request: a page may come back short with
    a cursor, which the client follows like any other."""
    service = caller.service
    now = service.clock.now()
    found: list[Continuation] = []
    scanned = 0
    while scanned < _SCAN:
        batch = await service.pending_approvals(
            principal=principal, roles=caller.roles, before=cursor, limit=MAX_PAGE
        )
        if not batch:
            return found, None
        for continuation in batch:
            scanned += 1
            cursor = continuation.continuation_id
            if wanted.matches(continuation, now):
                found.append(continuation)
                if len(found) == limit:
                    return found, cursor
        if len(batch) < MAX_PAGE:
            return found, None
    return found, cursor


class ApprovalController(Controller):
    path = "/v1/approvals"
    tags = ["approvals"]  # noqa: RUF012 - Litestar reads this class attribute

    @get(
        "/",
        summary="Pending pauses the caller may decide (four-eyes approvals), newest first",
        responses=problem_responses(400, 401, 503),
    )
    async def inbox(  # noqa: PLR0917 - one parameter per query field
        self,
        caller: Caller,
        pausemesh_storage: StorageDep,
        limit: Annotated[int, QueryParameter(name="limit", ge=1, le=MAX_PAGE)] = DEFAULT_PAGE,
        cursor: Annotated[
            str | None, QueryParameter(name="cursor", min_length=1, max_length=200)
        ] = None,
        tag: Annotated[str | None, QueryParameter(name="tag", min_length=1, max_length=200)] = None,
        agent: Annotated[
            str | None, QueryParameter(name="agent", min_length=1, max_length=200)
        ] = None,
        asked_by: Annotated[
            str | None, QueryParameter(name="askedBy", min_length=1, max_length=200)
        ] = None,
        older_than: Annotated[
            int | None,
            QueryParameter(name="olderThanSeconds", ge=0, le=MAX_PAUSE_TTL_SECONDS),
        ] = None,
        newer_than: Annotated[
            int | None,
            QueryParameter(name="newerThanSeconds", ge=0, le=MAX_PAUSE_TTL_SECONDS),
        ] = None,
    ) -> ApprovalList:
        principal = _principal(caller)
        if cursor is not None:
            check_id(cursor, "cursor")
        wanted = InboxFilter(
            tag=tag,
            agent=agent,
            asked_by=asked_by,
            older_than=None if older_than is None else timedelta(seconds=older_than),
            newer_than=None if newer_than is None else timedelta(seconds=newer_than),
        )
        if wanted.active:
            found, next_cursor = await _filtered_page(caller, principal, wanted, cursor, limit)
            items = [await _item(pausemesh_storage, c) for c in found]
            return ApprovalList(approvals=items, next_cursor=next_cursor)
        page = await caller.service.pending_approvals(
            principal=principal, roles=caller.roles, before=cursor, limit=limit + 1
        )
        more = len(page) > limit
        page = page[:limit]
        items = [await _item(pausemesh_storage, c) for c in page]
        return ApprovalList(
            approvals=items, next_cursor=page[-1].continuation_id if more and page else None
        )

    @post(
        "/{continuation_id:str}",
        status_code=200,
        summary="Decide one pause as its approver (exactly once; continues the owner's thread)",
        description=(
            'Body `{"payload"}` validated against the pause\'s `responseSchema`, and an'
            " `idempotency-key` header: an exact retry returns the stored outcome."
        ),
        responses=problem_responses(400, 401, 403, 404, 409, 410, 413, 503),
    )
    async def decide(
        self,
        continuation_id: Annotated[
            str,
            PathParameter(
                min_length=1, max_length=200, pattern=ID_PATTERN, description="The pause"
            ),
        ],
        data: JSONBody[StrictBody[ResumeBody]],
        idempotency_key: Annotated[
            str | None,
            HeaderParameter(
                name="idempotency-key",
                required=False,
                description="1-200 printable characters; an exact retry returns the outcome",
            ),
        ],
        caller: Caller,
    ) -> ContinuationBody:
        principal = _principal(caller)
        body = strict_body(data, ResumeBody)
        key = check_idempotency_key((idempotency_key or "").strip())
        # 404 before anything about the payload is said to someone who may not decide it.
        await caller.service.get_for_approver(
            continuation_id, principal=principal, roles=caller.roles
        )
        # The answer is checked against the pause's responseSchema by the resume itself
        # (pausemesh.core.resume.check_answer: one rule for REST and approvals).
        outcome = await caller.service.resume(
            Resume(
                continuation_id=continuation_id,
                idempotency_key=key,
                payload=body.payload,
                by=NamedApprover(principal, roles=caller.roles),
            )
        )
        # The owner's thread continues with it (an exact retry finds nothing left to run).
        caller.owed.poke(outcome)
        return ContinuationBody(continuation=outcome.continuation)
