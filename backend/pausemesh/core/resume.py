"""One resume command: which pause, what answer, and who decides it and how.

Every resume is one value given to ``ContinuationService.resume``::

    outcome = await service.resume(
        Resume(continuation_id=cid, idempotency_key=key, payload=answer, by=TokenHolder(token))
    )

``by`` names who decides and how they are let in:

- ``TokenHolder(token, principal=, roles=)``: whoever holds the raw resume token (a REST caller,
  an e-mail link); as the pause's owner unless it names approvers (then the four-eyes rules).
- ``TrustedHost(principal=, roles=)``: an in-process host that already authorized ``principal``
  (the AG-UI run host, the MCP and A2A routers); the keyed token is re-derived from the
  ``created`` event and still compared. A decision from inside the conversation owes no run.
- ``NamedApprover(principal, roles=)``: one of the approvers the pause names, by principal or
  role (the approvals inbox); never its owner unless the pause allows the requester.
- ``OperationWatcher(operation_id)``: whoever learned the outcome of an operation the pause
  names (``Approver.operation``), a trusted in-process watcher, not a person.

Every kind records who decided (``resolved_by``: the principal, or ``operation:<id>``). All but
``TrustedHost`` decide from outside the conversation: on a pause an in-process host issued
(keyed token), the decision records the thread it continues, which is then owed a run
(``ResumeOutcome.continues_thread``).

The service always answers with the ``ResumeOutcome``: the envelope is its ``continuation``.

Below the values, the path every resume takes (``resume``): the checks, the load as the decider
may see it, the token, the four-eyes rules, expiry, then the exactly-once append or the stored
outcome of an exact retry; and what an approver sees (``approver_view``, ``pending_for``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from pausemesh.core.approvers import Approver, caller_entries, is_requester, may_decide, names_any
from pausemesh.core.canonical import canonical_json
from pausemesh.core.default_outcomes import EXPIRY_DECIDER
from pausemesh.core.errors import (
    ContinuationCancelledError,
    ContinuationExpiredError,
    ContinuationNotFoundError,
    IdempotencyConflictError,
    InvalidInputError,
    NotAnApproverError,
    PauseMeshError,
    StoreError,
    TokenAlreadyUsedError,
    TokenMismatchError,
    VersionConflictError,
)
from pausemesh.core.model import (
    CONTINUATION_SCHEMA_VERSION,
    Continuation,
    ContinuationCreated,
    ContinuationEscalated,
    ContinuationEvent,
    ContinuationResumed,
    ResumeOutcome,
)
from pausemesh.core.schema import SchemaValidatorCache
from pausemesh.core.streams import MAX_ATTEMPTS, LoadedStream, Streams
from pausemesh.core.tokens import KeyedTokenIssuer, tokens_match
from pausemesh.core.validation import check_id, check_idempotency_key, check_payload
from pausemesh.observability.observations import ContinuationRejectedObservation
from pausemesh.observability.observer import observe_safely
from pausemesh.observability.telemetry import RESUMES, count, span

__all__ = (
    "Decider",
    "NamedApprover",
    "OperationWatcher",
    "Resume",
    "TokenHolder",
    "TrustedHost",
    "approver_view",
    "check_answer",
    "pending_for",
    "resume",
)


# The values are msgspec Structs, as the core's other values: built on every resume, where a
# frozen dataclass costs several times more.


class TokenHolder(msgspec.Struct, frozen=True):
    """Whoever holds the raw resume token, acting as ``principal`` (None: no identity)."""

    token: str
    principal: str | None = None
    roles: frozenset[str] = frozenset()

    def __repr__(self) -> str:
        # The token is a credential: never in a repr, so never in a log line.
        return f"TokenHolder(principal={self.principal!r}, roles={self.roles!r})"


class TrustedHost(msgspec.Struct, frozen=True):
    """An in-process host that already authorized ``principal``; the keyed token is
    re-derived server-side (a random-token pause never matches)."""

    principal: str | None = None
    roles: frozenset[str] = frozenset()


class NamedApprover(msgspec.Struct, frozen=True):
    """``principal`` (with ``roles``) deciding as one of the pause's approvers.

    Its owner gets ``NotAnApproverError`` (four eyes are two people) unless the pause allows
    the requester and names them; anyone else ``ContinuationNotFoundError``."""

    principal: str
    roles: frozenset[str] = frozenset()


class OperationWatcher(msgspec.Struct, frozen=True):
    """Whoever learned the outcome of ``operation_id``, deciding a pause that names
    ``Approver.operation(operation_id)``; a pause that does not name it does not exist for it."""

    operation_id: str


Decider = TokenHolder | TrustedHost | NamedApprover | OperationWatcher
"""Who decides a pause, and how they are let in."""


class Resume(msgspec.Struct, frozen=True, kw_only=True):
    """Resume ``continuation_id`` with ``payload`` exactly once; ``idempotency_key`` makes an
    exact retry return the stored outcome unchanged."""

    continuation_id: str
    idempotency_key: str
    payload: Any
    by: Decider


_NOT_A_DECIDER = (
    "a resume is decided by a TokenHolder, TrustedHost, NamedApprover or OperationWatcher, not {}"
)


class _Terms(msgspec.Struct, frozen=True):
    """What a decider means to the resume path."""

    token: str | None
    """The token to compare; None: re-derive the keyed one from the ``created`` event."""
    principal: str | None
    roles: frozenset[str]
    approving: tuple[Approver, ...] | None
    """Set: load as an approver (the entries naming the caller); None: as the owner."""
    resolved_by: str | None
    out_of_band: bool
    """Decided from outside the conversation: the decision continues the thread (keyed)."""
    checks_schema: bool = True
    """Check the answer against the pause's ``responseSchema`` here (REST and approvals); a
    trusted host (AG-UI, A2A, MCP) or an operation's watcher checked it in its own words."""


