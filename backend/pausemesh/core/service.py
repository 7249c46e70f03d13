"""``ContinuationService``: the one place the continuation lifecycle is decided.

Every router (REST, AG-UI, MCP, A2A) goes through this class; stores only persist. Here:
create, the reads, cancel and the sweeper; a resume (one command, who decides it and how) and
what an approver sees are in ``core/resume.py``; loading, appending and expiring a stream in
``core/streams.py``.
Semantics: docs/architecture.md, "The lifecycle in one paragraph", and docs/http-api.md,
"Resume"; what they improve on the TypeScript reference: docs/adr/0001-continuation-log.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from pausemesh.core.approvers import Approver, caller_entries, check_approvers
from pausemesh.core.clock import SystemClock
from pausemesh.core.errors import (
    ContinuationExpiredError,
    InvalidInputError,
    InvalidTransitionError,
    StoreError,
    VersionConflictError,
)
from pausemesh.core.ids import uuid7
from pausemesh.core.model import (
    CONTINUATION_SCHEMA_VERSION,
    Continuation,
    ContinuationCancelled,
    ContinuationCreated,
    CreatedContinuation,
    PublicEvent,
    ResumeOutcome,
    public_event,
)
from pausemesh.core.ports import Clock, EventStore, Observer, TokenIssuer
from pausemesh.core.reducer import apply_event, replay
from pausemesh.core.resume import Resume, approver_view, pending_for, resume
from pausemesh.core.streams import MAX_ATTEMPTS, Streams
from pausemesh.core.tokens import KeyedTokenIssuer, RandomTokenIssuer
from pausemesh.core.validation import (
    check_aware,
    check_expected_version,
    check_id,
    check_metadata,
    check_payload,
    check_reason,
    check_routable_id,
)
from pausemesh.core.webhooks import WebhookRoutes
from pausemesh.observability.observations import ContinuationCreatedObservation
from pausemesh.observability.observer import NoopObserver, observe_safely
from pausemesh.observability.telemetry import CONTINUATIONS_CREATED, count, span

__all__ = ("DEFAULT_MAX_PAUSE_TTL_SECONDS", "MAX_PAUSE_TTL_SECONDS", "ContinuationService")

_MIN_TTL_SECONDS = 1
_MAX_TTL_SECONDS = 60 * 60 * 24 * 365
DEFAULT_MAX_PAUSE_TTL_SECONDS = 60 * 60 * 24 * 90
"""How far ahead a pause's deadline may lie (``PAUSEMESH_MAX_PAUSE_TTL_SECONDS``)."""
MAX_PAUSE_TTL_SECONDS = _MAX_TTL_SECONDS
"""The highest that cap may be set: a keyed MCP ``requestState`` outlives it (366 days)."""


