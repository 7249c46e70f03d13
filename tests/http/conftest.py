from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from tests.support.server import ServerProcess


@pytest.fixture(name="server", scope="session")
def server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One real ``pausemesh serve`` (uvicorn, SQLite file) shared by the contract tests."""
    data = tmp_path_factory.mktemp("http-server")
    with ServerProcess(["serve", "--database-path", str(data / "pausemesh.db")]) as server:
        yield server


@pytest.fixture(name="client")
async def client_fixture(server: ServerProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as client:
        yield client
