"""One principal rule for every binding: no principal, an empty one, a reserved one or a
failing resolver is 401.

The Litestar plugin and the native Starlette routes both go through ``web.auth``; a resolver
that answers ``""`` must not make an anonymous caller look like a principal, and one that
answers ``role:manager`` (or another reserved prefix) must not make it look like a role, an
operation or an API key.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager
from litestar import Litestar
from starlette.applications import Starlette
from starlette.requests import Request as StarletteRequest

from pausemesh.agui.agent import AgentOutput, PauseRequest, RunContext
from pausemesh.core.identity import Identity
from pausemesh.settings import Settings
from pausemesh.web import PauseMeshConfig, PauseMeshPlugin
from pausemesh.web.agui_starlette import StarletteAgui

Resolver = Callable[[Any], Awaitable[str | Identity | None]]


async def ask(_: RunContext) -> AsyncIterator[AgentOutput]:
    yield PauseRequest(message="Which one?")


async def empty_principal(_: object) -> str | None:
    return ""


async def no_principal(_: object) -> str | None:
    return None


async def failing_resolver(_: object) -> str | None:
    msg = "the identity provider is down"
    raise RuntimeError(msg)


async def header_principal(request: StarletteRequest) -> str | None:
    return request.headers.get("x-user")


async def role_principal(_: object) -> str | None:
    return "role:manager"


async def operation_identity(_: object) -> Identity:
    return Identity("operation:op-1", roles=frozenset({"manager"}))


async def key_principal(_: object) -> str | None:
    return "Key:billing-bot"  # any letter case: a person reads it as the key's principal


REFUSING = [
    empty_principal,
    no_principal,
    failing_resolver,
    role_principal,
    operation_identity,
    key_principal,
]


def assert_unauthenticated(reply: httpx.Response) -> None:
    assert reply.status_code == 401, reply.text
    assert reply.headers["content-type"] == "application/problem+json"
    assert reply.headers["www-authenticate"] == "PauseMesh"
    assert reply.json()["code"] == "UNAUTHENTICATED"


def starlette_host(tmp_path: Path, resolver: Resolver) -> Starlette:
    pausemesh = StarletteAgui(
        Settings(database_path=str(tmp_path / "starlette.db")),
        agent=ask,
        principal_resolver=resolver,
    )
    return Starlette(routes=pausemesh.routes(), lifespan=pausemesh.lifespan)


def litestar_host(tmp_path: Path, resolver: Resolver) -> Litestar:
    config = PauseMeshConfig(
        settings=Settings(database_path=str(tmp_path / "litestar.db")),
        agent=ask,
        principal_resolver=resolver,
    )
    return Litestar(plugins=[PauseMeshPlugin(config)])


RUN = {"threadId": "t-1", "runId": "r-1", "messages": [{"id": "u", "role": "user", "content": "?"}]}


@pytest.mark.parametrize("resolver", REFUSING, ids=lambda r: r.__name__)
@pytest.mark.parametrize(
    "make_host", [starlette_host, litestar_host], ids=["starlette", "litestar"]
)
async def test_every_binding_refuses_a_caller_the_resolver_does_not_name(
    tmp_path: Path,
    resolver: Resolver,
    make_host: Callable[[Path, Resolver], Any],
) -> None:
    host = make_host(tmp_path, resolver)
    async with (
        LifespanManager(host),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=host), base_url="http://localhost"
        ) as client,
    ):
        assert_unauthenticated(await client.post("/agui", json=RUN))
        assert_unauthenticated(await client.get("/agui/threads/t-1"))


async def test_the_starlette_binding_refuses_an_empty_principal_but_serves_a_named_one(
    tmp_path: Path,
) -> None:
    host = starlette_host(tmp_path, header_principal)
    async with (
        LifespanManager(host),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=host), base_url="http://localhost"
        ) as client,
    ):
        # An empty header value used to pass as a principal named "" on this binding.
        assert_unauthenticated(await client.post("/agui", json=RUN, headers={"x-user": ""}))
        named = await client.post("/agui", json=RUN, headers={"x-user": "alice"})
        assert named.status_code == 200
        assert '"type":"RUN_FINISHED"' in named.text
