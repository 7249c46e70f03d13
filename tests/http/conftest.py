from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager
from litestar import Litestar, get

from pausemesh.settings import Settings
from pausemesh.web import PauseMeshConfig, PauseMeshPlugin
from tests.support.asgi import asgi
from tests.support.server import ServerProcess


@pytest.fixture(name="server", scope="session")
def server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One real ``pausemesh serve`` (uvicorn, SQLite file) shared by the contract tests."""
    data = tmp_path_factory.mktemp("http-server")
    with ServerProcess(["serve", "--database-path", str(data / "pausemesh.db")]) as server:
        yield server


@get("/host/hello", sync_to_thread=False)
def host_hello() -> dict[str, str]:
    return {"hello": "from the host"}


@pytest.fixture(name="host_app", scope="session")
async def host_app_fixture(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Litestar]:
    """A host Litestar app of its own that registers ``PauseMeshPlugin`` (one line)."""
    data = tmp_path_factory.mktemp("embedded")
    config = PauseMeshConfig(
        settings=Settings(database_path=str(data / "pausemesh.db")),
        problem_details_for_app=True,
    )
    app = Litestar(route_handlers=[host_hello], plugins=[PauseMeshPlugin(config)])
    async with LifespanManager(asgi(app), startup_timeout=60, shutdown_timeout=60):
        yield app


@pytest.fixture(name="target", params=["process", "embedded"])
def target_fixture(request: pytest.FixtureRequest) -> ServerProcess | Litestar:
    """The same contract, over TCP to ``pausemesh serve`` and in-process to a host app."""
    fixture = "server" if request.param == "process" else "host_app"
    target: ServerProcess | Litestar = request.getfixturevalue(fixture)
    return target


@pytest.fixture(name="client")
async def client_fixture(target: ServerProcess | Litestar) -> AsyncIterator[httpx.AsyncClient]:
    options: dict[str, Any] = {"timeout": 30}
    if isinstance(target, ServerProcess):
        options["base_url"] = target.base_url
    else:
        # The app itself, not LifespanManager's wrapper: that one shares one state dict
        # between every request, which Litestar uses as per-request storage.
        options["transport"] = httpx.ASGITransport(asgi(target))
        options["base_url"] = "http://localhost"
    async with httpx.AsyncClient(**options) as client:
        yield client
