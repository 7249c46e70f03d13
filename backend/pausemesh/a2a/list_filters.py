"""The filters of an A2A ``ListTasks`` request, read strictly before the SDK reads them.

The SDK parses a request's params with unknown fields ignored, which also reads an unknown
enum value as 0: ``"status": "INVALID_STATUS"`` becomes no filter at all and every task is
listed. ``list_filter_fault`` reads each known filter on its own, strictly, so a value that
is not one of the field's (an unknown state, a page size that is not a number) is refused as
invalid params naming the field. Unknown fields stay ignored (forward compatibility).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from a2a.types import ListTasksRequest, TaskState
from google.protobuf.json_format import ParseDict, ParseError  # type: ignore[import-untyped]

__all__ = ("ListFilterFault", "list_filter_fault")

_FIELDS = {field.json_name: field for field in ListTasksRequest.DESCRIPTOR.fields} | {
    field.name: field for field in ListTasksRequest.DESCRIPTOR.fields
}
_STATES = ", ".join(name for name in TaskState.keys() if name != "TASK_STATE_UNSPECIFIED")  # noqa: SIM118 - a protobuf enum's names


@dataclass(frozen=True, slots=True)
class ListFilterFault:
    """Which filter is invalid, and why (the message names the field)."""

    field: str
    message: str


def _enum_fault(name: str, value: Any) -> ListFilterFault | None:
    """An integer state that TaskState does not define (proto3 keeps it as a number)."""
    number = int(value) if isinstance(value, str) and value.lstrip("-").isdigit() else value
    known = not isinstance(number, int) or isinstance(number, bool) or number in TaskState.values()
    return None if known else ListFilterFault(name, _state_message(name, value))


def _state_message(name: str, value: Any) -> str:
    return f"Invalid ListTasks filter {name!r}: {value!r} is not a task state (one of {_STATES})"


def list_filter_fault(params: Mapping[str, Any], *, query: bool = False) -> ListFilterFault | None:
    """The first ``ListTasks`` filter in ``params`` that is not a valid value of its field.

    ``query``: the values come from a REST query string (each a string; ``true``/``false``
    for a boolean, as the SDK reads them).
    """
    for name, raw in params.items():
        field = _FIELDS.get(name)
        if field is None:
            continue
        value: Any = raw
        if query and field.type == field.TYPE_BOOL and isinstance(raw, str):
            value = raw.lower() == "true"
        try:
            ParseDict({field.json_name: value}, ListTasksRequest())
        except ParseError as error:
            if field.enum_type is not None:
                return ListFilterFault(name, _state_message(name, raw))
            return ListFilterFault(name, f"Invalid ListTasks filter {name!r}: {error}")
        if field.enum_type is not None:
            fault = _enum_fault(name, value)
            if fault is not None:
                return fault
    return None
