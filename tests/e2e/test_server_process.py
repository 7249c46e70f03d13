"""The test harness's server processes: a server is ready only once it answers itself.

Ports are picked free just before a server binds them, so a parallel test's server can take
one in between; these tests stage that race with two real servers.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from bench.tails import rss_kib

from tests.support import server as server_module
from tests.support.listeners import holds_listener, process_tree, took_everything_sent
from tests.support.server import ServerProcess


@pytest.fixture(name="holder")
def holder_fixture(tmp_path: Path) -> Iterator[ServerProcess]:
    with ServerProcess(["serve", "--database-path", str(tmp_path / "holder.db")]) as server:
        yield server


def test_a_listening_socket_is_held_by_its_process_and_not_by_another() -> None:
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            sock.listen()
            port = sock.getsockname()[1]
            assert holds_listener(os.getpid(), port)
            assert not holds_listener(other.pid, port)
        assert not holds_listener(os.getpid(), port)
    finally:
        other.kill()
        other.wait()


def test_a_connection_is_taken_once_accepted_and_all_it_sent_is_read_by_that_process() -> None:
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            with socket.create_connection(listener.getsockname()) as client:
                client.sendall(b"head")
                assert not took_everything_sent(os.getpid(), client)  # queued, not accepted
                accepted, _ = listener.accept()
                with accepted:
                    assert not took_everything_sent(os.getpid(), client)  # accepted, unread
                    assert accepted.recv(2) == b"he"
                    assert not took_everything_sent(os.getpid(), client)  # half read
                    assert accepted.recv(16) == b"ad"
                    assert took_everything_sent(os.getpid(), client)
                    assert not took_everything_sent(other.pid, client)
    finally:
        other.kill()
        other.wait()


def test_a_picked_port_another_server_took_first_moves_the_server_to_a_new_port(
    holder: ServerProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    picks = iter([holder.port])
    real_free_port = server_module.free_port
    monkeypatch.setattr(server_module, "free_port", lambda: next(picks, None) or real_free_port())

    with ServerProcess(["serve", "--database-path", str(tmp_path / "late.db")]) as late:
        assert late.port != holder.port
        assert holds_listener(late.pid, late.port)
        assert not holds_listener(late.pid, holder.port)
        assert httpx.get(late.url("/healthz"), timeout=10).status_code == 200
        # The lost start's bind error is kept apart: the output is the running server's own.
        [lost] = late.lost_starts
        assert f"port {holder.port} is in use (try --port)" in lost
        assert "ERROR" not in late.output()
        assert f"127.0.0.1:{late.port}" in late.output()


def test_a_given_port_another_server_holds_fails_the_start_instead_of_reporting_ready(
    holder: ServerProcess, tmp_path: Path
) -> None:
    late = ServerProcess(["serve", "--database-path", str(tmp_path / "late.db")], port=holder.port)
    try:
        with pytest.raises(RuntimeError, match=r"is in use \(try --port\)"):
            late.start()
    finally:
        late.close()
    assert holds_listener(holder.pid, holder.port)


def test_a_process_tree_holds_children_and_grandchildren_and_rss_counts_them() -> None:
    # A child that starts a grandchild holding 64 MiB, and says when both are up.
    code = (
        "import subprocess, sys\n"
        "grandchild = subprocess.Popen([sys.executable, '-c',"
        ' \'import sys, time; b = bytearray(64 << 20); b[::4096] = b"x" * len(b[::4096]);'
        " print(flush=True); time.sleep(60)'], stdout=subprocess.PIPE)\n"
        "grandchild.stdout.readline()\n"
        "print(grandchild.pid, flush=True)\n"
        "grandchild.wait()\n"
    )
    before = rss_kib(os.getpid())
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) as child:
        try:
            assert child.stdout is not None
            grandchild = int(child.stdout.readline())
            assert {os.getpid(), child.pid, grandchild} <= process_tree(os.getpid())
            assert os.getppid() not in process_tree(os.getpid())
            assert rss_kib(os.getpid()) - before >= 64 * 1024
        finally:
            for pid in process_tree(child.pid):
                os.kill(pid, signal.SIGKILL)
