"""Who is calling: a principal id and the roles the identity provider gave it.

A principal resolver returns either a plain principal id (``str``) or an ``Identity`` when it
knows roles too (JWT role claims, API keys created with ``--role``). Roles decide who may answer
a pause that names ``Approver.role(...)`` approvers and who may inspect or execute gateway jobs.

Namespaces. Principal ids starting with a reserved prefix (``RESERVED_PRINCIPAL_PREFIXES``:
``role:``, ``operation:``, ``key:``, in any letter case) are refused whichever resolver named
them (``caller_identity``, the one check, called where every binding resolves its caller).
``role:`` and ``operation:`` read as other kinds of approver entries; ``key:`` is the API keys'
own namespace: an API key's identity (``namespace="key"``) is called ``key:<name>``, so no JWT
subject or custom resolver can name an API key's principal, and no key a person's.
"""

from __future__ import annotations

from typing import Final, Literal

import msgspec

from pausemesh.core.approvers import OPERATION_PREFIX, ROLE_PREFIX

__all__ = (
    "KEY_NAMESPACE",
    "RESERVED_PRINCIPAL_PREFIXES",
    "Identity",
    "caller_identity",
    "reserved_prefix",
)

KEY_NAMESPACE: Final = "key:"
RESERVED_PRINCIPAL_PREFIXES: Final = (ROLE_PREFIX, OPERATION_PREFIX, KEY_NAMESPACE)


class Identity(msgspec.Struct, frozen=True):
    principal: str
    roles: frozenset[str] = frozenset()
    # "key": an API key named it; the caller is then ``key:<principal>`` (``caller_identity``).
    namespace: Literal["key"] | None = None

    def has_role(self, role: str) -> bool:
        return role in self.roles


def reserved_prefix(principal: str) -> str | None:
    """The reserved prefix ``principal`` starts with (any letter case), or None."""
    folded = principal.casefold()
    for prefix in RESERVED_PRINCIPAL_PREFIXES:
        if folded.startswith(prefix):
            return prefix
    return None


def caller_identity(resolved: Identity) -> Identity | None:
    """The caller a resolver's ``Identity`` names, in its namespace; None when its principal id
    is empty or reserved (the caller is then not authenticated)."""
    principal = resolved.principal
    if not isinstance(principal, str) or not principal or reserved_prefix(principal) is not None:
        return None
    if resolved.namespace == "key":
        return Identity(principal=KEY_NAMESPACE + principal, roles=resolved.roles)
    return resolved
