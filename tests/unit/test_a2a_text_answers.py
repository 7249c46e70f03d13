"""A text follow-up read as the answer to a one-field question (``a2a.answers.text_answer``).

A generic A2A client (or a person typing in a generic chat) sends text: where the question has
exactly one field, text that parses as a valid value of it is the answer; anything else is
refused with a message naming the expected answers.
"""

from __future__ import annotations

from typing import Any

import pytest
from a2a.utils.errors import InvalidParamsError

from pausemesh.a2a.answers import text_answer

FLIGHT = {
    "type": "object",
    "properties": {"flight": {"type": "string", "enum": ["PM101", "PM202", "PM303"]}},
    "required": ["flight"],
}
SEATS = {"type": "object", "properties": {"seats": {"type": "integer", "minimum": 1}}}
AMOUNT: dict[str, Any] = {"type": "number"}
NOTE = {"type": "object", "properties": {"note": {"type": "string"}}}
TWO_FIELDS = {
    "type": "object",
    "properties": {"flight": {"type": "string"}, "seats": {"type": "integer"}},
}


@pytest.mark.parametrize(
    ("text", "schema", "expected"),
    [
        ("PM202", FLIGHT, {"flight": "PM202"}),
        (" pm303 ", FLIGHT, {"flight": "PM303"}),
        ('{"flight": "PM101"}', FLIGHT, {"flight": "PM101"}),
        ("3", SEATS, {"seats": 3}),
        ("12.5", AMOUNT, 12.5),
        ("window seat please", NOTE, {"note": "window seat please"}),
        ('{"flight": "PM101", "seats": 2}', TWO_FIELDS, {"flight": "PM101", "seats": 2}),
    ],
    ids=["enum", "enum-any-case", "json", "integer", "number", "free-text", "json-two-fields"],
)
def test_text_that_fits_the_question_is_its_answer(
    text: str, schema: dict[str, Any], expected: Any
) -> None:
    assert text_answer(text, schema) == expected


@pytest.mark.parametrize(
    ("text", "schema", "named"),
    [
        ("maybe", FLIGHT, ["PM101", "PM202", "PM303"]),
        ("two", SEATS, ["an integer"]),
        ("0", SEATS, ["seats"]),
        ("lots", AMOUNT, ["a number"]),
        ("PM101", TWO_FIELDS, ["data part"]),
    ],
    ids=["not-a-choice", "not-an-integer", "below-minimum", "not-a-number", "two-fields"],
)
def test_text_that_fits_nothing_is_refused_naming_the_expected_answers(
    text: str, schema: dict[str, Any], named: list[str]
) -> None:
    with pytest.raises(InvalidParamsError) as refused:
        text_answer(text, schema)
    assert all(word in str(refused.value) for word in named)
