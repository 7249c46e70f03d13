"""Observers: where lifecycle observations go. They can never change an outcome."""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterable
from typing import Any

import msgspec

from pausemesh.core.observations import Observation
from pausemesh.core.ports import Observer

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


_SECRET_KEYS = ("token", "authorization", "payload", "secret", "password", "key")
_SECRET_TEXT = re.compile(r"(?i)(PauseMesh|Bearer)\s+[A-Za-z0-9_\-\.=]+")


@functools.lru_cache(maxsize=1024)
def _secret_key(key: object) -> bool:
    # Records carry the same few field names over and over: decide each once.
    name = str(key).lower()
    return any(s in name for s in _SECRET_KEYS)


_search = _SECRET_TEXT.search


def _plain(text: str) -> bool:
    """True when ``_SECRET_TEXT`` cannot match ``text``: the usual case, decided without the
    pattern. A case-insensitive search costs about 0.6 µs even on a short id, and a log line
    carries several strings. For ASCII text the pattern needs one of its two words, lowered;
    any other text (where case folding can map other letters onto ASCII ones) is searched."""
    if not text.isascii():
        return _search(text) is None
    lowered = text.lower()
    return "pausemesh" not in lowered and "bearer" not in lowered


def _scrub(text: str) -> str:
    # ``sub`` with a template calls back into Python on every call, match or not: only
    # text that may match gets that far.
    if _plain(text):
        return text
    return _SECRET_TEXT.sub(r"\1 [REDACTED]", text)


# The exact types that never hold text: returned as they are, before any isinstance check.
_PLAIN = frozenset({int, float, bool, type(None)})


def _redact(value: Any) -> Any:
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is dict:
        return _redact_fields(value)
    if isinstance(value, str):
        return _scrub(value)
    if isinstance(value, dict):
        return {k: "[REDACTED]" if _secret_key(k) else _redact(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redact(v) for v in value]
    return value


def _clean(value: Any) -> bool:
    """True when ``_redact`` would return ``value`` itself (a number, or text with nothing to
    scrub): the usual argument, kept without building a new tuple."""
    kind = type(value)
    return kind in _PLAIN or (kind is str and _plain(value))


def _redact_fields(fields: dict[Any, Any]) -> dict[Any, Any]:
    """``_redact`` of a dict, its clean values kept as they are (the usual record)."""
    out: dict[Any, Any] = {}
    for key, value in fields.items():
        if _secret_key(key):
            out[key] = "[REDACTED]"
        elif _clean(value):
            out[key] = value
        else:
            out[key] = _redact(value)
    return out


_ABSENT = object()


class RedactingFilter(logging.Filter):
    """Scrubs secret-looking keys and authorization values from log records.

    A second line of defence: PauseMesh never logs tokens on purpose, but a host's own
    log call with a request dict should not leak one either.
    """

    def __init__(self, extra_keys: Iterable[str] = ()) -> None:
        super().__init__()
        self._names = ("pausemesh", *extra_keys)

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = _scrub(record.msg)
        args = record.args
        if args:
            if not isinstance(args, tuple):
                record.args = _redact(args)
            elif not all(_clean(a) for a in args):
                record.args = tuple(_redact(a) for a in args)
        for name in self._names:
            value = getattr(record, name, _ABSENT)
            if value is not _ABSENT:
                setattr(record, name, _redact(value))
        return True