def _terms_of(by: Decider) -> _Terms:
    """The terms of a resume ``by`` this decider (``TypeError`` for anything else)."""
    match by:
        case TokenHolder(token=token, principal=principal, roles=roles):
            return _Terms(token, principal, roles, None, principal, out_of_band=True)
        case TrustedHost(principal=principal, roles=roles):
            return _Terms(
                None, principal, roles, None, principal, out_of_band=False, checks_schema=False
            )
        case NamedApprover(principal=principal, roles=roles):
            entries = caller_entries(principal, roles)
            return _Terms(None, principal, roles, entries, principal, out_of_band=True)
        case OperationWatcher(operation_id=operation_id):
            approver = Approver.operation(operation_id)
            return _Terms(
                None,
                None,
                frozenset(),
                (approver,),
                approver.text,
                out_of_band=True,
                checks_schema=False,
            )
    raise TypeError(_NOT_A_DECIDER.format(type(by).__name__))


# -- the path of a resume -----------------------------------------------------------------


async def resume(
    command: Resume, *, streams: Streams, keyed_issuer: KeyedTokenIssuer | None
) -> ResumeOutcome:
    """Resume exactly once (``ContinuationService.resume``); every refusal is counted by code."""
    terms = _terms_of(command.by)
    continuation_id = command.continuation_id
    with span(
        "continuation.resume", continuation_id=continuation_id, trusted=terms.token is None
    ) as current:
        try:
            outcome = await _resume(
                streams,
                keyed_issuer,
                continuation_id,
                command.idempotency_key,
                command.payload,
                terms,
            )
        except PauseMeshError as error:
            count(RESUMES, error.code)
            raise
        count(RESUMES, "OK")
        current.set_attribute("pausemesh.version", outcome.continuation.version)
        return outcome


