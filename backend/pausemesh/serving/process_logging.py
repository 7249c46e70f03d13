"""Logging and tracing for a serving process (``serve``, ``demo``, ``gateway``, each worker)."""

from __future__ import annotations

import logging

from pausemesh.core.errors import SettingsError
from pausemesh.observability.log_format import configure_logging
from pausemesh.observability.otel import configure_tracing
from pausemesh.settings import Settings

__all__ = ("WorkerTag", "configure_process_logging")


def configure_process_logging(settings: Settings) -> None:
    """Logs in ``PAUSEMESH_LOG_FORMAT``; traces when the ``OTEL_*`` variables ask for them.

    Raises ``SettingsError`` when the ``OTEL_*`` variables ask for what cannot be set up.
    """
    configure_logging(settings.log_level, settings.log_format)
    try:
        configure_tracing()
    except (RuntimeError, ValueError) as error:
        raise SettingsError(str(error)) from None
    if settings.workers > 1:
        # Several workers write to one stream: each line names the process that wrote it.
        for handler in logging.getLogger().handlers:
            handler.addFilter(WorkerTag())


class WorkerTag(logging.Filter):
    """Names the writing process in each record's logger name (``pausemesh.web[4242]``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.name = f"{record.name}[{record.process}]"
        return True
