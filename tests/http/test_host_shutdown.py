"""A host that runs PauseMesh under its own server drains it with ``begin_shutdown()``
(``PauseMeshPlugin`` on Litestar, ``StarletteAgui`` on Starlette; docs/security.md), as
``pausemesh serve`` does on SIGTERM.

In-process over a real SQLite file: a run in flight past the grace ends with ``RUN_ERROR``
``SERVER_SHUTTING_DOWN``, a run asked for during the drain is refused with 503 and
``Retry-After``, and a second call neither moves the deadline nor fails.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager
from litestar import Litestar
from starlette.applications import Starlette

from pausemesh.settings import Settings
from pausemesh.web import PauseMeshConfig, PauseMeshPlugin
from pausemesh.web.agui_starlette import StarletteAgui
from tests.support.agui import run_body
from tests.support.limits_agent import agent
from tests.support.rest import assert_problem


def _user(text: str) -> list[dict[str, str]]:
    return [{"id": f"u-{text}", "role": "user", "content": text}]


def _events(raw: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in raw.split("\n") if line.startswith("data: ")]


def _litestar(settings: Settings) -> tuple[Any, Callable[[], None]]:
    plugin = PauseMeshPlugin(PauseMeshConfig(settings=settings, agent=agent))
    return Litestar(plugins=[plugin]), plugin.begin_shutdown


def _starlette(settings: Settings) -> tuple[Any, Callable[[], None]]:
    agui = StarletteAgui(settings, agent=agent)
    return Starlette(routes=agui.routes(), lifespan=agui.lifespan), agui.begin_shutdown


@pytest.mark.parametrize("make_host", [_litestar, _starlette], ids=["litestar", "starlette"])
async def test_a_host_drains_pausemesh_with_begin_shutdown(
    tmp_path: Path, make_host: Callable[[Settings], tuple[Any, Callable[[], None]]]
) -> None:
    settings = Settings(database_path=str(tmp_path / "p.db"), shutdown_grace_seconds=0.5)
    app, begin_shutdown = make_host(settings)
    transport = httpx.ASGITransport(app=app)
    async with (
        LifespanManager(app),
        httpx.AsyncClient(transport=transport, base_url="http://localhost", timeout=30) as client,
    ):
        slow = asyncio.create_task(
            client.post("/agui", json=run_body("t-slow", "r-slow", messages=_user("slow 60")))
        )
        # The run is in flight once its thread exists (the run host creates it when it starts).
        for _ in range(600):
            if (await client.get("/agui/threads/t-slow")).is_success:
                break
            await asyncio.sleep(0.05)
        begin_shutdown()
        begin_shutdown()  # a second signal changes nothing
        refused = await client.post(
            "/agui", json=run_body("t-new", "r-new", messages=_user("hello"))
        )
        assert_problem(refused, 503, "SERVER_SHUTTING_DOWN")
        assert refused.headers["retry-after"]
        events = _events((await slow).text)
    assert events[0]["type"] == "RUN_STARTED"
    assert events[-1]["type"] == "RUN_ERROR"
    assert events[-1]["code"] == "SERVER_SHUTTING_DOWN"
