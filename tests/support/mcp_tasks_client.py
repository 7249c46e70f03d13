"""The official ``mcp`` 1.30 client (2025-11-25 Tasks) in its own pinned venv, run per step.

The app pins ``mcp`` 2.3.0, whose client cannot speak Tasks; the last SDK line that can is
kept apart in ``.venv-mcp-tasks`` (``make install`` builds it from
``tests/protocols/mcp_tasks_client/requirements.txt``; the first test needing it builds it if
missing). Each ``TasksClient.step`` is one session of ``tests/protocols/mcp_tasks_client/client.py``.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.server import REPO_ROOT

__all__ = ("TasksClient", "tasks_client_python")

_CLIENT_DIR = REPO_ROOT / "tests" / "protocols" / "mcp_tasks_client"
_VENV = REPO_ROOT / ".venv-mcp-tasks"
_STEP_TIMEOUT = 90


def tasks_client_python() -> Path:
    """The venv's Python, built (once, under a lock) if it is not there yet."""
    python = _VENV / "bin" / "python"
    stamp = _VENV / ".installed"
    requirements = _CLIENT_DIR / "requirements.txt"
    with (REPO_ROOT / ".venv-mcp-tasks.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not stamp.exists():
            subprocess.run([sys.executable, "-m", "venv", str(_VENV)], check=True)
            subprocess.run(
                [str(python), "-m", "pip", "install", "--quiet", "-r", str(requirements)],
                check=True,
            )
            stamp.touch()
    return python


class TasksClient:
    def __init__(self, python: Path, url: str) -> None:
        self.python = python
        self.url = url

    async def step(self, name: str, **args: Any) -> dict[str, Any]:
        """Run one step (``call``, ``get``, ``list``, ``cancel``, ``result``); its JSON output."""
        process = await asyncio.create_subprocess_exec(
            str(self.python),
            "-W",
            "ignore::DeprecationWarning",
            str(_CLIENT_DIR / "client.py"),
            self.url,
            name,
            json.dumps(args),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), timeout=_STEP_TIMEOUT)
        assert process.returncode == 0, err.decode()[-3000:]
        output: dict[str, Any] = json.loads(out)
        return output
