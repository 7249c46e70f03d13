"""Real ``pausemesh`` server processes for end-to-end tests (and benchmarks).

``ServerProcess`` starts ``python -m pausemesh <command> ...`` on a free port, waits for
``/healthz``, and stops it with SIGTERM (graceful) or SIGKILL (a crash). It keeps the
process's output in a log file, shown when the server fails to come up.

    with ServerProcess(["serve", "--database-path", str(db)]) as server:
        httpx.get(server.url("/healthz"))
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

import httpx

from tests.support.forkserver import ForkedProcess, can_fork, fork_server
from tests.support.listeners import holds_listener, took_everything_sent

__all__ = (
    "ServerProcess",
    "assert_clean_exit",
    "free_port",
    "held_request",
    "read_response",
    "stalled_post",
)

REPO_ROOT = Path(__file__).resolve().parents[2]
_PORT_ATTEMPTS = 3
# Liveness bound for a held request's head to be read: only a stuck server gets near it.
_HEAD_TAKEN_WITHIN = 30.0


class _PortTakenError(RuntimeError):
    """The server could not bind its port: another process holds it."""


def free_port() -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def held_request(
    server: ServerProcess, path: str, headers: Mapping[str, str], length: int
) -> socket.socket:
    """A ``POST`` whose head the server has taken but whose ``length``-byte body the caller
    sends later (``sock.sendall(body)``): the request reaches its route only then, e.g. once
    the server drains.

    Returns once the server process has accepted the connection and read the head: a server
    that stops before then closes a connection with no request on it (or the listener with
    the connection still queued), and the body's send meets a reset instead of the route."""
    sock = socket.create_connection((server.host, server.port))
    lines = [f"POST {path} HTTP/1.1", f"Host: {server.host}:{server.port}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines.append(f"Content-Length: {length}")
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    deadline = time.monotonic() + _HEAD_TAKEN_WITHIN
    while not took_everything_sent(server.pid, sock):
        assert time.monotonic() < deadline, f"the head was never taken:\n{server.output()[-3000:]}"
        time.sleep(0.01)
    return sock


def stalled_post(
    server: ServerProcess, path: str, body: bytes, headers: Mapping[str, str]
) -> socket.socket:
    """A ``POST`` of a streaming request from a socket with a tiny receive buffer, read only up
    to its ``200`` response head and never again: a reader that stopped reading."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((server.host, server.port))
    lines = [f"POST {path} HTTP/1.1", f"Host: {server.host}:{server.port}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines.append(f"Content-Length: {len(body)}")
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
    head = sock.recv(1024)
    assert head.startswith(b"HTTP/1.1 200"), head
    return sock


def assert_clean_exit(
    code: int | None, log: str, *, took: float | None = None, grace: float | None = None
) -> None:
    """A drained server's end: exit code 0, no ERROR line and no traceback in its log and, when
    ``took`` (seconds from the signal to the exit) and ``grace`` are given, within grace + 2 s."""
    if took is not None and grace is not None:
        assert took <= grace + 2, log
    assert code == 0, log
    assert " ERROR " not in log, log
    assert "Traceback" not in log, log


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Status, headers (lower-case names) and body of one HTTP/1.1 response with a
    Content-Length, read from a raw socket."""
    raw = b""
    while b"\r\n\r\n" not in raw:
        chunk = sock.recv(4096)
        if not chunk:
            msg = f"connection closed before a response head: {raw!r}"
            raise ConnectionError(msg)
        raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {
        name.strip().lower(): value.strip()
        for name, _, value in (line.partition(":") for line in header_lines)
    }
    while len(body) < int(headers["content-length"]):
        chunk = sock.recv(4096)
        if not chunk:
            msg = f"connection closed inside the response body: {body!r}"
            raise ConnectionError(msg)
        body += chunk
    return int(status_line.split()[1]), headers, body


class ServerProcess:
    """One server process. ``args`` follow ``pausemesh`` (e.g. ``["serve", ...]``).

    ``--host``/``--port`` are added unless ``args`` has them; ``env`` is merged over a
    clean copy of the current environment (every ``PAUSEMESH_*`` variable removed, so a
    developer's shell never leaks into a test) and ``.env`` files are not read.
    """

    def __init__(
        self,
        args: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        port: int | None = None,
        host: str = "127.0.0.1",
        cwd: str | Path | None = None,
        ready_path: str = "/healthz",
        startup_timeout: float = 90.0,
    ) -> None:
        self.args = list(args)
        self.host = host
        self.port = port or free_port()
        # A port picked here may be taken by another test's server before this one binds it:
        # then the first start moves to a new one. A given port, or a restart, keeps its port.
        self._may_move_port = port is None
        self.lost_starts: list[str] = []
        """The output of each first start that lost its picked port (before the move)."""
        self.env = dict(env or {})
        self.cwd = Path(cwd) if cwd is not None else REPO_ROOT
        self.ready_path = ready_path
        self.startup_timeout = startup_timeout
        self.process: subprocess.Popen[bytes] | ForkedProcess | None = None
        self._log = tempfile.NamedTemporaryFile(  # noqa: SIM115 - lives as long as the server
            prefix="pausemesh-server-", suffix=".log", delete=False
        )
        self.log_path = Path(self._log.name)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def url(self, path: str) -> str:
        return self.base_url + path

    @property
    def pid(self) -> int:
        assert self.process is not None, "server not started"
        return self.process.pid

    def command(self) -> list[str]:
        args = list(self.args)
        if "--host" not in args:
            args += ["--host", self.host]
        if "--port" not in args:
            args += ["--port", str(self.port)]
        if "--env-file" not in args and args and args[0] in {"serve", "demo"}:
            args += ["--env-file", os.devnull]
        return [sys.executable, "-m", "pausemesh", *args]

    def _environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PAUSEMESH_")}
        env.update(self.env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env

    def start(self) -> Self:
        assert self.process is None or self.process.poll() is not None, "already running"
        for attempt in range(_PORT_ATTEMPTS):
            command, env = self.command(), self._environment()
            if can_fork(command, env):
                # The same process a spawn would give, without importing everything again.
                self.process = fork_server.spawn(
                    command, env=env, cwd=self.cwd, log=self._log.fileno()
                )
            else:
                self.process = subprocess.Popen(
                    command, cwd=self.cwd, env=env, stdout=self._log, stderr=subprocess.STDOUT
                )
            try:
                self.wait_ready()
            except _PortTakenError:
                if not self._may_move_port or attempt == _PORT_ATTEMPTS - 1:
                    raise
                # The lost start's lines (uvicorn's ERROR for the bind) are not this server's:
                # tests read the output for ERROR lines and tracebacks. Kept apart instead.
                self.lost_starts.append(self.output())
                self._log.seek(0)
                self._log.truncate()
                self.port = free_port()
                continue
            self._may_move_port = False
            return self
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                output = self.output()
                msg = f"server exited with {self.process.returncode}:\n{output}"
                # pausemesh says "port N is in use (try --port)"; uvicorn the OS's words.
                taken = "is in use (try --port)" in output or "address already in use" in (
                    output.lower()
                )
                raise (_PortTakenError if taken else RuntimeError)(msg)
            try:
                answered = httpx.get(self.url(self.ready_path), timeout=1.0).status_code == 200
            except httpx.TransportError:
                answered = False
            # Ready only when this server answered: another one may hold the port meanwhile.
            if answered and holds_listener(self.pid, self.port):
                return
            time.sleep(0.05)
        self.kill()
        msg = f"server did not become ready in {self.startup_timeout}s:\n{self.output()}"
        raise RuntimeError(msg)

    def output(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def wait_for_output(self, text: str, timeout: float = 30.0) -> str:
        """The output once it holds ``text``. The server writes the lines of one event-loop
        iteration at its end (``LoopBatchingHandler``), so a line about a request can reach the
        log just after the response reached the client."""
        deadline = time.monotonic() + timeout
        while text not in (output := self.output()):
            assert time.monotonic() < deadline, f"{text!r} not logged:\n{output[-3000:]}"
            time.sleep(0.05)
        return output

    def stop(self, timeout: float = 15.0, sig: signal.Signals = signal.SIGTERM) -> int | None:
        """Send ``sig`` (SIGTERM: graceful shutdown) and wait; SIGKILL if it hangs."""
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(sig)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return self.kill()

    def kill(self) -> int | None:
        """SIGKILL: no shutdown hooks run, like a crash or an OOM kill."""
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.kill()
        return self.process.wait(15)

    def restart(self) -> Self:
        """Start again with the same command and port (after ``stop`` or ``kill``)."""
        self.stop()
        return self.start()

    def close(self) -> None:
        self.stop()
        self._log.close()
        self.log_path.unlink(missing_ok=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def assert_dropped_reader_closed_quietly(server: ServerProcess) -> None:
    """After the send timeout dropped a reader, the server closes its connection and says so
    at INFO: no ERROR line (uvicorn's own for an unfinished response) is left in its log."""
    output = server.wait_for_output("closed the connection of the dropped SSE reader")
    assert "ERROR" not in output, output[-3000:]
