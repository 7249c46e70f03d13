"""Observers: where lifecycle observations go. They can never change an outcome."""

from __future__ import annotations

import logging

import msgspec

from pausemesh.observability.observations import Observation, Observer
from pausemesh.observability.redaction import RedactingFilter

__all__ = (
    "CollectingObserver",
    "LoggingObserver",
    "NoopObserver",
    "RedactingFilter",
    "observe_safely",
)

_log = logging.getLogger("pausemesh.observer")


class NoopObserver:
    def observe(self, observation: Observation) -> None:
        pass


class CollectingObserver:
    """Keeps every observation in a list (a fake shipped for host tests)."""

    def __init__(self) -> None:
        self.observations: list[Observation] = []

    def observe(self, observation: Observation) -> None:
        self.observations.append(observation)


class LoggingObserver:
    """Logs each observation as one structured line under ``pausemesh.observer``."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self._logger = logger or _log

    def observe(self, observation: Observation) -> None:
        if not self._logger.isEnabledFor(logging.INFO):
            return  # below the level: skip building the fields too
        fields = msgspec.to_builtins(observation)
        self._logger.info(fields["name"], extra={"pausemesh": fields})


def observe_safely(observer: Observer, observation: Observation) -> None:
    """Deliver an observation; an observer that raises is logged and ignored."""
    try:
        observer.observe(observation)
    except Exception:  # noqa: BLE001 - by contract an observer never changes an outcome
        _log.warning("observer %s raised; observation dropped", type(observer).__name__)
