"""Tests that need something ``make test`` builds, and waiting for those builds.

A few tests need more than the venv: the official ``@ag-ui/client`` (``npm ci`` in
``tests/protocols/node``), the CopilotKit example's build, the MCP conformance suite, the MCP
tasks client's venv. ``make test`` starts the parallel tests at once and builds those beside
them (most tests need none of it), naming a status file in ``PAUSEMESH_TEST_BUILDS`` that it
writes with the builds' exit status when they end. A test marked ``needs_build(NAME)`` waits
for that file (``tests/conftest.py``), then runs if what ``NAME`` provides is there; if not,
it skips with the reason, or fails in CI (``CI=true`` or ``PAUSEMESH_REQUIRE_POSTGRES=1``, as
``.ci/run`` sets), where a missing build must not pass silently.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final, Protocol

import pytest

__all__ = ("BUILDS", "build_missing", "check_builds", "needs_build", "wait_for_builds")

_TESTS = Path(__file__).resolve().parents[1]
_REPO = _TESTS.parent
_COPILOTKIT = _REPO / "examples" / "copilotkit"
_CONFORMANCE = _TESTS / "protocols" / "mcp_conformance" / "node_modules"

# What each build provides, and the command that makes it.
BUILDS: Final[dict[str, tuple[str, tuple[Path, ...]]]] = {
    "ag-ui-client": (
        "`npm ci` in tests/protocols/node (make test-tools)",
        (_TESTS / "protocols" / "node" / "node_modules" / "@ag-ui" / "client",),
    ),
    "copilotkit": (
        "the CopilotKit example built (make copilotkit-build)",
        (
            _COPILOTKIT / "dist" / "src" / "server.js",
            _COPILOTKIT / "dist" / "page" / "index.html",
            _COPILOTKIT / "dist" / "test" / "durable-runner.test.js",
        ),
    ),
    "mcp-conformance": (
        "`npm ci` in tests/protocols/mcp_conformance (make mcp-conformance)",
        (
            _CONFORMANCE / ".bin" / "node",
            _CONFORMANCE / "@modelcontextprotocol" / "conformance" / "dist" / "index.js",
        ),
    ),
}
# Longer than any build takes on a loaded machine; reached only when make's builds hang.
_BUILDS_STUCK = 900.0


def needs_build(name: str) -> pytest.MarkDecorator:
    """The mark of a test that needs ``name`` (a key of ``BUILDS``) and Node."""
    if name not in BUILDS:
        msg = f"unknown build {name!r}"
        raise ValueError(msg)
    return pytest.mark.needs_build(name)


def wait_for_builds() -> None:
    """Return once ``make test``'s builds have ended (at once when none is under way); fail
    when they failed."""
    status_file = os.environ.get("PAUSEMESH_TEST_BUILDS")
    if not status_file:
        return
    path = Path(status_file)
    deadline = time.monotonic() + _BUILDS_STUCK
    while not path.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"make test's builds did not end ({path} was never written)")
        time.sleep(0.5)
    status = path.read_text().strip()
    if status != "0":
        pytest.fail(f"make test's builds failed (exit status {status}): see make's output")


def build_missing(name: str) -> str | None:
    """Why a test needing ``name`` cannot run here, or ``None``."""
    what, provides = BUILDS[name]
    if shutil.which("node") is None:
        return "needs node on PATH"
    for path in provides:
        if not path.exists():
            shown = path.relative_to(_REPO) if path.is_relative_to(_REPO) else path
            return f"needs {what}: {shown} is missing"
    return None


class Marked(Protocol):
    """What ``check_builds`` looks at of a collected test (a ``pytest.Item``)."""

    def iter_markers(self, name: str | None = None) -> Iterator[pytest.Mark]: ...


def check_builds(item: Marked) -> None:
    """Before ``item`` runs: wait for make's builds if it needs one, then skip (outside CI)
    or fail (CI) when what it needs is missing."""
    names = [mark.args[0] for mark in item.iter_markers("needs_build")]
    if not names:
        return
    wait_for_builds()
    for name in names:
        missing = build_missing(name)
        if missing is None:
            continue
        if os.environ.get("CI") == "true" or os.environ.get("PAUSEMESH_REQUIRE_POSTGRES") == "1":
            pytest.fail(missing)
        pytest.skip(missing)