class ContinuationService:
    def __init__(
        self,
        *,
        store: EventStore,
        clock: Clock | None = None,
        token_issuer: TokenIssuer | None = None,
        keyed_issuer: KeyedTokenIssuer | None = None,
        observer: Observer | None = None,
        token_ttl_seconds: int = 900,
        max_pause_ttl_seconds: int = DEFAULT_MAX_PAUSE_TTL_SECONDS,
        id_factory: Callable[[], str] | None = None,
        webhooks: WebhookRoutes | None = None,
    ) -> None:
        """``max_pause_ttl_seconds``: no deadline lies further ahead than this (the default
        TTL included); a later ``expires_at`` is refused with ``INVALID_EXPIRY``.
        ``webhooks``: the event webhooks every change owes (``core/webhooks.py``)."""
        if not _MIN_TTL_SECONDS <= max_pause_ttl_seconds <= MAX_PAUSE_TTL_SECONDS:
            msg = (
                f"max_pause_ttl_seconds must be between {_MIN_TTL_SECONDS}"
                f" and {MAX_PAUSE_TTL_SECONDS}"
            )
            raise ValueError(msg)
        if not _MIN_TTL_SECONDS <= token_ttl_seconds <= max_pause_ttl_seconds:
            msg = (
                f"token_ttl_seconds must be between {_MIN_TTL_SECONDS} and {max_pause_ttl_seconds}"
            )
            raise ValueError(msg)
        self._streams = Streams(store, clock or SystemClock(), observer or NoopObserver(), webhooks)
        self.token_issuer = token_issuer or RandomTokenIssuer()
        self.keyed_issuer = keyed_issuer
        self.token_ttl = timedelta(seconds=token_ttl_seconds)
        self.max_pause_ttl = timedelta(seconds=max_pause_ttl_seconds)
        self._new_id = id_factory or uuid7

    @property
    def store(self) -> EventStore:
        return self._streams.store

    @property
    def webhooks(self) -> WebhookRoutes | None:
        return self._streams.webhooks

    @property
    def clock(self) -> Clock:
        return self._streams.clock

    @property
    def observer(self) -> Observer:
        return self._streams.observer

    @observer.setter
    def observer(self, observer: Observer) -> None:
        # A host wraps the observer after construction (the MCP task feed's status hints).
        self._streams.observer = observer

    def check_expiry(self, expires_at: object, now: datetime) -> datetime:
        """``expires_at`` if it is a deadline a pause may have at ``now``: timezone-aware,
        in the future and at most ``max_pause_ttl`` ahead; ``INVALID_EXPIRY`` otherwise.

        Every pause's deadline passes here (REST ``expiresAt``, AG-UI, MCP and A2A pauses), so a
        practically permanent pause (``9999-12-31``) cannot be made by any door.
        """
        deadline = check_aware(expires_at, "expiresAt")
        if deadline <= now:
            msg = "expiresAt must be in the future"
            raise InvalidInputError(msg, code="INVALID_EXPIRY", field="expiresAt")
        if deadline - now > self.max_pause_ttl:
            raise self._beyond_cap()
        return deadline

    def deadline_in(self, expires_in: timedelta) -> datetime:
        """Now plus ``expires_in`` (an agent's or a tool's TTL), refused with
        ``INVALID_EXPIRY`` past ``max_pause_ttl`` as ``check_expiry`` refuses a deadline."""
        if expires_in > self.max_pause_ttl:  # before the sum, which a huge one would overflow
            raise self._beyond_cap()
        now = self.clock.now()
        return self.check_expiry(now + expires_in, now)

    def _beyond_cap(self) -> InvalidInputError:
        seconds = int(self.max_pause_ttl.total_seconds())
        msg = f"expiresAt must be at most {seconds} seconds from now (PAUSEMESH_MAX_PAUSE_TTL_SECONDS)"
        return InvalidInputError(msg, code="INVALID_EXPIRY", field="expiresAt")

    # -- create -----------------------------------------------------------------------

    async def create(
        self,
        *,
        payload: Any,
        continuation_id: str | None = None,
        correlation_id: str | None = None,
        expires_at: datetime | None = None,
        metadata: dict[str, Any] | None = None,
        owner: str | None = None,
        keyed: bool = False,
        approvers: Sequence[Approver] | None = None,
        owner_roles: frozenset[str] = frozenset(),
        allow_requester: bool = False,
    ) -> CreatedContinuation:
        """Persist a new pending continuation; the raw token is returned only here.

        ``approvers`` (``Approver`` entries): only they may decide it, never its owner unless
        ``allow_requester`` (``core/approvers.py``); none means its owner, as always.
        """
        continuation_id = check_routable_id(
            self._new_id() if continuation_id is None else continuation_id, "continuationId"
        )
        correlation_id = check_id(
            self._new_id() if correlation_id is None else correlation_id, "correlationId"
        )
        check_payload(payload)
        metadata = check_metadata({} if metadata is None else metadata)
        checked_approvers = check_approvers(approvers)
        if owner is not None:
            check_id(owner, "owner")
        now = self.clock.now()
        if expires_at is None:
            expires_at = now + self.token_ttl
        else:
            expires_at = self.check_expiry(expires_at, now)
        if keyed and self.keyed_issuer is None:
            msg = "keyed tokens need a server key (PAUSEMESH_SECRET_KEY)"
            raise RuntimeError(msg)
        issuer: TokenIssuer = (
            self.keyed_issuer if keyed and self.keyed_issuer else self.token_issuer
        )
        with span(
            "continuation.create",
            continuation_id=continuation_id,
            correlation_id=correlation_id,
            keyed=keyed,
        ):
            return await self._create(
                continuation_id,
                correlation_id,
                issuer,
                now,
                expires_at,
                payload,
                metadata,
                owner,
                approvers=checked_approvers,
                owner_roles=tuple(sorted(owner_roles)) if owner is not None else (),
                # Nothing to waive without approvers: the owner decides such a pause anyway.
                allow_requester=allow_requester is True and bool(checked_approvers),
            )

    async def _create(  # noqa: PLR0917 - the checked fields of create, in order
        self,
        continuation_id: str,
        correlation_id: str,
        issuer: TokenIssuer,
        now: datetime,
        expires_at: datetime,
        payload: Any,
        metadata: dict[str, Any],
        owner: str | None,
        *,
        approvers: tuple[Approver, ...] = (),
        owner_roles: tuple[str, ...] = (),
        allow_requester: bool = False,
    ) -> CreatedContinuation:
        issued = issuer.issue(continuation_id)
        event = ContinuationCreated(
            schema_version=CONTINUATION_SCHEMA_VERSION,
            continuation_id=continuation_id,
            version=1,
            occurred_at=now,
            correlation_id=correlation_id,
            expires_at=expires_at,
            payload=payload,
            metadata=metadata,
            resume_token_hash=issued.token_hash,
            owner=owner,
            token_key_id=issued.key_id,
            token_nonce=issued.nonce,
            approvers=approvers,
            allow_requester=allow_requester,
            owner_roles=owner_roles,
        )
        continuation = apply_event(None, event)
        await self._streams.write(continuation_id, 0, event, continuation)
        count(CONTINUATIONS_CREATED)
        observe_safely(
            self.observer,
            ContinuationCreatedObservation(
                continuation_id=continuation_id,
                observed_at=now,
                correlation_id=correlation_id,
                version=1,
            ),
        )
        return CreatedContinuation(continuation=continuation, resume_token=issued.token)

    # -- read -------------------------------------------------------------------------

    async def get(self, continuation_id: str, *, principal: str | None = None) -> Continuation:
        """Current state; a pending continuation past its deadline is expired first."""
        check_id(continuation_id)
        return await self._streams.current(self._streams.load_owned, continuation_id, principal)

    async def peek(self, continuation_id: str) -> Continuation:
        """Current state whoever owns it, expired first when due: for server-side callers that
        proved their right another way (a decision link's MAC), never for a caller's read."""
        check_id(continuation_id)
        return await self._streams.current(self._streams.load, continuation_id)

    async def history(
        self, continuation_id: str, *, principal: str | None = None
    ) -> list[PublicEvent]:
        """The raw event stream without the token hash or token-derivation data."""
        check_id(continuation_id)
        loaded = await self._streams.load_owned(continuation_id, principal)
        return [public_event(event) for event in loaded.events]

    async def created_event(
        self, continuation_id: str, *, principal: str | None = None
    ) -> ContinuationCreated:
        """The ``created`` event, for trusted in-process hosts (it holds the token hash)."""
        return (await self._streams.load_owned(check_id(continuation_id), principal)).created

    # -- transitions --------------------------------------------------------------------

    async def resume(self, command: Resume) -> ResumeOutcome:
        """Resume exactly once, as ``command.by`` decides (``core/resume.py``): an exact retry
        (same idempotency key, canonically equal payload) returns the stored outcome unchanged.

        The outcome names the thread the decision continues (None: no run is owed), so a host
        continues that thread at once and only then (an exact retry reports it again); its
        ``continuation`` is the envelope.
        """
        return await resume(command, streams=self._streams, keyed_issuer=self.keyed_issuer)

    async def get_for_approver(
        self, continuation_id: str, *, principal: str, roles: frozenset[str] = frozenset()
    ) -> Continuation:
        """The continuation as one of its approvers sees it (404 for anyone else; its owner
        gets ``NotAnApproverError`` unless allowed and named)."""
        return await approver_view(
            self._streams, continuation_id, principal, caller_entries(principal, roles)
        )

    async def pending_approvals(
        self,
        *,
        principal: str,
        roles: frozenset[str] = frozenset(),
        before: str | None = None,
        limit: int = 50,
    ) -> list[Continuation]:
        """Pending continuations ``principal`` may decide, newest first, after ``before`` (a
        continuation id: the previous page's last), at most ``limit``. Its own requests are
        not among them (unless a pause allows the requester)."""
        return await pending_for(
            self._streams, principal, caller_entries(principal, roles), before=before, limit=limit
        )

    async def pending_operation_waits(
        self, operation_id: str, *, before: str | None = None, limit: int = 50
    ) -> list[Continuation]:
        """Pending continuations that name ``Approver.operation(operation_id)``, newest first:
        what an ``OperationWatcher`` may decide once the operation's outcome is known."""
        approving = (Approver.operation(operation_id),)
        return await pending_for(self._streams, None, approving, before=before, limit=limit)

    async def cancel(
        self,
        *,
        continuation_id: str,
        reason: str | None = None,
        expected_version: int | None = None,
        principal: str | None = None,
    ) -> Continuation:
        """Cancel a pending continuation; an exact retry returns the stored envelope."""
        check_id(continuation_id)
        reason = check_reason(reason)
        expected_version = check_expected_version(expected_version)
        with span("continuation.cancel", continuation_id=continuation_id) as current:
            state = await self._cancel(continuation_id, reason, expected_version, principal)
            current.set_attribute("pausemesh.version", state.version)
            return state

    async def _cancel(
        self,
        continuation_id: str,
        reason: str | None,
        expected_version: int | None,
        principal: str | None,
    ) -> Continuation:
        for _ in range(MAX_ATTEMPTS):
            state = (await self._streams.load_owned(continuation_id, principal)).state
            if state.status == "pending":
                try:
                    state = await self._streams.expire_if_due(state)
                except VersionConflictError:
                    continue
            if state.status == "cancelled":
                stored_reason = state.reason if isinstance(state.reason, str) else None
                if stored_reason != reason:
                    raise InvalidTransitionError(
                        continuation_id, "continuation.cancelled", "cancelled"
                    )
                if expected_version is not None and expected_version != state.version - 1:
                    raise VersionConflictError(continuation_id, expected_version, state.version - 1)
                return state
            if state.status == "expired":
                raise ContinuationExpiredError(continuation_id)
            if state.status == "resumed":
                raise InvalidTransitionError(continuation_id, "continuation.cancelled", "resumed")
            if expected_version is not None and expected_version != state.version:
                raise VersionConflictError(continuation_id, expected_version, state.version)
            event = ContinuationCancelled(
                schema_version=CONTINUATION_SCHEMA_VERSION,
                continuation_id=continuation_id,
                version=state.version + 1,
                occurred_at=self.clock.now(),
                reason=reason,
            )
            try:
                return await self._streams.append(state, event)
            except VersionConflictError:
                continue
        msg = "cancel did not settle; the store keeps changing under it"
        raise StoreError(msg, code="STORE_CONTENTION")

    async def expire_due(self, *, limit: int = 100) -> int:
        """Materialize expiry for pending continuations past their deadline (the sweeper)."""
        expired = 0
        for continuation_id in await self.store.list_due(self.clock.now(), limit):
            state = replay(await self.store.load(continuation_id))
            if state is None:
                continue
            try:
                if state.is_pending and self.clock.now() < state.expires_at:
                    # Not its deadline: one of its timers (core/timers.py) is due.
                    await self._streams.fire_timers(state)
                    continue
                swept = await self._streams.expire_if_due(state, by="sweeper")
                if swept.status == "expired" and state.is_pending:
                    expired += 1
            except VersionConflictError:
                continue  # someone else settled it first; that is fine
        return expired
