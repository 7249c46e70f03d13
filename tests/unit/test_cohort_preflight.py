"""The bounded preflight that runs before any AG-UI input is typed (depth, node count, cycles)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pausemesh.agui.preflight import passes_preflight


def nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


def count(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + sum(count(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return 1 + sum(count(v) for v in value)
    return 1


def test_depth_exactly_at_the_limit_passes_and_one_more_fails() -> None:
    assert passes_preflight([nested(64)], max_depth=64, max_nodes=1000)
    assert not passes_preflight([nested(65)], max_depth=64, max_nodes=1000)


def test_node_count_exactly_at_the_limit_passes_and_one_more_fails() -> None:
    value = {"a": [1, 2, 3], "b": {"c": None}}
    total = count(value)
    assert passes_preflight([value], max_depth=10, max_nodes=total)
    assert not passes_preflight([value], max_depth=10, max_nodes=total - 1)


def test_nodes_are_counted_across_all_roots() -> None:
    assert passes_preflight([[1, 2], [3]], max_depth=5, max_nodes=5)
    assert not passes_preflight([[1, 2], [3]], max_depth=5, max_nodes=4)


def test_shared_references_are_allowed_and_counted_each_time() -> None:
    shared = [1, 2]
    value = {"x": shared, "y": shared}
    assert passes_preflight([value], max_depth=5, max_nodes=7)
    assert not passes_preflight([value], max_depth=5, max_nodes=6)


def test_cycles_fail() -> None:
    loop: list[Any] = []
    loop.append({"again": loop})
    assert not passes_preflight([loop], max_depth=1000, max_nodes=1000)


@pytest.mark.parametrize(("depth", "nodes"), [(0, 5), (5, 0), (1.5, 5), (5, 2**53), (True, 5)])
def test_invalid_limits_fail(depth: Any, nodes: Any) -> None:
    assert not passes_preflight([1], max_depth=depth, max_nodes=nodes)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=4)
    ),
    max_leaves=30,
)


def depth_of(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=-1)
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=-1)
    return 0


@given(value=_json)
def test_preflight_agrees_with_a_recursive_count(value: Any) -> None:
    nodes, depth = count(value), depth_of(value)
    assert passes_preflight([value], max_depth=max(depth, 1), max_nodes=nodes)
    assert not passes_preflight([value], max_depth=max(depth, 1), max_nodes=nodes - 1) or nodes == 1
    if depth > 1:
        assert not passes_preflight([value], max_depth=depth - 1, max_nodes=nodes)
