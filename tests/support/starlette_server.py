"""A Starlette app hosting PauseMesh's AG-UI routes (``StarletteAgui``) with the limits agent,
for the tests that need the Starlette binding in a real server process.

``python -m tests.support.starlette_server`` serves it under uvicorn, settings from
``PAUSEMESH_*`` (host, port, database, send timeout). ``StarletteServer`` is the
``ServerProcess`` that runs it.
"""

from __future__ import annotations

import sys

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from pausemesh import Settings
from pausemesh.observability.log_format import configure_logging
from pausemesh.web.agui_starlette import StarletteAgui
from tests.support.limits_agent import agent
from tests.support.server import ServerProcess

__all__ = ("StarletteServer", "build_app")


async def _healthz(_: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


def build_app(settings: Settings) -> Starlette:
    agui = StarletteAgui(settings, agent=agent)
    return Starlette(routes=[Route("/healthz", _healthz), *agui.routes()], lifespan=agui.lifespan)


class StarletteServer(ServerProcess):
    """This module as a real server process (settings through ``env``)."""

    def __init__(self, *, env: dict[str, str]) -> None:
        super().__init__([], env=env)
        self.env.update(PAUSEMESH_HOST=self.host, PAUSEMESH_PORT=str(self.port))

    def command(self) -> list[str]:
        return [sys.executable, "-m", "tests.support.starlette_server"]


def main() -> None:
    settings = Settings.load(env_file=None)
    configure_logging(settings.log_level, settings.log_format)
    uvicorn.run(build_app(settings), host=settings.host, port=settings.port, log_level="info")


if __name__ == "__main__":
    main()
