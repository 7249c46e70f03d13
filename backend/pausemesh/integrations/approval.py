"""The approval question both framework adapters ask: pydantic-ai's own AG-UI interrupt shape.

A frontend written for pydantic-ai's AG-UI app (or for either adapter here) renders the same
form: ``{"approved": boolean, "editedArgs"?: object, "reason"?: string}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from copy import deepcopy
from typing import Any

__all__ = ("approval_message", "approval_schema")


def approval_schema(arguments_schema: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The approval interrupt's ``responseSchema``.

    ``editedArgs`` is the tool's own argument schema when known, so an edit that does not fit
    the tool is refused at the resume, before anything runs.
    """
    edited: dict[str, Any] = {"type": "object"}
    if arguments_schema:
        edited = {**deepcopy(dict(arguments_schema)), "type": "object"}
    return {
        "type": "object",
        "properties": {
            "approved": {"type": "boolean"},
            "editedArgs": edited,
            "reason": {"type": "string"},
        },
        "required": ["approved"],
    }


def approval_message(tool_name: str, arguments_json: str) -> str:
    """``Approve tool({...})?``, as pydantic-ai words it."""
    return f"Approve {tool_name}({arguments_json})?"
