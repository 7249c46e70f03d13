"""The official MCP conformance suite against PauseMesh's MCP mount, on a real server process.

``@modelcontextprotocol/conformance`` (pinned with the Node 22 it needs in
``tests/protocols/mcp_conformance/``; ``make test`` runs its ``npm ci``) runs every server
scenario (``--suite all``: both protocol eras, the current revision's ``input_required`` and
the extensions) against ``tests/support/mcp_conformance_server.py``: the suite's tools,
resources and prompts on ``McpPlugin`` over SQLite, every question a PauseMesh durable pause.
The suite compares what failed with ``expected-failures.yml`` itself and exits 1 on a failure
not listed there and on a listed one that now passes, so the set is pinned both ways.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.builds import needs_build
from tests.support.mcp_conformance_server import McpConformanceServer

SUITE_DIR = Path(__file__).resolve().parent / "mcp_conformance"
NODE = SUITE_DIR / "node_modules" / ".bin" / "node"
SUITE = SUITE_DIR / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
BASELINE = SUITE_DIR / "expected-failures.yml"
DOC = SUITE_DIR.parents[2] / "docs" / "protocols-mcp-a2a.md"

# Outside CI a machine without the suite skips with the reason; CI always runs it, so a missing
# `npm ci` fails there instead of passing silently (tests/support/builds.py).
needs_suite = needs_build("mcp-conformance")
# The whole suite is about 20 s on an idle machine; room for a loaded one.
_SUITE_SECONDS = 240


def _baseline_entries() -> list[str]:
    return re.findall(r"^\s*- ([a-z0-9:\-]+)\s*$", BASELINE.read_text(), flags=re.MULTILINE)


@pytest.fixture(name="server", scope="module")
def server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpConformanceServer]:
    data = tmp_path_factory.mktemp("mcp-conformance")
    env = {
        "PAUSEMESH_DATABASE_PATH": str(data / "pausemesh.db"),
        "PAUSEMESH_LOG_LEVEL": "warning",
    }
    with McpConformanceServer(env=env) as server:
        yield server


@pytest.mark.slow
@needs_suite
@pytest.mark.timeout(_SUITE_SECONDS + 30)
def test_the_official_mcp_conformance_suite_fails_only_the_listed_checks(
    server: McpConformanceServer, tmp_path: Path
) -> None:
    command = [str(NODE), str(SUITE), "server", "--url", server.url("/mcp"), "--suite", "all"]
    command += ["--expected-failures", str(BASELINE), "--output-dir", str(tmp_path)]
    env = {**os.environ, "NO_COLOR": "1", "FORCE_COLOR": "0"}
    run = subprocess.run(
        command, capture_output=True, text=True, timeout=_SUITE_SECONDS, env=env, check=False
    )
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-6000:]
    assert "Baseline check passed" in output, output[-3000:]
    # Every scenario ran: the suite lists each one it ran in its summary.
    assert "server-initialize" in output
    assert "input-required-result-basic-elicitation" in output


def test_every_expected_failure_is_explained_in_the_protocol_docs() -> None:
    entries = _baseline_entries()
    assert len(entries) > 10, "the baseline's entries were not read"
    doc = DOC.read_text(encoding="utf-8")
    missing = [entry for entry in entries if f"`{entry.split(':')[0]}`" not in doc]
    assert missing == [], f"docs/protocols-mcp-a2a.md does not name {missing}"
