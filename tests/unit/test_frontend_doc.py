"""docs/frontend.md shows the reconnecting client's examples exactly as they are in the
repository (the plain page is compiled by ``npm test``), so the page cannot drift from them."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "frontend.md"


def _block_after(text: str, path: str) -> str:
    """The fenced block that follows the paragraph naming ``path``."""
    at = text.index(f"`{path}`")
    match = re.compile(r"^```(?:ts|tsx)\n(.*?)^```", re.MULTILINE | re.DOTALL).search(text, at)
    assert match is not None, path
    return match.group(1)


def test_the_docs_examples_are_the_files_in_the_repository() -> None:
    text = DOC.read_text()
    for path in ("frontend-demo/examples/plain-page.ts", "frontend-demo/examples/react-chat.tsx"):
        assert _block_after(text, path) == (ROOT / path).read_text(), path


def test_the_docs_name_every_export_of_the_module() -> None:
    text = DOC.read_text()
    module = (ROOT / "frontend-demo" / "src" / "pausemesh-agent.ts").read_text()
    exported = re.findall(r"^export (?:class|function) (\w+)", module, re.MULTILINE)
    assert exported, "no exports found"
    for name in ("PauseMeshAgent", "PauseMeshRefusal", "PauseMeshOffline", "backoffDelay"):
        assert name in exported
        assert name in text