async def _resume(  # noqa: PLR0917 - the command's fields, unpacked once by resume
    streams: Streams,
    keyed_issuer: KeyedTokenIssuer | None,
    continuation_id: str,
    idempotency_key: str,
    payload: Any,
    terms: _Terms,
) -> ResumeOutcome:
    """``terms.token`` None: re-derive the keyed token from the ``created`` event loaded here
    (one load, not one to find the token and one to resume)."""
    check_id(continuation_id)
    check_idempotency_key(idempotency_key)
    check_payload(payload)
    for _ in range(MAX_ATTEMPTS):
        if terms.approving is None:
            loaded = await streams.load_owned(continuation_id, terms.principal)
        else:
            loaded = await _load_as_approver(
                streams, continuation_id, terms.principal, terms.approving
            )
        events, created, state = loaded.events, loaded.created, loaded.state
        token = _derived_token(keyed_issuer, created) if terms.token is None else terms.token
        # Authenticate before revealing anything about the state.
        if not tokens_match(token, created.resume_token_hash):
            observe_safely(
                streams.observer,
                ContinuationRejectedObservation(
                    continuation_id=continuation_id,
                    observed_at=streams.clock.now(),
                    code="TOKEN_MISMATCH",
                ),
            )
            raise TokenMismatchError(continuation_id)
        # An approver was let in by the load; the owner (or whoever holds the token) meets the
        # approvers here, after the token and before anything is said.
        if (
            terms.approving is None
            and created.approvers
            and not may_decide(
                approvers_of(events),
                owner=created.owner,
                principal=terms.principal,
                roles=terms.roles,
                allow_requester=created.allow_requester,
            )
        ):
            raise NotAnApproverError(continuation_id)
        if state.status == "pending":
            try:
                state = await streams.expire_if_due(state)
            except VersionConflictError:
                continue
        if state.status != "pending":
            settled = _settled(state, idempotency_key, payload)
            # An exact retry: the thread the stored decision continues, as the first time.
            return ResumeOutcome(continuation=settled, continues_thread=_continues(events))
        if terms.checks_schema:
            check_answer(state.payload, payload)
        event = ContinuationResumed(
            schema_version=CONTINUATION_SCHEMA_VERSION,
            continuation_id=continuation_id,
            version=state.version + 1,
            occurred_at=streams.clock.now(),
            idempotency_key=idempotency_key,
            resume_payload=payload,
            resolved_by=terms.resolved_by,
            continues_thread=(
                created.correlation_id
                if terms.out_of_band and created.token_key_id is not None
                else None
            ),
        )
        try:
            resumed = await streams.append(state, event)
        except VersionConflictError:
            # Lost a race: reload and report what won (replay, used, cancelled, expired).
            continue
        return ResumeOutcome(continuation=resumed, continues_thread=event.continues_thread)
    msg = "resume did not settle; the store keeps changing under it"
    raise StoreError(msg, code="STORE_CONTENTION")


_SCHEMAS = SchemaValidatorCache(256)


def check_answer(pause: Any, answer: Any) -> None:
    """The one schema rule: an answer to a pause whose payload carries a ``responseSchema``
    must match it (``INVALID_PAYLOAD``, nothing written). A schema that does not compile was
    never enforced (the pause was made without the check): the answer is not held to it."""
    if not isinstance(pause, dict):
        return
    schema = pause.get("responseSchema", pause.get("response_schema"))
    if not isinstance(schema, dict):
        return
    try:
        valid = _SCHEMAS.is_valid(schema, answer)
    except InvalidInputError:
        return
    if not valid:
        msg = "payload does not match the pause's responseSchema"
        raise InvalidInputError(msg, code="INVALID_PAYLOAD", field="payload")


