"""Runs that fail end cleanly, against a real uvicorn process (``tests.support.failing_app``).

An agent that raises ends its run with ``RUN_ERROR`` ``AGENT_FAILED`` (its own words stay in
the server log), an agent that never finishes is ended by ``PAUSEMESH_RUN_TIMEOUT_SECONDS``
with ``RUN_TIMEOUT``; either way the thread's lease is released at once, so the next run on the
same thread starts normally instead of ``THREAD_BUSY``.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.failing_app import SECRET
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow


class _AppProcess(ServerProcess):
    """``python -m uvicorn tests.support.failing_app:app``, settings from the environment."""

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "uvicorn",
            "tests.support.failing_app:app",
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--no-access-log",
        ]


@pytest.fixture(name="server", scope="module")
def server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data: Path = tmp_path_factory.mktemp("run-failures")
    env = {
        "PAUSEMESH_DATABASE_PATH": str(data / "pausemesh.db"),
        "PAUSEMESH_RUN_TIMEOUT_SECONDS": "2",
    }
    with _AppProcess([], env=env) as server:
        yield server


def _run(server: ServerProcess, thread_id: str, run_id: str, text: str) -> list[dict[str, Any]]:
    body = {
        "threadId": thread_id,
        "runId": run_id,
        "messages": [{"id": f"u-{run_id}", "role": "user", "content": text}],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    with (
        httpx.Client(timeout=60) as http,
        http.stream("POST", server.url("/agui"), json=body) as response,
    ):
        assert response.status_code == 200, response.read()
        raw = response.read().decode()
    assert SECRET not in raw
    return [
        json.loads(line[len("data: ") :]) for line in raw.split("\n") if line.startswith("data: ")
    ]


def _ends_normally(events: list[dict[str, Any]]) -> None:
    assert events[0]["type"] == "RUN_STARTED"
    assert events[-1]["type"] == "RUN_FINISHED"
    assert not [e for e in events if e["type"] == "RUN_ERROR"]


def test_an_agent_that_raises_ends_with_agent_failed_and_frees_the_thread(
    server: ServerProcess,
) -> None:
    thread_id = f"t-{uuid.uuid4()}"
    failed = _run(server, thread_id, "r-1", "fail")
    assert failed[0]["type"] == "RUN_STARTED"
    assert failed[-1]["type"] == "RUN_ERROR"
    assert failed[-1]["code"] == "AGENT_FAILED"
    assert failed[-1]["message"] == "The agent failed"
    # At once: no THREAD_BUSY while a lease of the failed run lingers.
    _ends_normally(_run(server, thread_id, "r-2", "hello"))
    assert SECRET in server.wait_for_output(SECRET)  # the operator sees what the client does not


def test_an_agent_that_never_finishes_ends_with_run_timeout_and_frees_the_thread(
    server: ServerProcess,
) -> None:
    thread_id = f"t-{uuid.uuid4()}"
    timed_out = _run(server, thread_id, "r-1", "hang")
    assert timed_out[0]["type"] == "RUN_STARTED"
    assert timed_out[-1]["type"] == "RUN_ERROR"
    assert timed_out[-1]["code"] == "RUN_TIMEOUT"
    _ends_normally(_run(server, thread_id, "r-2", "hello"))
    snapshot = httpx.get(server.url(f"/agui/threads/{thread_id}"), timeout=30).json()
    assert snapshot["messages"][-1]["role"] == "assistant"
