"""Serving the app: in this process under one ``uvicorn.Server``, or in N worker processes
under uvicorn's supervisor, both with the uvicorn settings of ``uvicorn_config``.

Whatever serves here drains on SIGTERM/SIGINT (``DrainOnStopSignals``) and tunes the
interpreter first (``tune_for_serving``). The command line decides what to serve
(``pausemesh.cli.serve``); ``bench/stack_floor.py`` serves its own apps with these too.
"""

from __future__ import annotations

import logging
import math
import signal
import socket
import threading
import webbrowser
from collections.abc import Sequence
from typing import Any

import uvicorn
from litestar import Litestar
from litestar.config.app import AppConfig
from litestar.plugins import InitPlugin, PluginProtocol
from uvicorn.supervisors import Multiprocess

from pausemesh import __version__
from pausemesh.serving.drain import DrainOnStopSignals
from pausemesh.serving.http_protocol import CoalescingHttpToolsProtocol, ServerConfig
from pausemesh.serving.process_tuning import tune_for_serving
from pausemesh.settings import Settings
from pausemesh.web.app import create_app
from pausemesh.web.auth import PrincipalResolver

__all__ = (
    "OpenBrowser",
    "announce",
    "build_app",
    "run_app",
    "supervise_workers",
    "uvicorn_config",
)

# The start line keeps the logger name it always had (a log filter may name it).
_log = logging.getLogger("pausemesh.cli")


def uvicorn_config(app: Any, settings: Settings, **extra: Any) -> ServerConfig:
    """The uvicorn settings ``pausemesh serve`` runs with (``bench/stack_floor.py`` too)."""
    return ServerConfig(
        app,
        host=settings.host,
        port=settings.port,
        loop="uvloop",
        http=CoalescingHttpToolsProtocol,
        lifespan="on",
        log_config=None,
        log_level=settings.log_level,
        access_log=False,
        server_header=False,
        timeout_keep_alive=settings.idle_connection_seconds,
        header_timeout=settings.header_timeout_seconds,
        # A backstop only: the drain ends every run and tail within the grace period.
        timeout_graceful_shutdown=math.ceil(settings.shutdown_grace_seconds) + 2,
        **extra,
    )


def build_app(
    settings: Settings,
    *,
    agent: Any | None = None,
    principal_resolver: PrincipalResolver | None = None,
    plugins: Sequence[PluginProtocol] = (),
    open_url: str | None = None,
) -> Litestar:
    """The app a serving process runs: ``plugins``, the page at ``open_url`` opened in a
    browser once started, and the drain on the stop signals (in the only process, or in each
    worker on the SIGTERM its supervisor forwards)."""
    served = [*plugins]
    if open_url is not None:
        served.append(OpenBrowser(open_url))
    served.append(DrainOnStopSignals())
    return create_app(settings, agent=agent, principal_resolver=principal_resolver, plugins=served)


def announce(settings: Settings) -> None:
    """The line saying what is served where (once, by the only process or the supervisor)."""
    _log.info(
        "PauseMesh %s on http://%s:%d (%s%s)",
        __version__,
        settings.host,
        settings.port,
        "PostgreSQL" if settings.uses_postgres else settings.database_path,
        f", {settings.workers} workers" if settings.workers > 1 else "",
    )


def run_app(app: Litestar, settings: Settings, listener: socket.socket | None = None) -> bool:
    """Serve ``app`` in this process until SIGTERM/SIGINT (graceful: in-flight requests
    finish), on ``listener`` when given (a socket bound to the settings' address, not yet
    listening), else on a socket uvicorn binds; False when the server did not start (the log
    says why)."""
    tune_for_serving()
    announce(settings)
    server = uvicorn.Server(uvicorn_config(app, settings))
    # uvicorn raises the signal again once it has stopped; this handler takes it, so a
    # graceful stop exits 0 instead of dying of the re-raised SIGTERM.
    signal.signal(signal.SIGTERM, lambda *_: None)
    server.run(sockets=None if listener is None else [listener])
    return server.started


def supervise_workers(factory: str, settings: Settings, listener: socket.socket | None) -> None:
    """``settings.workers`` processes under uvicorn's supervisor, each building its app with
    ``factory`` (an import string), on ``listener`` (``serving.workers.listener_for_workers``;
    None: uvicorn's one shared socket). ``bench/stack_floor.py`` serves its apps with it too."""
    config = uvicorn_config(factory, settings, factory=True, workers=settings.workers)
    Multiprocess(config, sockets=[listener or config.bind_socket()]).run()


class OpenBrowser(InitPlugin):
    """Opens ``url`` in a browser once the app has started (off the event loop): the demo's page."""

    def __init__(self, url: str) -> None:
        self._url = url

    def on_app_init(self, app_config: AppConfig) -> AppConfig:
        def open_page() -> None:
            threading.Thread(target=webbrowser.open, args=(self._url,), daemon=True).start()

        app_config.on_startup.append(open_page)
        return app_config
