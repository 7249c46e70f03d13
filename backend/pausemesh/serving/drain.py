"""Drain on the stop signals, in whatever process serves the app (the only one, or each worker).

uvicorn stops a server on SIGTERM or SIGINT by closing its listeners and waiting for open
responses to end; it does not tell the app, so an open tail would hold the process until
``timeout_graceful_shutdown`` and then be cancelled mid-chunk. This plugin chains onto the
server's own signal handlers while the app runs: the server stops as it would, and PauseMesh's
drain begins at once (``PauseMeshPlugin.begin_shutdown``: tails end with a clean end of stream,
in-flight runs get ``PAUSEMESH_SHUTDOWN_GRACE_SECONDS``). It works the same under the single
``uvicorn.Server`` of ``pausemesh serve`` and in every worker that uvicorn's ``Multiprocess``
supervisor spawns (the supervisor forwards a stop to its workers as SIGTERM).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import signal
import threading
from collections.abc import AsyncIterator, Callable
from types import FrameType
from typing import Any

from litestar import Litestar
from litestar.config.app import AppConfig
from litestar.plugins import InitPlugin

from pausemesh.web.plugin import PauseMeshPlugin

__all__ = ("DrainOnStopSignals",)

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

_ServerHandler = Callable[[int, FrameType | None], Any]


class DrainOnStopSignals(InitPlugin):
    """Begin the app's drain when the process is asked to stop (the CLI adds it to its app)."""

    def on_app_init(self, app_config: AppConfig) -> AppConfig:
        app_config.lifespan.append(self.lifespan)
        return app_config

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Litestar) -> AsyncIterator[None]:
        # The server installed its handlers before it started the app (uvicorn's
        # ``capture_signals``): keep them, and add the drain after each.
        loop = asyncio.get_running_loop()
        plugin = app.plugins.get(PauseMeshPlugin)
        # Only a Python handler is chained: without one (the default action, ignored) the
        # signal is left alone, so a drain never takes the place of the process's exit.
        previous: dict[int, _ServerHandler] = {}
        # Signals are handled in the main thread only (a server in another thread has none).
        if threading.current_thread() is threading.main_thread():
            previous = {
                sig: handler for sig in _STOP_SIGNALS if callable(handler := signal.getsignal(sig))
            }

        def on_stop(sig: int, frame: FrameType | None) -> None:
            previous[sig](sig, frame)
            # A signal handler runs between two bytecodes: hand the work to the loop, in a
            # context of its own (not that of the request the signal happened to interrupt,
            # whose request id would otherwise tag the drain's log line).
            loop.call_soon_threadsafe(plugin.begin_shutdown, context=contextvars.Context())

        for sig in previous:
            signal.signal(sig, on_stop)
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
