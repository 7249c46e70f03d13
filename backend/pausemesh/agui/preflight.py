"""Bounded, iterative preflight over untyped JSON-like values (before anything parses them).

Counts every visited value (primitives included) across all roots and checks the nesting
depth, without recursion, so a hostile body can neither blow the stack nor make validation
quadratic. Cycles (only possible in host-built objects) fail the preflight; a shared,
non-cyclic reference is allowed and counted each time it is reached.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

__all__ = ("DEFAULT_MAX_DEPTH", "DEFAULT_MAX_NODES", "limits_are_valid", "passes_preflight")

DEFAULT_MAX_DEPTH = 64
DEFAULT_MAX_NODES = 50_000
_SAFE_INT = 2**53 - 1


def limits_are_valid(max_depth: object, max_nodes: object) -> bool:
    return all(
        isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= _SAFE_INT
        for v in (max_depth, max_nodes)
    )


_EXIT = object()
_LEAVES = frozenset((str, int, float, bool, type(None)))


def _children(value: Any) -> Collection[Any] | None:
    kind = type(value)
    if kind is dict:
        return value.values()  # type: ignore[no-any-return]
    if kind is list or kind is tuple:
        return value  # type: ignore[no-any-return]
    if isinstance(value, Mapping):
        return list(value.values())
    if isinstance(value, (list, tuple)):
        return value
    return None


def passes_preflight(roots: Iterable[Any], *, max_depth: int, max_nodes: int) -> bool:
    """True if every root nests at most ``max_depth`` deep and all together hold at most
    ``max_nodes`` values; False otherwise (including cycles and invalid limits)."""
    if not limits_are_valid(max_depth, max_nodes):
        return False
    visited = 0
    for root in roots:
        active: set[int] = set()
        # (value, depth) entries; an _EXIT marker takes its container off the active path
        # once everything below it was visited (LIFO), which is what makes cycles visible.
        stack: list[tuple[Any, int]] = [(root, 0)]
        while stack:
            value, depth = stack.pop()
            if value is _EXIT:
                active.discard(depth)
                continue
            visited += 1
            if visited > max_nodes or depth > max_depth:
                return False
            children = _children(value)
            if not children:
                continue
            if visited + len(children) > max_nodes:
                return False
            key = id(value)
            if key in active:
                return False
            active.add(key)
            stack.append((_EXIT, key))
            below = depth + 1
            for child in children:
                if type(child) in _LEAVES:
                    # Leaves are counted on the spot: no stack round trip.
                    visited += 1
                    if below > max_depth:
                        return False
                else:
                    stack.append((child, below))
    return True
