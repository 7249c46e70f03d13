"""The browser demo shipped in the Python package is exactly what ``frontend-demo/`` builds.

The source is copied to a temporary directory, installed from its lockfile (``npm ci``) and
built with Vite; every output file must match the committed bundle byte for byte, and no file
may be missing or extra. The frontend's own unit tests (SSE parsing and reconnect, schema
validation, error wording) run on the way.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from pausemesh.demo.site import STATIC_DIR

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "frontend-demo"

# A cold npm cache downloads the lockfile's packages first: allow more than the default.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _digests(root: Path) -> dict[str, str]:
    return {
        path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def _npm(args: list[str], cwd: Path) -> None:
    npm = shutil.which("npm")
    assert npm is not None, "Node.js and npm are needed to rebuild the demo bundle"
    result = subprocess.run(
        [npm, *args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, f"npm {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"


@pytest.fixture(name="built", scope="module")
def built_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("frontend")
    source = work / "frontend-demo"
    shutil.copytree(
        SOURCE, source, ignore=shutil.ignore_patterns("node_modules", ".test-build", "dist")
    )
    _npm(["ci", "--prefer-offline", "--no-audit", "--no-fund"], source)
    _npm(["test"], source)
    out = work / "out"
    _npm(["exec", "--", "vite", "build", "--outDir", str(out), "--emptyOutDir"], source)
    return out


def test_shipped_bundle_is_what_the_source_builds(built: Path) -> None:
    shipped = _digests(STATIC_DIR)
    rebuilt = _digests(built)
    assert "index.html" in shipped
    assert shipped == rebuilt, "run `make frontend` and commit backend/pausemesh/demo/static"


def test_shipped_page_loads_its_assets_by_relative_url() -> None:
    page = (STATIC_DIR / "index.html").read_text()
    assert 'src="./assets/' in page
    assert 'href="./assets/' in page
    assert "/src/main.ts" not in page
