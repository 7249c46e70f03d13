"""The README's Python blocks are complete: pasted in order into one file they run, each with
its own imports, and build the apps they say they build."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from litestar import Litestar
from starlette.applications import Starlette

README = Path(__file__).resolve().parents[2] / "README.md"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def python_blocks(text: str) -> list[str]:
    return _BLOCK.findall(text)


def test_the_readme_blocks_run_in_order_and_build_every_app() -> None:
    blocks = python_blocks(README.read_text())
    assert len(blocks) == 4
    namespace: dict[str, Any] = {"__name__": "readme"}
    for number, block in enumerate(blocks, 1):
        exec(compile(block, f"README.md python block {number}", "exec"), namespace)  # noqa: S102 - the docs' own code
    assert inspect.isasyncgenfunction(namespace["agent"])
    assert isinstance(namespace["app"], Litestar)
    assert isinstance(namespace["api"], FastAPI)
    assert [getattr(route, "path", None) for route in namespace["api"].routes][-1] == "/pausemesh"
    assert isinstance(namespace["starlette_app"], Starlette)
    paths = {getattr(route, "path", None) for route in namespace["starlette_app"].routes}
    assert {"/agui", "/agui/connect"} <= paths


def test_each_readme_block_imports_what_it_names_from_pausemesh() -> None:
    # A block that uses a PauseMesh name imports it itself (no name comes from a block above
    # except the agent and its schema).
    for block in python_blocks(README.read_text()):
        for name in ("PauseMeshConfig", "PauseMeshPlugin", "Settings", "StarletteAgui"):
            if re.search(rf"\b{name}\(", block) or re.search(rf"\b{name}\.", block):
                assert re.search(rf"^from pausemesh import .*\b{name}\b", block, re.MULTILINE), name