def _settled(state: Continuation, idempotency_key: str, payload: Any) -> Continuation:
    """A settled continuation's answer to a resume: the stored envelope for an exact retry,
    otherwise the error that says what settled it."""
    if state.status == "resumed":
        if state.resolved_by == EXPIRY_DECIDER and state.idempotency_key != idempotency_key:
            # Its default outcome, at the deadline: too late, as for a lapsed pause.
            raise ContinuationExpiredError(state.continuation_id)
        if state.idempotency_key != idempotency_key:
            raise TokenAlreadyUsedError(state.continuation_id)
        # Canonical text only here: a first resume never needs it (checked above).
        if canonical_json(state.resume_payload) != canonical_json(payload):
            raise IdempotencyConflictError(state.continuation_id)
        return state
    if state.status == "cancelled":
        raise ContinuationCancelledError(state.continuation_id)
    raise ContinuationExpiredError(state.continuation_id)


def approvers_of(events: Sequence[ContinuationEvent]) -> tuple[Approver, ...]:
    """Who may decide the pause now: the approvers it was asked with and those an escalation
    added (``core/timers.py``)."""
    out: list[Approver] = []
    for event in events:
        if isinstance(event, ContinuationCreated | ContinuationEscalated):
            out += [a for a in event.approvers if a not in out]
    return tuple(out)


def _derived_token(keyed_issuer: KeyedTokenIssuer | None, created: ContinuationCreated) -> str:
    """The keyed token of ``created``; "" (which never matches) for a random-token one."""
    if keyed_issuer is None or created.token_key_id is None or created.token_nonce is None:
        return ""
    return keyed_issuer.derive(created.continuation_id, created.token_key_id, created.token_nonce)


def _continues(events: Sequence[ContinuationEvent]) -> str | None:
    """The thread the stored decision among ``events`` continues (None: none, or no decision)."""
    for event in events:
        if isinstance(event, ContinuationResumed):
            return event.continues_thread
    return None


# -- what an approver sees (four-eyes approvals) -------------------------------------------


async def _load_as_approver(
    streams: Streams,
    continuation_id: str,
    principal: str | None,
    approving: tuple[Approver, ...],
) -> LoadedStream:
    """The stream as seen by the caller named by ``approving`` (its approver entries): only
    those who may decide it see it.

    Its owner (who knows the pause exists) is told ``NotAnApproverError`` unless the pause
    allows the requester and names them; anyone else who may not decide it is told it does
    not exist."""
    loaded = await streams.load(continuation_id)
    created = loaded.created
    approvers = approvers_of(loaded.events)
    if not approvers:
        raise ContinuationNotFoundError(continuation_id)
    requester = is_requester(created.owner, principal)
    if requester and not created.allow_requester:
        raise NotAnApproverError(continuation_id)
    if not names_any(approvers, approving):
        if requester:
            raise NotAnApproverError(continuation_id)
        raise ContinuationNotFoundError(continuation_id)
    return loaded


async def approver_view(
    streams: Streams,
    continuation_id: str,
    principal: str | None,
    approving: tuple[Approver, ...],
) -> Continuation:
    """The continuation as the caller named by ``approving`` sees it, expired first if due."""
    check_id(continuation_id)
    return await streams.current(_load_as_approver, streams, continuation_id, principal, approving)


async def pending_for(
    streams: Streams,
    principal: str | None,
    approving: tuple[Approver, ...],
    *,
    before: str | None,
    limit: int,
) -> list[Continuation]:
    """Pending continuations the caller named by ``approving`` may decide, newest first.

    A short list means there are no more: a candidate dropped as it is read (its deadline
    had passed, so the read expired it; or the caller may not decide it) is replaced by
    reading on in the index."""
    out: list[Continuation] = []
    while len(out) < limit:
        wanted = limit - len(out)
        ids = await streams.store.pending_for_approvers(approving, before=before, limit=wanted)
        for continuation_id in ids:
            before = continuation_id
            try:
                state = await approver_view(streams, continuation_id, principal, approving)
            except (ContinuationNotFoundError, NotAnApproverError):
                continue  # the index's candidates are checked against the typed entries
            if state.is_pending:
                out.append(state)
        if len(ids) < wanted:
            break
    return out
