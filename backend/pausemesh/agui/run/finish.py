"""The finish of a run: save the transcript (and the agent's title) and, if the agent paused,
issue the cohort.

Every pause is checked before any continuation exists (all of the cohort or none), and the
cohort is durable in the thread record before the client hears of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import msgspec

from pausemesh.agui.agent import PauseRequest
from pausemesh.agui.events import (
    Event,
    MessagesSnapshotEvent,
    RunFinishedEvent,
    StateSnapshotEvent,
)
from pausemesh.agui.receipts import issue_interrupts, issued_cohort
from pausemesh.agui.run.lease import RunLease
from pausemesh.agui.run.snapshots import wire_messages
from pausemesh.agui.run_error import AguiRunError
from pausemesh.agui.transcript import Transcript
from pausemesh.core.approvers import check_approvers
from pausemesh.core.default_outcomes import ON_EXPIRY, default_answer
from pausemesh.core.errors import PauseMeshError, VersionConflictError
from pausemesh.core.model import Continuation
from pausemesh.core.pause import parse_pause_payload, pause_payload
from pausemesh.core.ports import Clock
from pausemesh.core.schema import SchemaValidatorCache
from pausemesh.core.service import ContinuationService
from pausemesh.core.threads import (
    UNREAD_STATE,
    IssuedCohort,
    ThreadRecord,
    ThreadStore,
    derive_title,
)
from pausemesh.core.timers import timer_fields
from pausemesh.core.webhooks import INBOX_METADATA

__all__ = ("Finished", "RunFinish")

# As long as the inbox's ``agent`` filter accepts.
_MAX_AGENT = 200


class Finished(NamedTuple):
    """What the finish changed: the thread's saved record, and the events that end the run."""

    record: ThreadRecord
    events: list[Event]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinish:
    """The finish of one run: the ports it writes to, and whose questions it asks."""

    lease: RunLease
    threads: ThreadStore
    service: ContinuationService
    schemas: SchemaValidatorCache
    clock: Clock
    principal: str | None
    roles: frozenset[str]
    # How many of the newest messages the snapshot at a pause carries (``RunParts``).
    snapshot_messages: int

    async def end(
        self,
        record: ThreadRecord,
        transcript: Transcript,
        pauses: Sequence[PauseRequest],
        closing: IssuedCohort | None,
        *,
        title: str | None,
    ) -> Finished:
        """Save the run's end on ``record``; the events to send last: ``RUN_FINISHED``, or the
        snapshots and the interrupting one."""
        lease = self.lease
        closed = closing if closing is not None else record.closed_receipt
        if closed is not None and closed.lapsed:
            # This run acknowledged the lapsed cohort: from now on a replay is answered as one.
            closed = msgspec.structs.replace(closed, lapsed=False)
        now = self.clock.now()
        if not pauses:
            saved = await self._save(
                record, transcript, open_cohort=None, closed_cohort=closed, title=title, now=now
            )
            return Finished(
                saved, [RunFinishedEvent(thread_id=lease.thread_id, run_id=lease.run_id)]
            )
        # The thread's name as its pauses' webhooks show it (core/webhooks.py).
        thread_title = title or record.title or derive_title(transcript.messages)
        continuations = await self._create(pauses, now, thread_title)
        try:
            interrupting, receipt = issue_interrupts(
                continuations, thread_id=lease.thread_id, run_id=lease.run_id, schemas=self.schemas
            )
        except PauseMeshError as error:
            raise AguiRunError.from_error(error) from None
        # The cohort is durable before the client hears of it.
        cohort = issued_cohort(interrupting, receipt)
        saved = await self._save(
            record, transcript, open_cohort=cohort, closed_cohort=closed, title=title, now=now
        )
        # The snapshot at a pause carries the newest page, as a reload does (the older ones
        # come from ``GET /agui/threads/{id}/messages``): read back under the lease, so it is
        # what was just saved, and O(page) however long the thread is.
        # The state too, if the run did not read it (the stored one is what the run left).
        unread = transcript.state is UNREAD_STATE
        page = await self.threads.get(lease.thread_id, tail=self.snapshot_messages, state=unread)
        messages = transcript.messages[-self.snapshot_messages :] if page is None else page.messages
        state = transcript.state
        if unread:
            state = {} if page is None else page.state
        return Finished(
            saved,
            [
                MessagesSnapshotEvent(messages=await wire_messages(messages)),
                StateSnapshotEvent(snapshot=state),
                interrupting,
            ],
        )

    async def _save(
        self,
        record: ThreadRecord,
        transcript: Transcript,
        *,
        open_cohort: IssuedCohort | None,
        closed_cohort: IssuedCohort | None,
        title: str | None,
        now: datetime,
    ) -> ThreadRecord:
        """Save the run's transcript with the cohorts it ends with (open: a pending one)."""
        # Only what the run added or changed is written: the messages from the first position
        # it touched on (none: the history stays as stored).
        ended = msgspec.structs.replace(
            record,
            messages=transcript.changed,
            messages_from=transcript.end
            if transcript.dirty_from is None
            else transcript.dirty_from,
            state=transcript.state,
            open_receipt=open_cohort,
            closed_receipt=closed_cohort,
        )
        self.lease.check()
        try:
            return await self.threads.save(
                ended, now=now, agent_title=title, removed_ids=transcript.removed
            )
        except VersionConflictError:
            raise AguiRunError("THREAD_CONFLICT", "The thread changed during the run") from None

    def _deadline(self, pause: PauseRequest, now: datetime) -> datetime | None:
        """The pause's deadline (None: the default TTL), within
        ``PAUSEMESH_MAX_PAUSE_TTL_SECONDS``.

        One past the cap is refused, not shortened: the agent told its person a deadline the
        server would not keep (``INVALID_EXPIRY``, the run ends with ``AGENT_PROTOCOL_ERROR``).
        """
        expires_at = pause.expires_at
        if expires_at is None and pause.expires_in is not None:
            try:
                expires_at = now + timedelta(seconds=pause.expires_in)
            except (OverflowError, ValueError):  # e.g. 1e300 or NaN seconds
                msg = (
                    "expires_in must be a number of seconds within PAUSEMESH_MAX_PAUSE_TTL_SECONDS"
                )
                raise ValueError(msg) from None
        if expires_at is None:
            return None
        return self.service.check_expiry(expires_at, now)

    @staticmethod
    def _timers(pause: PauseRequest, now: datetime, deadline: datetime) -> dict[str, Any]:
        """The pause's reminder and escalation (``core/timers.py``), each before its deadline;
        ``ValueError`` for one that could never fire or an escalation to nobody."""
        remind_at = escalate_at = None
        if pause.remind_after is not None:
            remind_at = now + timedelta(seconds=pause.remind_after)
        if pause.escalate_after is not None:
            escalate_at = now + timedelta(seconds=pause.escalate_after)
            if not pause.escalate_to:
                msg = "escalate_after needs escalate_to: the approvers it adds"
                raise ValueError(msg)
            check_approvers(pause.escalate_to)
        elif pause.escalate_to:
            msg = "escalate_to needs escalate_after: when they are added"
            raise ValueError(msg)
        for name, at in (("remind_after", remind_at), ("escalate_after", escalate_at)):
            if at is not None and not now < at < deadline:
                msg = f"{name} must be a positive number of seconds before the pause's deadline"
                raise ValueError(msg)
        return timer_fields(remind_at, escalate_at, pause.escalate_to)

    def _metadata(self, pause: PauseRequest, thread_title: str | None) -> dict[str, Any]:
        """The continuation's metadata: the agent's own, and what the inbox reads (its tags,
        its default outcome: ``core/default_outcomes.py``); ``ValueError`` for a default
        outcome the pause's schema refuses."""
        metadata: dict[str, Any] = {} if pause.metadata is None else {"agent": pause.metadata}
        inbox: dict[str, Any] = {}
        if thread_title and pause.approvers:
            # Only where someone else decides: it is they who need to know the conversation.
            inbox["threadTitle"] = thread_title
        if pause.tags:
            inbox["tags"] = list(pause.tags)
        if pause.agent is not None:
            if not isinstance(pause.agent, str) or not 1 <= len(pause.agent) <= _MAX_AGENT:
                msg = f"agent must be a name of 1-{_MAX_AGENT} characters"
                raise ValueError(msg)
            inbox["agent"] = pause.agent
        if pause.on_expiry is not None:
            answer = default_answer(pause.on_expiry, pause.response_schema)
            schema = pause.response_schema
            if (
                answer != "cancel"
                and schema is not None
                and not self.schemas.is_valid(schema, answer)
            ):
                msg = "on_expiry is not an answer the responseSchema accepts"
                raise ValueError(msg)
            inbox[ON_EXPIRY] = answer
        if inbox:
            metadata[INBOX_METADATA] = inbox
        return metadata

    async def _create(
        self, pauses: Sequence[PauseRequest], now: datetime, thread_title: str | None = None
    ) -> list[Continuation]:
        # Every pause is checked before any continuation exists: all of the cohort or none.
        payloads: list[dict[str, Any]] = []
        deadlines: list[datetime | None] = []
        metadatas: list[dict[str, Any]] = []
        for pause in pauses:
            payload = pause_payload(
                pause.message,
                response_schema=pause.response_schema,
                tool_call_id=pause.tool_call_id,
                reason=pause.reason,
            )
            try:
                deadlines.append(self._deadline(pause, now))
                parse_pause_payload(payload)
                check_approvers(pause.approvers)
                if pause.response_schema is not None:
                    self.schemas.check_schema(pause.response_schema)
                metadata = self._metadata(pause, thread_title)
                deadline = deadlines[-1] or now + self.service.token_ttl
                timers = self._timers(pause, now, deadline)
                if timers:
                    metadata.setdefault(INBOX_METADATA, {}).update(timers)
                metadatas.append(metadata)
            except (ValueError, TypeError) as error:
                message = error.message if isinstance(error, PauseMeshError) else str(error)
                raise AguiRunError("AGENT_PROTOCOL_ERROR", f"invalid pause: {message}") from None
            payloads.append(payload)
        created: list[Continuation] = []
        for pause, payload, expires_at, metadata in zip(
            pauses, payloads, deadlines, metadatas, strict=True
        ):
            try:
                result = await self.service.create(
                    payload=payload,
                    correlation_id=self.lease.thread_id,
                    expires_at=expires_at,
                    metadata=metadata,
                    owner=self.principal,
                    keyed=True,
                    approvers=pause.approvers,
                    owner_roles=self.roles,
                    allow_requester=pause.allow_requester,
                )
            except PauseMeshError as error:
                raise AguiRunError("AGENT_PROTOCOL_ERROR", error.message) from None
            created.append(result.continuation)
        return created
