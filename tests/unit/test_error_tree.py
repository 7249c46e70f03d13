"""The tree drawn in ``core/errors.py``'s docstring is the whole error tree, nothing more."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pausemesh
from pausemesh.core import errors

PACKAGE = Path(pausemesh.__file__).parent
ROOT = "PauseMeshError"


def _drawn_classes() -> list[str]:
    doc = errors.__doc__ or ""
    return re.findall(r"^\s*[├└]── (\w+)", doc, flags=re.MULTILINE)


def _base_names(node: ast.ClassDef) -> set[str]:
    names: set[str] = set()
    for base in node.bases:
        if isinstance(base, ast.Name):
            names.add(base.id)
        elif isinstance(base, ast.Attribute):
            names.add(base.attr)
    return names


def _root_subclasses_in_package() -> set[str]:
    """Every class under pausemesh/ that derives from the root error, however indirectly.

    Read from the source, not from ``__subclasses__()``, so a subclass in a module nobody
    imported yet (a web binding, an optional integration) is found too.
    """
    bases: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases.setdefault(node.name, set()).update(_base_names(node))
    found = {ROOT}
    grew = True
    while grew:
        more = {name for name, parents in bases.items() if parents & found} - found
        found |= more
        grew = bool(more)
    return found - {ROOT}


def test_the_drawn_tree_starts_at_the_root_error() -> None:
    doc = errors.__doc__ or ""
    assert re.search(rf"^\s*{ROOT}$", doc, flags=re.MULTILINE)


def test_every_subclass_of_the_root_error_is_drawn_in_the_error_tree() -> None:
    subclasses = _root_subclasses_in_package()
    # The scan must see the classes we know of, or it proves nothing.
    assert {"NotAnApproverError", "LeaseLostError", "AguiRunError"} <= subclasses
    missing = sorted(subclasses - set(_drawn_classes()))
    assert missing == [], f"core/errors.py's drawn tree omits {missing}"


def test_the_drawn_tree_names_only_classes_that_exist_and_each_once() -> None:
    drawn = _drawn_classes()
    assert len(drawn) == len(set(drawn))
    stale = sorted(set(drawn) - _root_subclasses_in_package())
    assert stale == [], f"core/errors.py's drawn tree names {stale}, no such error class"


def test_every_error_core_exports_derives_from_the_root_error() -> None:
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.PauseMeshError), name
