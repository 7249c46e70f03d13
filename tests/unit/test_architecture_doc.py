"""docs/architecture.md names what the package holds, and only what it holds.

A module is named by its path under ``backend/pausemesh/`` in backticks (`core/service.py`), a
package by its folder with a trailing slash (`agui/run/`). Every ``.py`` file but the
``__init__.py`` of a package must be named (a package is named by its folder instead, and what
its ``__init__`` exports by the text around it); every path the page names must exist, so a
moved or deleted module fails here until the page follows it. The layers the page draws are the
import contract's, in its order.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pausemesh

PACKAGE = Path(pausemesh.__file__).parent
REPO = PACKAGE.parent.parent
DOC = REPO / "docs" / "architecture.md"

# A path in backticks: `core/service.py`, `agui/run/`, `tests/unit/test_x.py`, `docs/adr/`.
_PATH = re.compile(r"`([A-Za-z0-9_.\-]+(?:/[A-Za-z0-9_.\-]+)*(?:\.py|/))`")


def _doc() -> str:
    return DOC.read_text(encoding="utf-8")


def _named_paths() -> set[str]:
    return set(_PATH.findall(_doc()))


def _modules() -> set[str]:
    return {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if path.name != "__init__.py"
    }


def _packages() -> set[str]:
    return {
        path.parent.relative_to(PACKAGE).as_posix() + "/"
        for path in PACKAGE.rglob("__init__.py")
        if path.parent != PACKAGE
    }


def _exists(named: str) -> bool:
    # Paths are under backend/pausemesh/ unless they name the repository's own folders.
    return any((base / named).exists() for base in (PACKAGE, REPO))


def test_every_module_of_the_package_is_named_in_the_architecture_doc() -> None:
    missing = sorted(_modules() - _named_paths())
    assert missing == [], f"docs/architecture.md does not name {missing}"


def test_every_package_of_the_package_is_named_in_the_architecture_doc() -> None:
    missing = sorted(_packages() - _named_paths())
    assert missing == [], f"docs/architecture.md does not name the packages {missing}"


def test_every_path_the_architecture_doc_names_exists() -> None:
    named = _named_paths()
    # The pattern must see the page's paths, or the two tests above prove nothing.
    assert {"core/service.py", "agui/run/", "web/app.py"} <= named
    stale = sorted(path for path in named if not _exists(path))
    assert stale == [], f"docs/architecture.md names paths that do not exist: {stale}"


def test_the_doc_draws_the_import_contracts_layers_in_their_order() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in contracts if c["id"] == "layers")
    drawing = _doc().split("## Layers", 1)[1].split("```", 2)[1]
    # Each drawn row names one layer first: `name` or `name | name` and then what it holds.
    rows = [line.split("  ", 1)[0].strip() for line in drawing.splitlines() if line.strip()]
    name = r"[a-z0-9_]+(?:\.py|/)?"
    drawn = [row for row in rows if re.fullmatch(rf"{name}(?: \| {name})*", row)]
    contract_rows = [" | ".join(part.strip() for part in layer.split("|")) for layer in layers]
    assert [re.sub(r"\.py|/", "", row) for row in drawn] == contract_rows
