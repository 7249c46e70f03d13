"""``make demo`` builds only what the demo needs: its recipes (every one, as on a fresh clone)
never touch ``tests/`` nor run npm; the test tooling is ``make test``'s (``test-tools``)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make here")


def recipes(target: str) -> str:
    """What ``make TARGET`` would run from a fresh clone (``-B``: every target out of date)."""
    done = subprocess.run(
        ["make", "--dry-run", "--always-make", "--no-print-directory", target],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def test_make_demo_installs_the_app_and_nothing_of_the_tests() -> None:
    demo = recipes("demo")
    assert (
        "uv pip install --quiet --compile-bytecode --python .venv/bin/python -r requirements.lock"
        in demo
    )
    assert "pausemesh demo" in demo
    assert "tests/" not in demo
    assert "npm" not in demo
    assert ".venv-mcp-tasks" not in demo


def test_make_test_builds_the_test_tooling() -> None:
    test = recipes("test")
    assert "cd tests/protocols/node && npm ci" in test
    assert "--python .venv-mcp-tasks/bin/python" in test


def test_the_extras_the_docs_install_exist_and_a_published_install_says_so() -> None:
    optional = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for page in (REPO_ROOT / "README.md", REPO_ROOT / "docs" / "agents.md"):
        text = page.read_text()
        for extras in re.findall(r"pip install -e '\.\[([a-z,-]+)\]'", text):
            assert set(extras.split(",")) <= set(optional), (page.name, extras)
        # ``pip install pausemesh[...]`` works only once the package is published: said so.
        for paragraph in text.split("\n\n"):
            if re.search(r"pip install \"?pausemesh\[", paragraph):
                assert "published" in paragraph, paragraph
