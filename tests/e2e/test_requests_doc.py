"""``docs/requests.md`` runs as written: every ``bash`` block of the page, in order, in one
shell against one real ``pausemesh demo`` process (SQLite), each block's output holding what
the ``<!-- expect: ... -->`` line above it says. The page cannot drift from the server."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.server import REPO_ROOT, ServerProcess

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("curl") is None or shutil.which("jq") is None, reason="needs curl and jq"
    ),
]

DOC = REPO_ROOT / "docs" / "requests.md"
_BLOCK = re.compile(
    r"(?:<!-- expect: (?P<expect>.+?) -->\n)?```bash\n(?P<code>.*?)^```", re.DOTALL | re.MULTILINE
)
_MARK = "::requests.md block {}::"


@dataclass(frozen=True)
class Block:
    number: int
    code: str
    expect: str | None


def blocks(text: str) -> list[Block]:
    return [
        Block(number, match["code"], match["expect"])
        for number, match in enumerate(_BLOCK.finditer(text), 1)
    ]


@pytest.fixture(name="server", scope="module")
def server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    database = tmp_path_factory.mktemp("requests-doc") / "demo.db"
    with ServerProcess(["demo", "--no-browser", "--database-path", str(database)]) as server:
        yield server


def test_every_route_family_has_its_block() -> None:
    text = DOC.read_text()
    for route in (
        '"$BASE/agui"',
        "/agui/connect",
        "/agui/threads/$THREAD/events",
        "Last-Event-ID",
        "-X PATCH",
        "-X DELETE",
        "/v1/continuations/$CID/resume",
        "/v1/continuations/$CID2/cancel",
        "/v1/approvals/$APPROVAL",
        "mcp-protocol-version: 2026-07-28",
        'protocolVersion": "2025-11-25',
        '"method": "SendMessage"',
        '"status": "cancelled"',
    ):
        assert route in text, route
    assert all(block.expect for block in blocks(text)[1:]), "a block without its expect line"


def test_the_requests_page_runs_against_the_demo(server: ServerProcess, tmp_path: Path) -> None:
    page = blocks(DOC.read_text())
    script = ["set -euo pipefail"]
    for block in page:
        script += [f"echo '{_MARK.format(block.number)}'", block.code]
    done = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "BASE": server.base_url},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    outputs = re.split(r"^::requests\.md block (\d+)::\n", done.stdout, flags=re.MULTILINE)[1:]
    said = dict(zip(map(int, outputs[::2]), outputs[1::2], strict=True))
    assert done.returncode == 0, (
        f"block {max(said, default=0)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n"
        f"{done.stderr[-3000:]}"
    )
    assert sorted(said) == [block.number for block in page]
    for block in page:
        if block.expect is not None:
            assert block.expect in said[block.number], (
                block.number,
                block.code,
                said[block.number],
            )
