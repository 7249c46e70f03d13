"""The flat form-schema subset MCP elicitation allows (2025-11-25 ``schema.ts``), and answers to it.

A requested schema is ``{type: "object", properties: {name: primitive}, required?, $schema?}``
where each primitive is one of the tagged shapes of ``PrimitiveSchemaDefinition``: string
(with ``format`` email/uri/date/date-time), number/integer, boolean, the untitled, titled and
legacy single-select enums, and the untitled and titled multi-selects. Every shape is strict:
an unknown keyword (``pattern`` included, which the prose shows but the tagged schema lacks),
a nested object or an array of objects is refused, so what we send is what every client can
render. Cross-field rules: unique enum values, ``min <= max``, and defaults that satisfy the
field.

``check_form_content`` validates an accepted answer against such a schema the way a careful
server must (MCP: "servers SHOULD validate what they receive").
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime
from typing import Any

from pausemesh.core.errors import ProtocolAdapterError

__all__ = ("EMPTY_FORM_SCHEMA", "check_form_content", "check_requested_schema")

EMPTY_FORM_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}

_MESSAGE = "INVALID_PROTOCOL_MESSAGE"
_TOP_KEYS = frozenset({"type", "properties", "required", "$schema"})
_COMMON = frozenset({"type", "title", "description"})
_STRING_KEYS = _COMMON | {"minLength", "maxLength", "format", "default"}
_NUMBER_KEYS = _COMMON | {"minimum", "maximum", "default"}
_BOOLEAN_KEYS = _COMMON | {"default"}
_ENUM_KEYS = _COMMON | {"enum", "default"}
_LEGACY_ENUM_KEYS = _ENUM_KEYS | {"enumNames"}
_ONE_OF_KEYS = _COMMON | {"oneOf", "default"}
_MULTI_KEYS = _COMMON | {"items", "minItems", "maxItems", "default"}
_MAX_SAFE = 2**53 - 1

_EMAIL_RE = re.compile(r"^[^\s@]+@[^\s@]+\.[^\s@]+$")
_URI_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s]*$")
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DATE_TIME_RE = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"
)


def _fail(message: str) -> ProtocolAdapterError:
    return ProtocolAdapterError(message, code=_MESSAGE)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_length(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _MAX_SAFE


def _is_finite(value: object) -> bool:
    return _is_number(value) and math.isfinite(value)  # type: ignore[arg-type]


def _is_date(value: str) -> bool:
    if _DATE_RE.fullmatch(value) is None:
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


def _is_date_time(value: str) -> bool:
    if _DATE_TIME_RE.fullmatch(value) is None:
        return False
    try:
        datetime.fromisoformat(value.upper())
    except ValueError:
        return False
    return True


_FORMAT_CHECKS: dict[str, Callable[[str], bool]] = {
    "email": lambda value: _EMAIL_RE.fullmatch(value) is not None,
    "uri": lambda value: _URI_RE.fullmatch(value) is not None,
    "date": _is_date,
    "date-time": _is_date_time,
}


def matches_format(value: str, fmt: str) -> bool:
    """The four string formats MCP forms allow, checked strictly."""
    return _FORMAT_CHECKS[fmt](value)


def _check_keys(field: str, schema: Mapping[str, Any], allowed: frozenset[str]) -> None:
    unknown = sorted(set(schema) - allowed)
    if unknown:
        raise _fail(f"Field {field!r} uses keywords MCP forms do not allow: {', '.join(unknown)}")


def _check_text(field: str, schema: Mapping[str, Any]) -> None:
    for key in ("title", "description"):
        if key in schema and not isinstance(schema[key], str):
            raise _fail(f"Field {field!r} {key} must be a string")


def _check_bounds(field: str, schema: Mapping[str, Any], low: str, high: str) -> None:
    if low in schema and high in schema and schema[low] > schema[high]:
        raise _fail(f"Field {field!r} has {low} greater than {high}")


def _string_values(field: str, values: object, what: str) -> list[str]:
    if (
        not isinstance(values, list)
        or not values
        or not all(isinstance(value, str) for value in values)
    ):
        raise _fail(f"Field {field!r} {what} must be a non-empty list of strings")
    if len(set(values)) != len(values):
        raise _fail(f"Field {field!r} {what} values must be unique")
    return list(values)


def _titled_options(field: str, options: object, what: str) -> list[str]:
    if not isinstance(options, list) or not options:
        raise _fail(f"Field {field!r} {what} must be a non-empty list of {{const, title}}")
    values: list[str] = []
    for option in options:
        if (
            not isinstance(option, dict)
            or set(option) != {"const", "title"}
            or not isinstance(option["const"], str)
            or not isinstance(option["title"], str)
        ):
            raise _fail(f"Field {field!r} {what} entries must be exactly {{const, title}} strings")
        values.append(option["const"])
    if len(set(values)) != len(values):
        raise _fail(f"Field {field!r} {what} values must be unique")
    return values


def _check_string(field: str, schema: Mapping[str, Any]) -> None:
    if "enum" in schema:
        legacy = "enumNames" in schema
        _check_keys(field, schema, _LEGACY_ENUM_KEYS if legacy else _ENUM_KEYS)
        values = _string_values(field, schema["enum"], "enum")
        if legacy:
            names = schema["enumNames"]
            if (
                not isinstance(names, list)
                or len(names) != len(values)
                or not all(isinstance(name, str) for name in names)
            ):
                raise _fail(f"Field {field!r} enumNames must be strings, one per enum value")
        allowed: Sequence[str] | None = values
    elif "oneOf" in schema:
        _check_keys(field, schema, _ONE_OF_KEYS)
        allowed = _titled_options(field, schema["oneOf"], "oneOf")
    else:
        _check_keys(field, schema, _STRING_KEYS)
        allowed = None
        for key in ("minLength", "maxLength"):
            if key in schema and not _is_length(schema[key]):
                raise _fail(f"Field {field!r} {key} must be a non-negative integer")
        _check_bounds(field, schema, "minLength", "maxLength")
        if "format" in schema and schema["format"] not in _FORMAT_CHECKS:
            raise _fail(f"Field {field!r} format must be one of email, uri, date, date-time")
    if "default" in schema:
        problem = _string_problem(schema, schema["default"], allowed)
        if problem:
            raise _fail(f"Field {field!r} default {problem}")


def _string_problem(
    schema: Mapping[str, Any], value: object, allowed: Sequence[str] | None
) -> str | None:
    if not isinstance(value, str):
        return "must be a string"
    if allowed is not None:
        return None if value in allowed else "is not one of the allowed values"
    if "minLength" in schema and len(value) < schema["minLength"]:
        return f"must be at least {schema['minLength']} characters"
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        return f"must be at most {schema['maxLength']} characters"
    if "format" in schema and not matches_format(value, schema["format"]):
        return f"must be a valid {schema['format']}"
    return None


def _check_number(field: str, schema: Mapping[str, Any]) -> None:
    _check_keys(field, schema, _NUMBER_KEYS)
    for key in ("minimum", "maximum"):
        if key in schema and not _is_finite(schema[key]):
            raise _fail(f"Field {field!r} {key} must be a finite number")
    _check_bounds(field, schema, "minimum", "maximum")
    if "default" in schema:
        problem = _number_problem(schema, schema["default"])
        if problem:
            raise _fail(f"Field {field!r} default {problem}")


def _number_problem(schema: Mapping[str, Any], value: object) -> str | None:
    if not _is_finite(value):
        return "must be a finite number"
    assert isinstance(value, (int, float))  # noqa: S101 - narrowed by _is_finite
    if schema["type"] == "integer" and not float(value).is_integer():
        return "must be an integer"
    if "minimum" in schema and value < schema["minimum"]:
        return f"must be at least {schema['minimum']}"
    if "maximum" in schema and value > schema["maximum"]:
        return f"must be at most {schema['maximum']}"
    return None


def _check_boolean(field: str, schema: Mapping[str, Any]) -> None:
    _check_keys(field, schema, _BOOLEAN_KEYS)
    if "default" in schema and not isinstance(schema["default"], bool):
        raise _fail(f"Field {field!r} default must be a boolean")


def _multi_allowed(field: str, items: object) -> list[str]:
    if not isinstance(items, dict):
        raise _fail(f"Field {field!r} items must be an object")
    if set(items) == {"type", "enum"} and items["type"] == "string":
        return _string_values(field, items["enum"], "items.enum")
    if set(items) == {"anyOf"}:
        return _titled_options(field, items["anyOf"], "items.anyOf")
    raise _fail(
        f"Field {field!r} items must be {{type: 'string', enum}} or {{anyOf: [{{const, title}}]}}"
    )


def _check_multi(field: str, schema: Mapping[str, Any]) -> None:
    _check_keys(field, schema, _MULTI_KEYS)
    if "items" not in schema:
        raise _fail(f"Field {field!r} is an array without items")
    allowed = _multi_allowed(field, schema["items"])
    for key in ("minItems", "maxItems"):
        if key in schema and not _is_length(schema[key]):
            raise _fail(f"Field {field!r} {key} must be a non-negative integer")
    _check_bounds(field, schema, "minItems", "maxItems")
    if "default" in schema:
        problem = _multi_problem(schema, schema["default"], allowed)
        if problem:
            raise _fail(f"Field {field!r} default {problem}")


def _multi_problem(schema: Mapping[str, Any], value: object, allowed: Sequence[str]) -> str | None:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return "must be a list of strings"
    if len(set(value)) != len(value):
        return "must not repeat a value"
    if any(item not in allowed for item in value):
        return "holds a value that is not allowed"
    if "minItems" in schema and len(value) < schema["minItems"]:
        return f"must hold at least {schema['minItems']} values"
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        return f"must hold at most {schema['maxItems']} values"
    return None


def _check_primitive(field: str, schema: object) -> None:
    if not isinstance(schema, dict):
        raise _fail(f"Field {field!r} must be a schema object")
    kind = schema.get("type")
    if kind == "string":
        _check_string(field, schema)
    elif kind in {"number", "integer"}:
        _check_number(field, schema)
    elif kind == "boolean":
        _check_boolean(field, schema)
    elif kind == "array":
        _check_multi(field, schema)
    else:
        raise _fail(
            f"Field {field!r} must be a string, number, integer, boolean or enum array "
            "(MCP forms are flat)"
        )
    _check_text(field, schema)


def check_requested_schema(schema: object) -> dict[str, Any]:
    """Return ``schema`` if it is inside the MCP form subset; else ``INVALID_PROTOCOL_MESSAGE``."""
    if not isinstance(schema, dict):
        raise _fail("requestedSchema must be an object")
    unknown = sorted(set(schema) - _TOP_KEYS)
    if unknown:
        raise _fail(f"requestedSchema has keywords MCP forms do not allow: {', '.join(unknown)}")
    if schema.get("type") != "object":
        raise _fail("requestedSchema type must be 'object'")
    if "$schema" in schema and not isinstance(schema["$schema"], str):
        raise _fail("requestedSchema $schema must be a string")
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        raise _fail("requestedSchema properties must be an object")
    for field, definition in properties.items():
        _check_primitive(field, definition)
    if "required" in schema:
        required = schema["required"]
        if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
            raise _fail("requestedSchema required must be a list of property names")
        if len(set(required)) != len(required):
            raise _fail("requestedSchema required must not repeat a name")
        # A dict lookup, so only declared (own) properties count, never inherited names.
        missing = [name for name in required if name not in properties]
        if missing:
            raise _fail(f"requestedSchema requires undeclared properties: {', '.join(missing)}")
    return schema


def _value_problem(schema: Mapping[str, Any], value: object) -> str | None:
    kind = schema["type"]
    if kind == "string":
        if "enum" in schema:
            allowed: Sequence[str] | None = schema["enum"]
        elif "oneOf" in schema:
            allowed = [option["const"] for option in schema["oneOf"]]
        else:
            allowed = None
        return _string_problem(schema, value, allowed)
    if kind in {"number", "integer"}:
        return _number_problem(schema, value)
    if kind == "boolean":
        return None if isinstance(value, bool) else "must be a boolean"
    items = schema["items"]
    allowed_items = (
        items["enum"] if "enum" in items else [option["const"] for option in items["anyOf"]]
    )
    return _multi_problem(schema, value, allowed_items)


def check_form_content(schema: Mapping[str, Any], content: object) -> dict[str, Any]:
    """Validate an accepted form answer against a checked requested schema.

    No unexpected keys, every required key present, every value valid for its field.
    Failures are ``INVALID_PROTOCOL_MESSAGE`` naming the field, never echoing the value.
    """
    if not isinstance(content, dict):
        raise _fail("Elicitation content must be an object")
    properties: Mapping[str, Any] = schema["properties"]
    unexpected = sorted(key for key in content if key not in properties)
    if unexpected:
        raise _fail(f"Elicitation content has unexpected fields: {', '.join(unexpected)}")
    missing = [name for name in schema.get("required", ()) if name not in content]
    if missing:
        raise _fail(f"Elicitation content is missing required fields: {', '.join(missing)}")
    for field, value in content.items():
        problem = _value_problem(properties[field], value)
        if problem:
            raise _fail(f"Elicitation field {field!r} {problem}")
    return content
