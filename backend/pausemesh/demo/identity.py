"""The demo's people, for a loopback demo without an identity provider.

``pausemesh demo`` on a loopback address with no ``PAUSEMESH_PRINCIPAL_RESOLVER`` uses this
resolver, so the page can switch between a traveller and a manager (four-eyes approvals): the
cookie ``pausemesh_demo_user`` names who is calling, ``traveller`` (also when absent),
``manager`` (with the role ``manager``) or ``director`` (role ``director``: a manager's
approval escalates to them). It is never used with a real resolver or on a non-loopback bind: a cookie anyone can set is no identity.
"""

from __future__ import annotations

from typing import Any, Final

from pausemesh.core.errors import UnauthenticatedError
from pausemesh.core.identity import Identity

__all__ = ("DEMO_PEOPLE", "DEMO_USER_COOKIE", "demo_identity")

DEMO_USER_COOKIE: Final = "pausemesh_demo_user"
DEMO_PEOPLE: Final[dict[str, Identity]] = {
    "traveller": Identity("traveller"),
    "manager": Identity("manager", roles=frozenset({"manager"})),
    # Asked too when no manager decided a booking in time (an escalation).
    "director": Identity("director", roles=frozenset({"director"})),
}
_DEFAULT: Final = "traveller"


async def demo_identity(request: Any) -> Identity:
    """The demo person the request's cookie names (Litestar's or Starlette's request)."""
    cookies = getattr(request, "cookies", None) or {}
    name = cookies.get(DEMO_USER_COOKIE) or _DEFAULT
    person = DEMO_PEOPLE.get(name)
    if person is None:
        raise UnauthenticatedError
    return person
