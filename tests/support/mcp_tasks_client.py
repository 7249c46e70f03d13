"""The official ``mcp`` 1.30 client (2025-11-25 Tasks) in its own pinned venv, one process.

The app pins ``mcp`` 2.3.0, whose client cannot speak Tasks; the last SDK line that can is
kept apart in ``.venv-mcp-tasks`` (``make test`` builds it, target ``test-tools``, from
``tests/protocols/mcp_tasks_client/requirements.txt``; the first test needing it builds it if
missing). Each ``TasksClient.step`` is one session of ``tests/protocols/mcp_tasks_client/client.py``,
run by one long-lived process per test process: a process per step spent 67 CPU-seconds a
suite run importing ``mcp``. Its protocol (JSON lines on stdin and stdout) is in ``client.py``.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import fcntl
import itertools
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

from tests.support.server import REPO_ROOT

__all__ = ("TasksClient", "Watcher", "tasks_client_python")

_CLIENT_DIR = REPO_ROOT / "tests" / "protocols" / "mcp_tasks_client"
_VENV = REPO_ROOT / ".venv-mcp-tasks"
_STEP_TIMEOUT = 90

Reply = dict[str, Any]


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


class _ClientProcess:
    """``client.py`` serving every session of this test process.

    Threads read its pipes, so it serves any event loop; each reply goes to the loop of the
    step awaiting it. It exits when its stdin closes: at exit here, or when this process dies.
    """

    def __init__(self, python: Path) -> None:
        self._process = subprocess.Popen(
            [str(python), "-W", "ignore::DeprecationWarning", str(_CLIENT_DIR / "client.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._waiting: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Queue[Reply]]] = {}
        self._stderr: collections.deque[str] = collections.deque(maxlen=200)
        self._gone = False
        assert self._process.stdin is not None
        assert self._process.stdout is not None
        assert self._process.stderr is not None
        self._pipes = (self._process.stdin, self._process.stdout, self._process.stderr)
        self._readers = (
            threading.Thread(target=self._read, args=(self._pipes[1],), daemon=True),
            threading.Thread(target=self._stderr.extend, args=(self._pipes[2],), daemon=True),
        )
        for reader in self._readers:
            reader.start()

    def alive(self) -> bool:
        return not self._gone and self._process.poll() is None

    def _read(self, stdout: IO[str]) -> None:
        for line in stdout:
            if not line.startswith('{"id": '):
                self._stderr.append(line)  # not a reply: shown if the process dies
                continue
            reply: Reply = json.loads(line)
            with self._lock:
                waiting = self._waiting.get(reply["id"])
            if waiting is not None:
                self._hand(*waiting, reply)
        with self._lock:
            self._gone = True
            orphans = list(self._waiting.values())
        for loop, queue in orphans:
            self._hand(loop, queue, {"reply": "gone"})

    @staticmethod
    def _hand(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[Reply], reply: Reply) -> None:
        # RuntimeError: that step's loop is closed, nobody waits any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(queue.put_nowait, reply)

    def start(self, url: str, name: str, args: dict[str, Any]) -> tuple[int, asyncio.Queue[Reply]]:
        """Start step ``name``; its replies arrive on the queue."""
        queue: asyncio.Queue[Reply] = asyncio.Queue()
        with self._lock:
            request_id = next(self._ids)
            self._waiting[request_id] = (asyncio.get_running_loop(), queue)
            if self._gone:
                queue.put_nowait({"reply": "gone"})
        self._send({"id": request_id, "url": url, "step": name, "args": args})
        return request_id, queue

    def tell(self, request_id: int, order: str) -> None:
        """``stop`` a watch (it still replies) or ``cancel`` a step (its replies are dropped)."""
        if order == "cancel":
            self.forget(request_id)
        self._send({"id": request_id, order: True})

    def forget(self, request_id: int) -> None:
        with self._lock:
            self._waiting.pop(request_id, None)

    def _send(self, message: dict[str, Any]) -> None:
        stdin = self._pipes[0]
        # The process is gone (or closed, ValueError): the reader tells whoever waits.
        with contextlib.suppress(BrokenPipeError, ValueError), self._lock:
            stdin.write(json.dumps(message) + "\n")
            stdin.flush()

    async def reply(self, request_id: int, queue: asyncio.Queue[Reply]) -> Reply:
        """The next reply to the step: its output (a failure fails the test with the client's
        traceback); a step that does not answer in time is cancelled and raises TimeoutError."""
        try:
            reply = await asyncio.wait_for(queue.get(), timeout=_STEP_TIMEOUT)
        except BaseException:
            self.tell(request_id, "cancel")
            raise
        kind = reply.pop("reply")
        if kind == "gone":
            self.forget(request_id)
            raise AssertionError("mcp tasks client exited:\n" + "".join(self._stderr)[-3000:])
        if kind == "failed":
            self.forget(request_id)
            raise AssertionError(reply["traceback"][-3000:])
        if kind == "done":
            self.forget(request_id)
        reply.pop("id")
        return reply

    def close(self) -> None:
        """Close its stdin, so it ends its sessions and exits, and reap it."""
        with contextlib.suppress(BrokenPipeError), self._lock:
            self._pipes[0].close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        for reader in self._readers:
            reader.join(timeout=10)
        for pipe in self._pipes[1:]:
            pipe.close()


_processes: dict[Path, _ClientProcess] = {}
_processes_lock = threading.Lock()


def _client_process(python: Path) -> _ClientProcess:
    with _processes_lock:
        process = _processes.get(python)
        if process is None or not process.alive():
            if process is not None:
                process.close()
            process = _processes[python] = _ClientProcess(python)
        return process


@atexit.register
def _close_client_processes() -> None:
    for process in _processes.values():
        process.close()


class Watcher:
    """A ``watch`` session (see ``client.py``), running beside the other steps."""

    def __init__(
        self,
        process: _ClientProcess,
        request_id: int,
        queue: asyncio.Queue[Reply],
        ready: dict[str, Any],
    ) -> None:
        self._process = process
        self._id = request_id
        self._queue = queue
        self._finished = False
        self.ready = ready

    async def notifications(self, *, stop: bool = False) -> list[dict[str, Any]]:
        """The status notifications the session got: once it saw its task end (or, with
        ``stop``, as soon as it is told to stop)."""
        if stop:
            self._process.tell(self._id, "stop")
        try:
            out = await self._process.reply(self._id, self._queue)
        finally:
            self._finished = True
        notices: list[dict[str, Any]] = out["notifications"]
        return [n for n in notices if n.get("method") == "notifications/tasks/status"]

    def kill(self) -> None:
        if not self._finished:
            self._finished = True
            self._process.tell(self._id, "cancel")


class TasksClient:
    def __init__(self, python: Path, url: str) -> None:
        self.python = python
        self.url = url

    async def watch(self, **args: Any) -> Watcher:
        """Start a ``watch`` session; returns once it is connected (and its task created)."""
        process = _client_process(self.python)
        request_id, queue = process.start(self.url, "watch", args)
        ready = await process.reply(request_id, queue)
        return Watcher(process, request_id, queue, ready)

    async def step(self, name: str, **args: Any) -> dict[str, Any]:
        """Run one step (``call``, ``get``, ``list``, ``cancel``, ``result``, ``tools``) in a
        session of its own; its JSON output."""
        process = _client_process(self.python)
        request_id, queue = process.start(self.url, name, args)
        return await process.reply(request_id, queue)
