"""Who may decide a pause (four-eyes approvals).

A pause may name ``approvers``: principal ids and ``role:NAME`` entries (roles come from the
resolved ``Identity``). When it names none, its owner decides it, as always. When it names
some, only they may decide it: the owner too only if listed (by id or by a role it has).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pausemesh.core.errors import InvalidInputError
from pausemesh.core.validation import check_id

__all__ = (
    "MAX_APPROVERS",
    "OPERATION_PREFIX",
    "ROLE_PREFIX",
    "approver_keys",
    "check_approvers",
    "may_decide",
    "operation_approver",
)

ROLE_PREFIX = "role:"
OPERATION_PREFIX = "operation:"
MAX_APPROVERS = 32


def check_approvers(approvers: Sequence[str] | None) -> tuple[str, ...]:
    """Approvers as stored: each a valid id (``role:`` followed by a name), no duplicates."""
    if approvers is None:
        return ()
    if isinstance(approvers, str) or not isinstance(approvers, Sequence):
        msg = "approvers must be a list of principal ids and role:NAME entries"
        raise InvalidInputError(msg, code="INVALID_APPROVERS", field="approvers")
    if len(approvers) > MAX_APPROVERS:
        msg = f"at most {MAX_APPROVERS} approvers"
        raise InvalidInputError(msg, code="INVALID_APPROVERS", field="approvers")
    out: list[str] = []
    for approver in approvers:
        if not isinstance(approver, str) or approver == ROLE_PREFIX:
            msg = "each approver is a principal id or role:NAME"
            raise InvalidInputError(msg, code="INVALID_APPROVERS", field="approvers")
        check_id(approver, "approvers")
        if approver not in out:
            out.append(approver)
    return tuple(out)


def approver_keys(principal: str | None, roles: Iterable[str] = ()) -> tuple[str, ...]:
    """The approver entries that name this caller: its id and ``role:NAME`` for each role."""
    if principal is None:
        return ()
    return (principal, *(f"{ROLE_PREFIX}{role}" for role in sorted(set(roles))))


def may_decide(
    approvers: Sequence[str], *, owner: str | None, principal: str | None, roles: Iterable[str] = ()
) -> bool:
    """Whether ``principal`` (with ``roles``) may decide a pause owned by ``owner``."""
    if not approvers:
        return principal == owner
    return any(key in approvers for key in approver_keys(principal, roles))


def operation_approver(operation_id: str) -> str:
    """The approver of a pause that waits for an operation's unknown outcome: no person, but
    whoever learns the outcome (a status lookup, an operator) decides it under this name."""
    return f"{OPERATION_PREFIX}{operation_id}"
