"""The approvals inbox narrowed by tag, agent, who asked and age, in-process on SQLite.

The app over ``httpx.ASGITransport`` with a header principal resolver; pauses are asked
through the service with the metadata an agent's ``PauseRequest(tags=...)`` gives them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from asgi_lifespan import LifespanManager
from litestar import Litestar

from pausemesh.core.approvers import Approver
from pausemesh.core.timers import timer_fields
from pausemesh.settings import Settings
from pausemesh.web import PauseMeshConfig, PauseMeshPlugin
from tests.support.agui import header_identity
from tests.support.asgi import asgi
from tests.support.rest import assert_problem

MANAGER = {"X-Principal": "boss", "X-Roles": "manager"}


@pytest.fixture(name="inbox")
async def inbox_fixture(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, str]]]:
    config = PauseMeshConfig(
        settings=Settings(database_path=str(tmp_path / "p.db")), principal_resolver=header_identity
    )
    plugin = PauseMeshPlugin(config)
    app = Litestar(plugins=[plugin])
    async with LifespanManager(asgi(app), startup_timeout=60, shutdown_timeout=60):
        service = plugin.runtime.service
        ids: dict[str, str] = {}
        for name, owner, inbox in [
            ("trip", "alice", {"tags": ["travel"], "agent": "travel-desk"}),
            ("laptop", "bob", {"tags": ["hardware"], "agent": "it-desk"}),
            ("hotel", "alice", {"tags": ["travel", "hotel"], "agent": "travel-desk"}),
            ("plain", "carol", None),
        ]:
            created = await service.create(
                payload={"kind": "input", "message": f"Approve the {name}?"},
                owner=owner,
                approvers=[Approver.role("manager")],
                metadata={} if inbox is None else {"inbox": inbox},
            )
            ids[name] = created.continuation.continuation_id
        transport = httpx.ASGITransport(asgi(app))
        async with httpx.AsyncClient(
            transport=transport, base_url="http://localhost", headers=MANAGER
        ) as client:
            yield client, ids


async def listed(client: httpx.AsyncClient, **params: str | int) -> list[str]:
    response = await client.get("/v1/approvals", params=params)
    assert response.status_code == 200, response.text
    return [a["continuationId"] for a in response.json()["approvals"]]


async def test_the_inbox_narrows_by_tag_agent_asker_and_age(
    inbox: tuple[httpx.AsyncClient, dict[str, str]],
) -> None:
    client, ids = inbox
    newest_first = [ids["plain"], ids["hotel"], ids["laptop"], ids["trip"]]
    assert await listed(client) == newest_first
    assert await listed(client, tag="travel") == [ids["hotel"], ids["trip"]]
    assert await listed(client, tag="hotel") == [ids["hotel"]]
    assert await listed(client, agent="it-desk") == [ids["laptop"]]
    assert await listed(client, askedBy="alice") == [ids["hotel"], ids["trip"]]
    assert await listed(client, askedBy="alice", tag="hardware") == []
    assert await listed(client, olderThanSeconds=0) == newest_first
    assert await listed(client, olderThanSeconds=86_400) == []
    assert await listed(client, newerThanSeconds=86_400, tag="travel") == [
        ids["hotel"],
        ids["trip"],
    ]
    items = (await client.get("/v1/approvals", params={"tag": "hotel"})).json()["approvals"]
    assert (items[0]["tags"], items[0]["agent"]) == (["travel", "hotel"], "travel-desk")


async def test_a_filtered_page_hands_on_a_cursor_to_the_rest(
    inbox: tuple[httpx.AsyncClient, dict[str, str]],
) -> None:
    client, ids = inbox
    first = (await client.get("/v1/approvals", params={"tag": "travel", "limit": 1})).json()
    assert [a["continuationId"] for a in first["approvals"]] == [ids["hotel"]]
    rest = await listed(client, tag="travel", limit=1, cursor=first["nextCursor"])
    assert rest == [ids["trip"]]


async def test_bad_filters_are_refused_with_a_problem(
    inbox: tuple[httpx.AsyncClient, dict[str, str]],
) -> None:
    client, _ = inbox
    for params in ({"olderThanSeconds": "-1"}, {"newerThanSeconds": "soon"}, {"tag": ""}):
        assert_problem(await client.get("/v1/approvals", params=params), 400, "INVALID_REQUEST")


async def test_each_item_shows_its_reminder_and_escalation_before_they_fire(
    tmp_path: Path,
) -> None:
    config = PauseMeshConfig(
        settings=Settings(database_path=str(tmp_path / "p.db")), principal_resolver=header_identity
    )
    plugin = PauseMeshPlugin(config)
    app = Litestar(plugins=[plugin])
    async with LifespanManager(asgi(app), startup_timeout=60, shutdown_timeout=60):
        service = plugin.runtime.service
        now = service.clock.now()
        timers = timer_fields(
            now + timedelta(minutes=2), now + timedelta(minutes=5), [Approver.role("director")]
        )
        for inbox in ({"tags": ["travel"], **timers}, {"tags": ["plain"]}):
            await service.create(
                payload={"kind": "input", "message": "Approve?"},
                owner="alice",
                approvers=[Approver.role("manager")],
                metadata={"inbox": inbox},
            )
        transport = httpx.ASGITransport(asgi(app))
        async with httpx.AsyncClient(
            transport=transport, base_url="http://localhost", headers=MANAGER
        ) as client:
            [timed] = (await client.get("/v1/approvals", params={"tag": "travel"})).json()[
                "approvals"
            ]
            [plain] = (await client.get("/v1/approvals", params={"tag": "plain"})).json()[
                "approvals"
            ]
    # Due, not yet fired: no firedAt (the browser test sees them fire).
    assert timed["reminder"] == {"dueAt": timers["remindAt"].replace("+00:00", "Z")}
    assert timed["escalation"] == {
        "dueAt": timers["escalateAt"].replace("+00:00", "Z"),
        "to": ["role:director"],
    }
    assert "reminder" not in plain
    assert "escalation" not in plain
