"""The thread list, rename and erase on the native Starlette binding behave as on Litestar.

Both bindings run in-process over a real SQLite file with the same agent and the same
principal resolver; every exchange is made against each, and the answers must agree.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager
from litestar import Litestar
from starlette.applications import Starlette

from pausemesh.agui.agent import AgentOutput, PauseRequest, RunContext
from pausemesh.settings import Settings
from pausemesh.web import PauseMeshConfig, PauseMeshPlugin
from pausemesh.web.agui_starlette import StarletteAgui
from tests.support.agui import header_principal

ALICE = {"x-principal": "alice"}
BOB = {"x-principal": "bob"}


async def ask(_: RunContext) -> AsyncIterator[AgentOutput]:
    yield PauseRequest(message="Which one?")


def starlette_host(database: Path) -> Any:
    pausemesh = StarletteAgui(
        Settings(database_path=str(database)), agent=ask, principal_resolver=header_principal
    )
    return Starlette(routes=pausemesh.routes(), lifespan=pausemesh.lifespan)


def litestar_host(database: Path) -> Any:
    config = PauseMeshConfig(
        settings=Settings(database_path=str(database)),
        agent=ask,
        principal_resolver=header_principal,
    )
    return Litestar(plugins=[PauseMeshPlugin(config)])


HOSTS = pytest.mark.parametrize(
    "make_host", [starlette_host, litestar_host], ids=["starlette", "litestar"]
)


@asynccontextmanager
async def client_for(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with (
        LifespanManager(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost"
        ) as client,
    ):
        yield client


async def start_thread(client: httpx.AsyncClient, thread_id: str, text: str) -> None:
    body = {
        "threadId": thread_id,
        "runId": f"run-{thread_id}",
        "messages": [{"id": f"u-{thread_id}", "role": "user", "content": text}],
    }
    reply = await client.post("/agui", json=body, headers=ALICE)
    assert reply.status_code == 200, reply.text
    assert '"type":"RUN_FINISHED"' in reply.text


@HOSTS
async def test_the_list_pages_newest_first_with_titles_and_pending_counts(
    tmp_path: Path, make_host: Callable[[Path], Any]
) -> None:
    async with client_for(make_host(tmp_path / "t.db")) as client:
        for n in range(3):
            await start_thread(client, f"t-{n}", f"Trip number {n}")
        first = await client.get("/agui/threads", params={"limit": 2}, headers=ALICE)
        assert first.status_code == 200, first.text
        page = first.json()
        assert [t["threadId"] for t in page["threads"]] == ["t-2", "t-1"]
        assert [t["title"] for t in page["threads"]] == ["Trip number 2", "Trip number 1"]
        assert [t["pendingInterrupts"] for t in page["threads"]] == [1, 1]
        assert page["nextCursor"] is not None
        rest = await client.get(
            "/agui/threads", params={"limit": 2, "cursor": page["nextCursor"]}, headers=ALICE
        )
        assert [t["threadId"] for t in rest.json()["threads"]] == ["t-0"]
        assert rest.json()["nextCursor"] is None
        theirs = await client.get("/agui/threads", headers=BOB)
        assert theirs.json() == {"threads": [], "nextCursor": None}


@HOSTS
async def test_rename_sets_the_title_only_for_the_owner(
    tmp_path: Path, make_host: Callable[[Path], Any]
) -> None:
    async with client_for(make_host(tmp_path / "r.db")) as client:
        await start_thread(client, "t-r", "Lisbon please")
        renamed = await client.patch(
            "/agui/threads/t-r", json={"title": "  Lisbon   in May "}, headers=ALICE
        )
        assert renamed.status_code == 200, renamed.text
        assert renamed.json() == {"threadId": "t-r", "title": "Lisbon in May"}
        listed = await client.get("/agui/threads", headers=ALICE)
        assert [t["title"] for t in listed.json()["threads"]] == ["Lisbon in May"]
        intruder = await client.patch("/agui/threads/t-r", json={"title": "mine"}, headers=BOB)
        assert intruder.status_code == 404
        assert intruder.json()["code"] == "THREAD_NOT_FOUND"
        missing = await client.patch("/agui/threads/nope", json={"title": "x"}, headers=ALICE)
        assert missing.status_code == 404


@HOSTS
async def test_delete_erases_the_thread_and_it_is_gone_everywhere(
    tmp_path: Path, make_host: Callable[[Path], Any]
) -> None:
    async with client_for(make_host(tmp_path / "d.db")) as client:
        await start_thread(client, "t-d", "Delete me")
        intruder = await client.delete("/agui/threads/t-d", headers=BOB)
        assert intruder.status_code == 404
        erased = await client.delete("/agui/threads/t-d", headers=ALICE)
        assert erased.status_code == 204
        assert erased.content == b""
        assert (await client.get("/agui/threads/t-d", headers=ALICE)).status_code == 404
        assert (await client.get("/agui/threads", headers=ALICE)).json()["threads"] == []
        again = await client.delete("/agui/threads/t-d", headers=ALICE)
        assert again.status_code == 404


BAD_REQUESTS: list[tuple[str, str, dict[str, Any], int]] = [
    ("GET", "/agui/threads?limit=0", {}, 400),
    ("GET", "/agui/threads?limit=101", {}, 400),
    ("GET", "/agui/threads?limit=ten", {}, 400),
    ("GET", "/agui/threads?cursor=not-a-cursor", {}, 400),
    ("PATCH", "/agui/threads/t-b", {"content": b"{not json"}, 400),
    ("PATCH", "/agui/threads/t-b", {"content": b""}, 400),
    ("PATCH", "/agui/threads/t-b", {"json": {"title": ""}}, 400),
    ("PATCH", "/agui/threads/t-b", {"json": {"title": 7}}, 400),
    ("PATCH", "/agui/threads/t-b", {"json": {"title": "x", "extra": 1}}, 400),
    ("PATCH", "/agui/threads/t-b", {"json": {"title": "x" * 201}}, 400),
    ("PATCH", "/agui/threads/t-b", {"json": {"title": "   "}}, 400),
]


async def test_bad_input_gets_the_same_problem_from_both_bindings(tmp_path: Path) -> None:
    answers: dict[str, list[tuple[int, str]]] = {}
    for name, make_host in (("starlette", starlette_host), ("litestar", litestar_host)):
        async with client_for(make_host(tmp_path / f"{name}.db")) as client:
            await start_thread(client, "t-b", "Bad input")
            seen = []
            for method, url, extra, status in BAD_REQUESTS:
                headers = {**ALICE, "content-type": "application/json"}
                reply = await client.request(method, url, headers=headers, **extra)
                assert reply.status_code == status, (name, method, url, reply.text)
                assert reply.headers["content-type"] == "application/problem+json"
                seen.append((reply.status_code, reply.json()["code"]))
            answers[name] = seen
    assert answers["starlette"] == answers["litestar"]


async def test_the_starlette_thread_routes_refuse_a_foreign_origin_and_an_anonymous_caller(
    tmp_path: Path,
) -> None:
    async with client_for(starlette_host(tmp_path / "f.db")) as client:
        await start_thread(client, "t-f", "Fenced")
        foreign = await client.delete(
            "/agui/threads/t-f", headers={**ALICE, "origin": "https://evil.example"}
        )
        assert foreign.status_code == 403
        assert foreign.json()["code"] == "ORIGIN_NOT_ALLOWED"
        anonymous = await client.get("/agui/threads")
        assert anonymous.status_code == 401
        assert anonymous.json()["code"] == "UNAUTHENTICATED"
        assert (await client.get("/agui/threads/t-f", headers=ALICE)).status_code == 200


@HOSTS
async def test_capability_discovery_answers_the_same_descriptor(
    make_host: Callable[[Path], Any], tmp_path: Path
) -> None:
    async with client_for(make_host(tmp_path / "pausemesh.db")) as client:
        answer = await client.get("/agui/capabilities")

    assert answer.status_code == 200
    capabilities = answer.json()
    assert capabilities["identity"] == {"type": "pausemesh", "name": "ask"}
    assert capabilities["humanInTheLoop"] == {
        "supported": True,
        "interrupts": True,
        "approveWithEdits": False,
    }
