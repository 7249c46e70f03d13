"""A fork server for the test suite's ``python -m pausemesh ...`` server processes.

Starting a server process costs about 1.7 s of CPU for ``pausemesh demo`` (0.8 s for
``serve``), almost all of it importing Litestar, the MCP and A2A SDKs and the package. The
suite starts such processes hundreds of times on a 2-core machine, so that is most of its time.

One fork server per pytest process imports those modules once, single-threaded and with no
event loop, then forks a child for each server a test starts. The child is the server: its own
pid, port and log, the test's environment, working directory and arguments; it runs the same
``pausemesh.cli.main`` as ``python -m pausemesh`` and ends the same way (``SystemExit``, so
atexit handlers and thread shutdown run). Signals go straight to the child's pid, so a SIGTERM
drains and a SIGKILL is a crash, exactly as for a process the test spawned itself.

``ForkedProcess`` is what ``ServerProcess.process`` holds then: the part of ``subprocess.Popen``
the tests use (``pid``, ``poll``, ``wait``, ``returncode``, ``send_signal``, ``terminate``,
``kill``). The fork server reaps the child and sends its exit status over the test's
connection (a negative signal number for a signal, as ``Popen`` reports it). If the test
process goes away, the fork server kills its children and exits.

Only plain ``python -m pausemesh`` commands are forked, and only with an environment that does
not change how the interpreter starts (``PAUSEMESH_TEST_FORK=0`` turns the fork server off);
anything else is spawned as before.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import runpy
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = (
    "ForkedProcess",
    "can_fork",
    "fork_server",
    "launch_command",
    "read_message",
    "send_request",
)

REPO_ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = Path(__file__).with_name("forklaunch.py")
# Scripts a fork may run besides `-m pausemesh` (they import only what the preload holds).
_SCRIPTS = frozenset({str(Path(__file__).with_name("upstream_mcp.py"))})
# What every forked server shares: the command line, the app, the demo's protocols, uvicorn.
# Never an optional integration (pydantic-ai, LangGraph, the OpenTelemetry SDK): tests check
# that a server without them does not load them.
_PRELOAD = (
    "pausemesh.cli.main",
    "pausemesh.web.app",
    "pausemesh.demo.protocols",
    "pausemesh.serving.server",
    "pausemesh.gateway.mcp_compose",
    "pausemesh.gateway.upstream",
    "mcp.client.stdio",
    "mcp.server.stdio",
    "mcp.client.streamable_http",
    "uvicorn",
    "uvloop",
    "httpx",
)
# Environment variables that change how an interpreter starts: a fork cannot honour them.
_INTERPRETER_VARIABLES = frozenset(
    {
        "PYTHONHOME",
        "PYTHONMALLOC",
        "PYTHONDEVMODE",
        "PYTHONWARNINGS",
        "PYTHONFAULTHANDLER",
        "PYTHONTRACEMALLOC",
        "PYTHONHASHSEED",
        "PYTHONOPTIMIZE",
        "PYTHONSAFEPATH",
        "PYTHONNODEBUGRANGES",
        "PYTHONINSPECT",
        "PYTHONPROFILEIMPORTTIME",
        "PYTHONASYNCIODEBUG",
    }
)
_REAP_EVERY = 0.05


def can_fork(command: Sequence[str], env: Mapping[str, str]) -> bool:
    """Whether ``command`` is ``python -m pausemesh ...`` (or a test script the preload covers)
    with an environment a fork honours."""
    if os.environ.get("PAUSEMESH_TEST_FORK", "1") == "0" or sys.platform != "linux":
        return False
    pausemesh = list(command[:3]) == [sys.executable, "-m", "pausemesh"]
    if not pausemesh and not (len(command) > 1 and command[1] in _SCRIPTS):
        return False
    return not any(name in _INTERPRETER_VARIABLES or name.startswith("PYTHONX") for name in env)


class ForkedProcess:
    """A server forked by the fork server: the ``subprocess.Popen`` surface the tests use."""

    def __init__(
        self, args: list[str], pid: int, connection: socket.socket, buffer: bytearray
    ) -> None:
        self.args = args
        self.pid = pid
        self.returncode: int | None = None
        self._connection = connection
        self._buffer = buffer  # what came after the pid: the exit status, if it was quick

    def _take_status(self, timeout: float | None) -> None:
        if self.returncode is not None:
            return
        self._connection.settimeout(timeout)
        try:
            self.returncode = read_message(self._connection, self._buffer)["exit"]
        except (TimeoutError, BlockingIOError):
            return
        self._connection.close()

    def poll(self) -> int | None:
        self._take_status(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self._take_status(timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def send_request(
    connection: socket.socket,
    python_args: list[str],
    *,
    env: Mapping[str, str],
    cwd: str | Path,
    fds: list[int],
) -> None:
    """Ask for ``python <python_args>`` (``-m pausemesh ...`` or a script) on ``fds``: one fd
    for stdout and stderr (stdin empty), or three for stdin, stdout and stderr."""
    request = {"python": python_args, "env": dict(env), "cwd": str(cwd)}
    socket.send_fds(connection, [json.dumps(request).encode() + b"\n"], fds)


def read_message(connection: socket.socket, buffer: bytearray) -> dict[str, int]:
    """The fork server's next line (``{"pid": N}``, then ``{"exit": code}``); what arrives
    beyond it stays in ``buffer`` for the next call, as does a line cut by a socket timeout."""
    while b"\n" not in buffer:
        chunk = connection.recv(4096)
        if not chunk:
            msg = "the test fork server closed the connection"
            raise RuntimeError(msg)
        buffer += chunk
    line, _, rest = bytes(buffer).partition(b"\n")
    buffer[:] = rest
    message: dict[str, int] = json.loads(line)
    return message


def launch_command(command: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
    """``command`` run through ``forklaunch.py`` (a forked child on the caller's own stdin,
    stdout and stderr) when it can be forked, else unchanged: for commands a test does not start
    through ``ServerProcess`` (an MCP client's stdio server, a CLI call)."""
    if not can_fork(command, env or {}):
        return list(command)
    return [sys.executable, str(LAUNCHER), fork_server.path(), *command[1:]]


class _ForkServer:
    """The test process's handle on its fork server (started on first use)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._path = ""

    def _ensure(self) -> str:
        with self._lock:
            if self._process is not None and self._process.poll() is None:
                return self._path
            directory = tempfile.mkdtemp(prefix="pausemesh-forkserver-")
            self._path = str(Path(directory) / "socket")
            env = {k: v for k, v in os.environ.items() if not k.startswith("PAUSEMESH_")}
            env.pop("PYTHONPATH", None)
            env["PYTHONUNBUFFERED"] = "1"
            ready_read, ready_write = os.pipe()
            self._process = subprocess.Popen(
                [sys.executable, "-m", "tests.support.forkserver", self._path, str(ready_write)],
                cwd=REPO_ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                pass_fds=(ready_write,),
            )
            os.close(ready_write)
            # The server writes one byte once it listens (nothing if its imports fail).
            with os.fdopen(ready_read, "rb") as ready:
                if ready.read(1) != b"1":
                    msg = "the test fork server did not start"
                    raise RuntimeError(msg)
            return self._path

    def path(self) -> str:
        """The fork server's socket (started on first use), for ``launch_command``."""
        return self._ensure()

    def spawn(
        self, command: Sequence[str], *, env: Mapping[str, str], cwd: str | Path, log: int
    ) -> ForkedProcess:
        """Fork ``command`` (``python -m pausemesh ...``) with its output on the ``log`` fd."""
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect(self._ensure())
        send_request(connection, list(command[1:]), env=env, cwd=cwd, fds=[log])
        buffer = bytearray()
        pid = read_message(connection, buffer)["pid"]
        return ForkedProcess(list(command), pid, connection, buffer)

    def close(self) -> None:
        with self._lock:
            if self._process is not None and self._process.poll() is None:
                self._process.terminate()
                self._process.wait(15)


fork_server = _ForkServer()


def _run_child(request: dict[str, Any], fds: list[int]) -> int:
    """In the forked child: become ``python <request["python"]>``; its exit code."""
    for sig in (signal.SIGTERM, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as the interpreter sets it at start
    if len(fds) == 1:
        stdin = os.open(os.devnull, os.O_RDONLY)
        fds = [stdin, fds[0], fds[0]]
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in set(fds):
        if fd > 2:  # above stdin, stdout and stderr: received, not kept
            os.close(fd)
    cwd = request["cwd"]
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(request["env"])
    python: list[str] = request["python"]
    module = python[0] == "-m"
    # `python -m` puts the working directory first, a script its own directory; then
    # PYTHONPATH, then the site packages.
    first = cwd if module else str(Path(python[0]).parent)
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [first, *extra, *[p for p in sys.path[1:] if p not in extra]]
    importlib.invalidate_caches()
    sys.orig_argv = [sys.executable, *python]
    if not module:
        sys.argv = list(python)
        runpy.run_path(python[0], run_name="__main__")
        return 0
    argv = python[2:]
    sys.argv = [str(REPO_ROOT / "backend" / "pausemesh" / "__main__.py"), *argv]
    from pausemesh.cli.main import main  # noqa: PLC0415 - preloaded; imported here by name

    return int(main(argv))


class _Server:
    """The fork server's loop: accept a request and fork, notice a test gone, reap."""

    def __init__(self, path: str) -> None:
        self.me = os.getpid()
        self.path = path
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(64)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ)
        self.children: dict[int, socket.socket] = {}

    def serve(self, parent: int) -> None:
        try:
            while os.getppid() == parent:
                for key, _ in self.selector.select(_REAP_EVERY):
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    if sock is self.listener:
                        self._fork()
                    elif not sock.recv(1):
                        self._gone(sock)
                self._reap()
        finally:
            if os.getpid() == self.me:
                for pid in self.children:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(OSError):
                    os.unlink(self.path)
                    os.rmdir(Path(self.path).parent)

    def _fork(self) -> None:
        connection, _ = self.listener.accept()
        payload, fds, _, _ = socket.recv_fds(connection, 1 << 20, 3)
        while not payload.endswith(b"\n"):
            payload += connection.recv(1 << 20)
        request = json.loads(payload)
        pid = os.fork()
        if pid == 0:
            # The child leaves the loop by SystemExit, as `python -m pausemesh` ends.
            self.selector.close()
            self.listener.close()
            for other in self.children.values():
                other.close()
            connection.close()
            code = 1
            try:
                code = _run_child(request, fds)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
            raise SystemExit(code)
        for fd in fds:
            os.close(fd)
        self.children[pid] = connection
        connection.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        self.selector.register(connection, selectors.EVENT_READ)

    def _gone(self, sock: socket.socket) -> None:
        """The test closed its end (it went away): its children go with it."""
        self.selector.unregister(sock)
        for pid, connection in list(self.children.items()):
            if connection is sock:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            connection = self.children.pop(pid, None)
            if connection is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            with contextlib.suppress(OSError):
                connection.sendall(json.dumps({"exit": code}).encode() + b"\n")
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(connection)
            connection.close()


def _serve(path: str, ready_fd: int) -> None:
    for name in _PRELOAD:
        importlib.import_module(name)
    if threading.active_count() != 1:
        msg = f"a preloaded module started a thread: {threading.enumerate()}"
        raise RuntimeError(msg)
    server = _Server(path)
    parent = os.getppid()
    os.write(ready_fd, b"1")
    os.close(ready_fd)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server.serve(parent)


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]))
