"""STATE_DELTA (RFC 6902 JSON Patch) as the run host applies it to a thread's state."""

from __future__ import annotations

from typing import Any

import pytest

from pausemesh.agui.transcript import apply_json_patch
from pausemesh.core.errors import InvalidInputError

DOC: dict[str, Any] = {"a": {"b": [1, 2, 3]}, "c/d": 1, "e~f": 2}


@pytest.mark.parametrize(
    ("ops", "expected"),
    [
        ([{"op": "add", "path": "/x", "value": 1}], {**DOC, "x": 1}),
        ([{"op": "add", "path": "/a/b/-", "value": 4}], {**DOC, "a": {"b": [1, 2, 3, 4]}}),
        ([{"op": "add", "path": "/a/b/0", "value": 0}], {**DOC, "a": {"b": [0, 1, 2, 3]}}),
        ([{"op": "remove", "path": "/a/b/1"}], {**DOC, "a": {"b": [1, 3]}}),
        ([{"op": "replace", "path": "/c~1d", "value": 9}], {**DOC, "c/d": 9}),
        ([{"op": "replace", "path": "/e~0f", "value": 9}], {**DOC, "e~f": 9}),
        (
            [{"op": "move", "from": "/c~1d", "path": "/z"}],
            {"a": {"b": [1, 2, 3]}, "e~f": 2, "z": 1},
        ),
        ([{"op": "copy", "from": "/a/b", "path": "/y"}], {**DOC, "y": [1, 2, 3]}),
        ([{"op": "test", "path": "/a/b/2", "value": 3}], DOC),
        ([{"op": "replace", "path": "", "value": [1]}], [1]),
    ],
)
def test_patch_operations_follow_rfc_6902(ops: list[dict[str, Any]], expected: Any) -> None:
    assert apply_json_patch(DOC, ops) == expected


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "remove", "path": "/missing"}],
        [{"op": "replace", "path": "/missing", "value": 1}],
        [{"op": "add", "path": "/a/b/9", "value": 1}],
        [{"op": "add", "path": "/a/b/01", "value": 1}],
        [{"op": "test", "path": "/c~1d", "value": 2}],
        [{"op": "frobnicate", "path": "/a"}],
        [{"op": "add", "path": "no-slash", "value": 1}],
        [{"op": "remove", "path": ""}],
        [{"op": "move", "from": "", "path": "/a/x"}],
    ],
)
def test_a_bad_patch_is_refused_and_changes_nothing(ops: list[dict[str, Any]]) -> None:
    before = {"a": {"b": [1, 2, 3]}, "c/d": 1, "e~f": 2}
    with pytest.raises(InvalidInputError) as error:
        apply_json_patch(DOC, [{"op": "add", "path": "/first", "value": 1}, *ops])
    assert error.value.code == "AGENT_PROTOCOL_ERROR"
    assert before == DOC
