"""``examples/gateway/README.md`` runs as written: pin, serve (a real gateway process with its
upstream), call the job twice, ``ops list``; one invoice is written. The commands run in a
scratch directory laid out as the repository root (``.venv`` and ``examples`` linked there), so
the ``data/`` they write is the test's."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.server import REPO_ROOT, ServerProcess

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("curl") is None or shutil.which("jq") is None, reason="needs curl and jq"
    ),
]

EXAMPLE = REPO_ROOT / "examples" / "gateway"
_BLOCK = re.compile(r"^```bash\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _bash(code: str, cwd: Path, **env: str) -> str:
    done = subprocess.run(
        ["bash", "-c", f"set -euo pipefail\n{code}"],
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, (code, done.stdout, done.stderr)
    return done.stdout


def test_the_gateway_quick_start_runs_as_written(tmp_path: Path) -> None:
    pin, serve, call, ops = _BLOCK.findall((EXAMPLE / "README.md").read_text())
    (tmp_path / ".venv").symlink_to(REPO_ROOT / ".venv")
    (tmp_path / "examples").symlink_to(REPO_ROOT / "examples")

    assert "wrote data/gateway.lock.json" in _bash(pin, tmp_path)
    command = shlex.split(serve.strip())
    assert command[0] == ".venv/bin/pausemesh"
    with ServerProcess(command[1:], cwd=tmp_path) as gateway:
        said = _bash(call, tmp_path, BASE=gateway.base_url).splitlines()
    assert said[:2] == ["RESPONSE_RETAINED", "RECONCILIATION_ONLY"]
    invoices = [json.loads(line) for line in said[2:]]
    assert invoices == [{"amount": 120, "invoice": "inv-A-1", "order_id": "A-1"}]
    [operation] = json.loads(_bash(ops, tmp_path))
    assert (operation["businessKey"], operation["status"]) == ("invoice:A-1", "RESPONSE_RETAINED")
