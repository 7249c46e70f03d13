"""The built-in bearer identity in-process, on each binding: the native Starlette AG-UI routes
use it as the Litestar app does (the settings choose it, the roles reach the agent, a refusal
carries the ``Bearer`` challenge), a host resolver beside it is refused, and with API keys
alone ``/mcp`` publishes no OAuth metadata."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from asgi_lifespan import LifespanManager
from starlette.applications import Starlette

from pausemesh.core.errors import SettingsError
from pausemesh.credentials.api_keys import create_api_key
from pausemesh.demo.mcp_tools import register_book_flight
from pausemesh.settings import Settings
from pausemesh.web import PauseMeshConfig, PauseMeshPlugin
from pausemesh.web.agui_starlette import StarletteAgui
from pausemesh.web.app import create_app
from pausemesh.web.mcp_mount import McpPlugin
from tests.support.agui import header_principal
from tests.support.asgi import asgi
from tests.support.identity import whoami

RUN = {"threadId": "t-roles", "runId": "r-1", "messages": []}


def settings(tmp_path: Path) -> Settings:
    return Settings(
        database_path=str(tmp_path / "starlette.db"),
        auth_api_keys_file=str(tmp_path / "keys.json"),
    )


async def test_the_starlette_binding_hands_the_keys_roles_to_the_agent(tmp_path: Path) -> None:
    key, _ = create_api_key(tmp_path / "keys.json", principal="ops-bot", roles=["oncall"])
    pausemesh = StarletteAgui(settings(tmp_path), agent=whoami)
    app = Starlette(routes=pausemesh.routes(), lifespan=pausemesh.lifespan)
    async with (
        LifespanManager(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost"
        ) as client,
    ):
        refused = await client.post("/agui", json=RUN, headers={"authorization": "Bearer pmk_x"})
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith('Bearer realm="pausemesh"')

        ran = await client.post("/agui", json=RUN, headers={"authorization": f"Bearer {key}"})
        assert ran.status_code == 200
        snapshot = await client.get(
            "/agui/threads/t-roles", headers={"authorization": f"Bearer {key}"}
        )
    assert snapshot.json()["state"]["roles"] == ["oncall"]
    assert snapshot.json()["state"]["principal"] == "key:ops-bot"


@pytest.mark.parametrize("binding", ["litestar", "starlette"])
def test_a_host_resolver_and_bearer_settings_together_are_refused(
    tmp_path: Path, binding: str
) -> None:
    def build() -> object:
        if binding == "litestar":
            config = PauseMeshConfig(
                settings=settings(tmp_path), principal_resolver=header_principal
            )
            return PauseMeshPlugin(config)
        return StarletteAgui(settings(tmp_path), agent=whoami, principal_resolver=header_principal)

    with pytest.raises(SettingsError, match="choose one"):
        build()


async def test_with_api_keys_only_mcp_challenges_bearer_without_publishing_metadata(
    tmp_path: Path,
) -> None:
    # RFC 9728 metadata names an authorization server: API keys have none, so none is published.
    key, _ = create_api_key(tmp_path / "keys.json", principal="ops-bot")
    app = create_app(
        Settings(
            database_path=str(tmp_path / "app.db"),
            auth_api_keys_file=str(tmp_path / "keys.json"),
        ),
        plugins=[McpPlugin(register_book_flight)],
    )
    async with (
        LifespanManager(asgi(app)),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=asgi(app)), base_url="http://localhost"
        ) as client,
    ):
        refused = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == 'Bearer realm="pausemesh"'
        metadata = await client.get("/.well-known/oauth-protected-resource/mcp")
        assert metadata.status_code == 404
        created = await client.post(
            "/v1/continuations",
            json={"payload": {"kind": "input", "message": "?"}},
            headers={"authorization": f"Bearer {key}"},
        )
        assert created.status_code == 201
        assert created.json()["continuation"]["owner"] == "key:ops-bot"
