"""``GET /demo/people``: whether the page may offer its two people, and who is calling.

The demo page shows a traveller/manager switcher only when the server really identifies
callers by the demo cookie (``demo/identity.py``: loopback, no identity provider). With a real
resolver, or none, this answers 404 and the page shows no switcher.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, get
from litestar.exceptions import NotFoundException

from pausemesh.demo.identity import DEMO_PEOPLE, demo_identity
from pausemesh.web.plugin import PauseMeshPlugin

__all__ = ("PEOPLE_PATH", "demo_people")

PEOPLE_PATH = "/demo/people"
_NAMES = {"traveller": "Traveller", "manager": "Manager", "director": "Director"}


def _demo_identity_active(plugin: PauseMeshPlugin) -> bool:
    resolver: object = plugin.config.principal_resolver
    return resolver is demo_identity


@get(PEOPLE_PATH, include_in_schema=False, cache_control=None)
async def demo_people(request: Request[Any, Any, Any]) -> dict[str, Any]:
    if not _demo_identity_active(request.app.plugins.get(PauseMeshPlugin)):
        raise NotFoundException
    person = await demo_identity(request)
    return {
        "person": person.principal,
        "people": [
            {"id": key, "name": _NAMES.get(key, key), "roles": sorted(identity.roles)}
            for key, identity in DEMO_PEOPLE.items()
        ],
    }
