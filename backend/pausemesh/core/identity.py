"""Who is calling: a principal id and the roles the identity provider gave it.

A principal resolver returns either a plain principal id (``str``) or an ``Identity`` when it
knows roles too (JWT role claims, API keys created with ``--role``). Roles decide who may answer
a pause that names ``approvers`` (``role:NAME``) and who may inspect or execute gateway jobs.
"""

from __future__ import annotations

import msgspec

__all__ = ("Identity",)


class Identity(msgspec.Struct, frozen=True):
    principal: str
    roles: frozenset[str] = frozenset()

    def has_role(self, role: str) -> bool:
        return role in self.roles
