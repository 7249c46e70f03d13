"""``responseSchema`` enforcement: one compiled Draft 2020-12 validator per schema.

``jsonschema.validate()`` re-checks the schema and rebuilds a validator on every call; here a
schema is checked once (an invalid one is refused when the pause is made, not when the
answer arrives) and its validator is reused, keyed by the schema's canonical JSON so that
key order does not matter. Formats (``date``, ``email``, ...) are checked, not just noted.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import jsonschema
import msgspec
from jsonschema import Draft202012Validator

from pausemesh.core.canonical import canonical_json
from pausemesh.core.errors import InvalidInputError

__all__ = ("SchemaValidatorCache",)

_FORMAT_CHECKER = Draft202012Validator.FORMAT_CHECKER


class SchemaValidatorCache:
    """A bounded LRU of compiled validators. Not shared across event loops' threads."""

    def __init__(self, max_entries: int = 1024) -> None:
        if max_entries < 1:
            msg = "max_entries must be at least 1"
            raise ValueError(msg)
        self._max = max_entries
        self._validators: OrderedDict[bytes, Draft202012Validator] = OrderedDict()

    def validator_for(self, schema: object) -> Draft202012Validator:
        """The compiled validator of ``schema``; ``InvalidInputError(INVALID_RESPONSE_SCHEMA)``
        if it is not an object or not a valid Draft 2020-12 schema."""
        if not isinstance(schema, dict):
            # AG-UI: responseSchema must be an object; a boolean schema is rejected.
            msg = "responseSchema must be a JSON object"
            raise InvalidInputError(msg, code="INVALID_RESPONSE_SCHEMA")
        try:
            # Sorted-key JSON is enough for a cache key (msgspec does it in C).
            key = msgspec.json.encode(schema, order="sorted")
        except (TypeError, ValueError, OverflowError):
            msg = "responseSchema is not JSON"
            raise InvalidInputError(msg, code="INVALID_RESPONSE_SCHEMA") from None
        validator = self._validators.get(key)
        if validator is not None:
            self._validators.move_to_end(key)
            return validator
        try:
            canonical_json(schema)  # only real JSON (no NaN, no non-string keys) is compiled
            Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as error:
            msg = f"responseSchema is not a valid JSON Schema: {error.message}"
            raise InvalidInputError(msg, code="INVALID_RESPONSE_SCHEMA") from None
        except InvalidInputError:
            msg = "responseSchema is not JSON"
            raise InvalidInputError(msg, code="INVALID_RESPONSE_SCHEMA") from None
        validator = Draft202012Validator(schema, format_checker=_FORMAT_CHECKER)
        self._validators[key] = validator
        if len(self._validators) > self._max:
            self._validators.popitem(last=False)
        return validator

    def check_schema(self, schema: object) -> None:
        """Raise ``InvalidInputError(INVALID_RESPONSE_SCHEMA)`` unless ``schema`` is usable."""
        self.validator_for(schema)

    def is_valid(self, schema: object, instance: Any) -> bool:
        return bool(self.validator_for(schema).is_valid(instance))
