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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pausemesh.core.approvers import Approver, caller_entries

__all__ = (
    "Decider",
    "NamedApprover",
    "OperationWatcher",
    "Resume",
    "TokenHolder",
    "TrustedHost",
)


@dataclass(frozen=True, slots=True)
class TokenHolder:
    """Whoever holds the raw resume token, acting as ``principal`` (None: no identity)."""

    token: str = field(repr=False)  # a credential: never in a repr or a log line
    principal: str | None = None
    roles: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class TrustedHost:
    """An in-process host that already authorized ``principal``; the keyed token is
    re-derived server-side (a random-token pause never matches)."""

    principal: str | None = None
    roles: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class NamedApprover:
    """``principal`` (with ``roles``) deciding as one of the pause's approvers.

    Its owner gets ``NotAnApproverError`` (four eyes are two people) unless the pause allows
    the requester and names them; anyone else ``ContinuationNotFoundError``."""

    principal: str
    roles: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class OperationWatcher:
    """Whoever learned the outcome of ``operation_id``, deciding a pause that names
    ``Approver.operation(operation_id)``; a pause that does not name it does not exist for it."""

    operation_id: str


Decider = TokenHolder | TrustedHost | NamedApprover | OperationWatcher
"""Who decides a pause, and how they are let in."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Resume:
    """Resume ``continuation_id`` with ``payload`` exactly once; ``idempotency_key`` makes an
    exact retry return the stored outcome unchanged."""

    continuation_id: str
    idempotency_key: str
    payload: Any
    by: Decider


_NOT_A_DECIDER = (
    "a resume is decided by a TokenHolder, TrustedHost, NamedApprover or OperationWatcher, not {}"
)


class Terms(NamedTuple):
    """What a decider means to the resume path (``ContinuationService.resume``)."""

    token: str | None
    """The token to compare; None: re-derive the keyed one from the ``created`` event."""
    principal: str | None
    roles: frozenset[str]
    approving: tuple[Approver, ...] | None
    """Set: load as an approver (the entries naming the caller); None: as the owner."""
    resolved_by: str | None
    out_of_band: bool
    """Decided from outside the conversation: the decision continues the thread (keyed)."""


def terms_of(by: Decider) -> Terms:
    """The terms of a resume ``by`` this decider (``TypeError`` for anything else)."""
    match by:
        case TokenHolder(token=token, principal=principal, roles=roles):
            return Terms(token, principal, roles, None, principal, out_of_band=True)
        case TrustedHost(principal=principal, roles=roles):
            return Terms(None, principal, roles, None, principal, out_of_band=False)
        case NamedApprover(principal=principal, roles=roles):
            entries = caller_entries(principal, roles)
            return Terms(None, principal, roles, entries, principal, out_of_band=True)
        case OperationWatcher(operation_id=operation_id):
            approver = Approver.operation(operation_id)
            return Terms(None, None, frozenset(), (approver,), approver.text, out_of_band=True)
    raise TypeError(_NOT_A_DECIDER.format(type(by).__name__))
