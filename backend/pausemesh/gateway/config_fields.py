"""Checks for single ``gateway.toml`` fields, each adding to one list of problems.

``Problems`` collects every error with where it is (``jobs[1].business_key: ...``), so the
operator fixes the file in one pass; each check returns a usable value or ``None``.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from typing import Any, Final

from pausemesh.gateway.config import DEFAULT_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS

__all__ = (
    "MAX_TEXT",
    "NAME",
    "Problems",
    "business_key",
    "names",
    "text",
    "timeout",
    "unique",
    "unknown_keys",
)

NAME: Final = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,47}$")
MAX_TEXT: Final = 2048
_MAX_KEY = 200
_MIN_TIMEOUT = 0.1


class Problems:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, where: str, problem: str) -> None:
        self.items.append(f"{where}: {problem}")


def text(
    errors: Problems, table: Mapping[str, Any], key: str, where: str, *, required: bool = True
) -> str | None:
    value = table.get(key)
    if value is None:
        if required:
            errors.add(f"{where}.{key}", "is required")
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_TEXT:
        errors.add(f"{where}.{key}", f"must be a non-empty string of at most {MAX_TEXT} characters")
        return None
    if not value.isprintable():
        errors.add(f"{where}.{key}", "must not contain control characters")
        return None
    return value


def unknown_keys(errors: Problems, table: Mapping[str, Any], allowed: set[str], where: str) -> None:
    for key in sorted(set(table) - allowed):
        errors.add(f"{where}.{key}", "is not a known setting")


def business_key(errors: Problems, key: str, where: str) -> None:
    if len(key) > _MAX_KEY:
        errors.add(f"{where}.business_key", f"must be at most {_MAX_KEY} characters")
    try:
        parts = list(string.Formatter().parse(key))
    except ValueError as error:
        errors.add(f"{where}.business_key", f"is not a valid template ({error})")
        return
    for _, field, spec, conversion in parts:
        if field is None:
            continue
        if not field.isidentifier():
            errors.add(f"{where}.business_key", f"placeholder {{{field}}} must name one argument")
        if spec or conversion:
            errors.add(
                f"{where}.business_key", f"placeholder {{{field}}} takes no format or conversion"
            )


def timeout(errors: Problems, raw: Mapping[str, Any], where: str) -> float:
    value = raw.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS)
    if isinstance(value, bool) or not isinstance(value, int | float):
        errors.add(f"{where}.timeout_seconds", "must be a number")
        return DEFAULT_TIMEOUT_SECONDS
    if not _MIN_TIMEOUT <= value <= MAX_TIMEOUT_SECONDS:
        errors.add(
            f"{where}.timeout_seconds", f"must be between {_MIN_TIMEOUT} and {MAX_TIMEOUT_SECONDS}"
        )
    return float(value)


def names(errors: Problems, raw: Any, where: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        errors.add(where, "must be a list of strings")
        return ()
    return tuple(raw)


def unique(errors: Problems, items: list[Any], attribute: str, where: str) -> None:
    seen: set[str] = set()
    for index, item in enumerate(items):
        value = getattr(item, attribute)
        if value in seen:
            errors.add(f"{where}[{index}].{attribute}", f"{value!r} is used twice")
        seen.add(value)
