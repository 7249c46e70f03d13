"""``bench/lifecycle_client.c``, the lean client of ``bench/http.py``: what it counts is real.

Built with the machine's C compiler and run against a real ``pausemesh serve`` process on a
SQLite file: every lifecycle it reports is a continuation created and resumed on the server,
a refused request stops it with the server's answer, and a server that answers in chunks (as
Node may) is read as well as one that sends a ``Content-Length``.
"""

from __future__ import annotations

import http.server
import json
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from bench.http import RESUME, native_lifecycles, store_histograms, workers_store_histograms
from bench.native_client import compiler, run_client

from tests.support.server import ServerProcess

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(compiler() is None, reason="no C compiler on this machine"),
]


def test_every_lifecycle_the_native_client_counts_is_a_continuation_resumed_on_the_server(
    client_binary: Path, tmp_path: Path
) -> None:
    database = tmp_path / "bench.db"
    with ServerProcess(["serve", "--database-path", str(database)]) as server:
        run = native_lifecycles(client_binary, server.base_url, seconds=1.0, concurrency=4)
    assert run.count > 0
    assert len(run.latencies) == run.count
    assert all(latency > 0 for latency in run.latencies)
    with sqlite3.connect(database) as conn:
        settled, pending = conn.execute(
            "SELECT count(*) FILTER (WHERE pending_expires_at_us IS NULL),"
            " count(*) FILTER (WHERE pending_expires_at_us IS NOT NULL)"
            " FROM continuation_streams"
        ).fetchone()
    # A thread finishes the lifecycle it started before it looks at the clock again.
    assert (settled, pending) == (run.count, 0)


def test_the_native_client_stops_with_the_servers_answer_when_a_request_is_refused(
    client_binary: Path, tmp_path: Path
) -> None:
    with (
        ServerProcess(["serve", "--database-path", str(tmp_path / "bench.db")]) as server,
        pytest.raises(RuntimeError, match=r"create: unexpected status\n.*INVALID_REQUEST") as error,
    ):
        run_client(
            client_binary,
            server.base_url,
            seconds=1.0,
            concurrency=2,
            create={},  # no payload
            resume=RESUME,
        )
    assert "lifecycle client failed (1)" in str(error.value)


class _Chunked(http.server.BaseHTTPRequestHandler):
    """Answers create with a chunked body and resume with a Content-Length, on keep-alive."""

    protocol_version = "HTTP/1.1"
    resumed: list[tuple[str, str]]

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        if self.path == "/v1/continuations":
            body = json.dumps(
                {"continuation": {"continuationId": "c-1"}, "resumeToken": "t-1"}
            ).encode()
            self.send_response(201)
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for part in (body[:10], body[10:]):
                self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
            return
        self.resumed.append((self.path, self.headers["authorization"]))
        self.send_response(200)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the stdlib's name
        """Quiet: the test reads what was resumed, not a log."""


@pytest.fixture
def chunked_server() -> Iterator[tuple[str, list[tuple[str, str]]]]:
    resumed: list[tuple[str, str]] = []
    handler = type("Handler", (_Chunked,), {"resumed": resumed})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", resumed
    finally:
        server.shutdown()
        server.server_close()


def test_the_native_client_reads_a_chunked_create_answer_and_resumes_with_its_token(
    client_binary: Path, chunked_server: tuple[str, list[tuple[str, str]]]
) -> None:
    base_url, resumed = chunked_server
    run = native_lifecycles(client_binary, base_url, seconds=0.3, concurrency=1)
    assert run.count == len(resumed) > 0
    assert set(resumed) == {("/v1/continuations/c-1/resume", "PauseMesh t-1")}


def test_the_bench_reads_each_write_the_server_committed_from_its_store_histograms(
    client_binary: Path, tmp_path: Path
) -> None:
    """``bench/http.py --store-metrics`` reads what the server's /metrics says of its writes:
    two per lifecycle (create, resume), each group with its write-turn wait and commit time,
    and (``PAUSEMESH_SQLITE_SYNC=ack``) the WAL fsyncs that made them durable (one covers one
    group or more)."""
    group, commit, wait, sync = (
        "pausemesh_store_commit_group_size",
        "pausemesh_store_commit_seconds",
        "pausemesh_store_write_turn_wait_seconds",
        "pausemesh_store_wal_sync_seconds",
    )
    database = tmp_path / "bench.db"
    args = ["serve", "--database-path", str(database)]
    env = {"PAUSEMESH_METRICS": "1", "PAUSEMESH_SQLITE_SYNC": "ack"}
    with ServerProcess(args, env=env) as server:
        before = store_histograms(server.base_url)  # whatever the server wrote as it started
        run = native_lifecycles(client_binary, server.base_url, seconds=1.0, concurrency=4)
        [after] = workers_store_histograms(server.base_url, 1)
    assert run.count > 0
    assert after[group, "sum"] - before[group, "sum"] == 2 * run.count
    groups = after[group, "count"] - before[group, "count"]
    assert 0 < groups <= 2 * run.count
    # One process: every committed group took the turn first, and both were timed.
    assert after[wait, "count"] - before[wait, "count"] == groups
    assert after[commit, "count"] - before[commit, "count"] == groups
    assert after[commit, "sum"] > before[commit, "sum"]
    syncs = after[sync, "count"] - before[sync, "count"]
    assert 0 < syncs <= groups
    assert after[sync, "sum"] > before[sync, "sum"]
