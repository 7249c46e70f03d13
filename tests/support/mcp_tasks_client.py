"""The official ``mcp`` 1.30 client (2025-11-25 Tasks) in its own pinned venv, run per step.

The app pins ``mcp`` 2.3.0, whose client cannot speak Tasks; the last SDK line that can is
kept apart in ``.venv-mcp-tasks`` (``make test`` builds it, target ``test-tools``, from
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

__all__ = ("TasksClient", "Watcher", "tasks_client_python")

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


class Watcher:
    """A ``watch`` session running in its own process (see ``client.py``)."""

    def __init__(self, process: asyncio.subprocess.Process, ready: dict[str, Any]) -> None:
        self.process = process
        self.ready = ready

    async def notifications(self, *, stop: bool = False) -> list[dict[str, Any]]:
        """The status notifications the session got: once it saw its task end (or, with
        ``stop``, as soon as it is told to stop)."""
        assert self.process.stdin is not None
        if stop:
            self.process.stdin.close()
        out, err = await asyncio.wait_for(self.process.communicate(), timeout=_STEP_TIMEOUT)
        assert self.process.returncode == 0, err.decode()[-3000:]
        notices: list[dict[str, Any]] = json.loads(out)["notifications"]
        return [n for n in notices if n.get("method") == "notifications/tasks/status"]

    def kill(self) -> None:
        if self.process.returncode is None:
            self.process.kill()


class TasksClient:
    def __init__(self, python: Path, url: str) -> None:
        self.python = python
        self.url = url

    async def watch(self, **args: Any) -> Watcher:
        """Start a ``watch`` session; returns once it is connected (and its task created)."""
        process = await self._start("watch", args, stdin=asyncio.subprocess.PIPE)
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), timeout=_STEP_TIMEOUT)
        if not line:
            _, err = await process.communicate()
            raise AssertionError(err.decode()[-3000:])
        return Watcher(process, json.loads(line))

    async def _start(
        self, name: str, args: dict[str, Any], *, stdin: int | None = None
    ) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            str(self.python),
            "-W",
            "ignore::DeprecationWarning",
            str(_CLIENT_DIR / "client.py"),
            self.url,
            name,
            json.dumps(args),
            stdin=stdin,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )

    async def step(self, name: str, **args: Any) -> dict[str, Any]:
        """Run one step (``call``, ``get``, ``list``, ``cancel``, ``result``, ``tools``); its
        JSON output."""
        process = await self._start(name, args)
        out, err = await asyncio.wait_for(process.communicate(), timeout=_STEP_TIMEOUT)
        assert process.returncode == 0, err.decode()[-3000:]
        output: dict[str, Any] = json.loads(out)
        return output
