"""Canonical JSON: key order never matters, arrays keep order, non-JSON is refused."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pausemesh.core.canonical import canonical_json, canonical_sha256
from pausemesh.core.errors import InvalidInputError

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=30,
)


def _shuffle_keys(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: _shuffle_keys(v, rng) for k, v in items}
    if isinstance(value, list):
        return [_shuffle_keys(v, rng) for v in value]
    return value


@given(json_values, st.integers())
def test_key_order_never_changes_the_canonical_text(value: Any, seed: int) -> None:
    assert canonical_json(_shuffle_keys(value, random.Random(seed))) == canonical_json(value)


@given(st.lists(st.integers(), min_size=2, max_size=6, unique=True))
def test_array_order_is_significant(items: list[int]) -> None:
    assert canonical_json(items) != canonical_json(list(reversed(items)))


@given(json_values)
def test_canonical_text_is_valid_json_that_round_trips(value: Any) -> None:
    text = canonical_json(value)
    assert canonical_json(json.loads(text)) == text


def test_keys_sort_by_utf16_code_units_like_javascript() -> None:
    # U+1F600 (surrogate pair D83D DE00) sorts before U+FF5E in UTF-16, after it in code points.
    assert canonical_json({"\uff5e": 1, "\U0001f600": 2}) == '{"\U0001f600":2,"\uff5e":1}'


def test_integral_floats_equal_integers() -> None:
    assert canonical_json({"a": 1.0}) == canonical_json({"a": 1}) == '{"a":1}'
    assert canonical_sha256([1.5]) != canonical_sha256([1])


@pytest.mark.parametrize("bad", [math.nan, math.inf, {1: 2}, {"s": {1}}, object(), b"x"])
def test_non_json_values_are_refused(bad: Any) -> None:
    with pytest.raises(InvalidInputError) as info:
        canonical_json(bad)
    assert info.value.code == "INVALID_PAYLOAD"


def test_deep_nesting_is_refused_not_a_crash() -> None:
    value: Any = 1
    for _ in range(1000):
        value = [value]
    with pytest.raises(InvalidInputError):
        canonical_json(value)


@pytest.mark.parametrize(
    "value",
    ["\ud800", "ok \udfff", {"\ud83d": 1}, ["fine", {"k": "\udc00x"}]],
    ids=["lone-high", "lone-low-after-text", "lone-in-key", "nested"],
)
def test_lone_surrogates_are_not_json_text(value: Any) -> None:
    # UTF-8 cannot encode them: accepting one here once ended in UnicodeEncodeError at storage.
    with pytest.raises(InvalidInputError) as refused:
        canonical_json(value)
    assert refused.value.code == "INVALID_PAYLOAD"


def test_a_surrogate_pair_decoded_to_one_character_is_fine() -> None:
    assert canonical_json({"smile": "\U0001f600"}) == '{"smile":"\U0001f600"}'
