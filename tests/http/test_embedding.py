"""Embedding: a host Litestar app registers ``PauseMeshPlugin`` with its own auth and stores."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager
from litestar import Litestar, Request, get

from pausemesh.settings import Settings
from pausemesh.stores.sqlite import open_sqlite_storage
from pausemesh.web import PauseMeshConfig, PauseMeshPlugin
from tests.support.asgi import asgi
from tests.support.rest import PAYLOAD, assert_problem


async def header_principal(request: Request[Any, Any, Any]) -> str | None:
    """The host's auth: a trusted proxy puts the user in ``x-user`` (None = anonymous)."""
    user = request.headers.get("x-user")
    if user == "explode":
        msg = "the identity provider is down"
        raise RuntimeError(msg)
    return user


@get("/host/hello", sync_to_thread=False)
def host_hello() -> dict[str, str]:
    return {"hello": "from the host"}


@pytest.fixture(name="scoped")
async def scoped_fixture(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    config = PauseMeshConfig(
        settings=Settings(database_path=str(tmp_path / "pausemesh.db")),
        principal_resolver=header_principal,
        path="/pausemesh",
    )
    app = Litestar(route_handlers=[host_hello], plugins=[PauseMeshPlugin(config)])
    async with (
        LifespanManager(asgi(app), startup_timeout=60, shutdown_timeout=60),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(asgi(app)), base_url="http://localhost"
        ) as client,
    ):
        yield client


async def test_continuations_are_scoped_to_the_principal_that_created_them(
    scoped: httpx.AsyncClient,
) -> None:
    alice, bob = {"x-user": "alice"}, {"x-user": "bob"}
    created = await scoped.post(
        "/pausemesh/v1/continuations", json={"payload": PAYLOAD}, headers=alice
    )
    assert created.status_code == 201
    assert created.json()["continuation"]["owner"] == "alice"
    continuation_id = created.json()["continuation"]["continuationId"]
    token = created.json()["resumeToken"]
    url = f"/pausemesh/v1/continuations/{continuation_id}"

    assert (await scoped.get(url, headers=alice)).status_code == 200
    assert_problem(await scoped.get(url, headers=bob), 404, "CONTINUATION_NOT_FOUND")
    assert_problem(await scoped.get(f"{url}/events", headers=bob), 404, "CONTINUATION_NOT_FOUND")
    assert_problem(
        await scoped.post(f"{url}/cancel", json={}, headers=bob), 404, "CONTINUATION_NOT_FOUND"
    )
    # Even with the right token, another principal cannot resume it.
    resume_headers = {"authorization": f"PauseMesh {token}", "idempotency-key": "k"}
    answer = {"flight": "PM101"}  # as PAYLOAD's responseSchema asks
    assert_problem(
        await scoped.post(
            f"{url}/resume", json={"payload": answer}, headers={**bob, **resume_headers}
        ),
        404,
        "CONTINUATION_NOT_FOUND",
    )
    resumed = await scoped.post(
        f"{url}/resume", json={"payload": answer}, headers={**alice, **resume_headers}
    )
    assert resumed.status_code == 200
    assert resumed.json()["continuation"]["resolvedBy"] == "alice"


@pytest.mark.parametrize("headers", [{}, {"x-user": ""}, {"x-user": "explode"}])
async def test_an_unresolved_principal_is_401(
    scoped: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    response = await scoped.post(
        "/pausemesh/v1/continuations", json={"payload": 1}, headers=headers
    )
    body = assert_problem(response, 401, "UNAUTHENTICATED")
    assert "identity provider" not in body["detail"]


async def test_the_host_keeps_its_own_routes_and_error_shapes(scoped: httpx.AsyncClient) -> None:
    assert (await scoped.get("/host/hello")).json() == {"hello": "from the host"}
    # Without problem_details_for_app the plugin leaves the host's own 404s alone.
    missing = await scoped.get("/host/missing")
    assert missing.status_code == 404
    assert missing.headers["content-type"].startswith("application/json")
    assert (await scoped.get("/pausemesh/healthz")).json() == {"status": "ok"}


async def test_a_request_without_the_lifespan_fails_loudly(tmp_path: Path) -> None:
    config = PauseMeshConfig(settings=Settings(database_path=str(tmp_path / "p.db")))
    app = Litestar(plugins=[PauseMeshPlugin(config)])
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(asgi(app)), base_url="http://localhost"
    ) as client:
        response = await client.post("/v1/continuations", json={"payload": 1})
    body = assert_problem(response, 500, "NOT_STARTED")
    assert "lifespan" in body["detail"]


async def test_host_owned_storage_is_used_and_left_open(tmp_path: Path) -> None:
    storage = await open_sqlite_storage(str(tmp_path / "host.db"))
    try:
        config = PauseMeshConfig(settings=Settings(data_dir=str(tmp_path)), storage=storage)
        app = Litestar(plugins=[PauseMeshPlugin(config)])
        async with (
            LifespanManager(asgi(app), startup_timeout=60, shutdown_timeout=60),
            httpx.AsyncClient(
                transport=httpx.ASGITransport(asgi(app)), base_url="http://localhost"
            ) as client,
        ):
            created = await client.post("/v1/continuations", json={"payload": 1})
            assert created.status_code == 201
        continuation_id = created.json()["continuation"]["continuationId"]
        # The plugin's shutdown did not close the host's store.
        assert len(await storage.events.load(continuation_id)) == 1
    finally:
        await storage.close()


async def test_an_unavailable_store_is_503_without_internals(tmp_path: Path) -> None:
    storage = await open_sqlite_storage(str(tmp_path / "gone.db"))
    await storage.close()  # the store cannot serve any more
    config = PauseMeshConfig(settings=Settings(data_dir=str(tmp_path)), storage=storage)
    app = Litestar(plugins=[PauseMeshPlugin(config)])
    async with (
        LifespanManager(asgi(app), startup_timeout=60, shutdown_timeout=60),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(asgi(app)), base_url="http://localhost"
        ) as client,
    ):
        assert (await client.get("/healthz")).status_code == 200
        ready = await client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json() == {
            "status": "not_ready",
            "checks": [{"component": "store", "status": "unavailable"}],
        }
        created = await client.post("/v1/continuations", json={"payload": 1})
        body = assert_problem(created, 503, "STORE_UNAVAILABLE")
        assert "gone.db" not in created.text
        assert "SQLite" not in body["detail"]
