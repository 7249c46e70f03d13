"""Stream limits against a real ``pausemesh serve`` process (no resolver: keyed by address).

* a reader that stops reading is dropped after ``PAUSEMESH_SEND_TIMEOUT_SECONDS``: its run ends,
  the thread's lease and its stream slot are free again (a raw socket that never reads);
* ``PAUSEMESH_MAX_TAILS_PER_PRINCIPAL`` trips with 429 ``TOO_MANY_STREAMS`` before a tail
  starts, a run still starts beside the held tail (runs have their own
  ``PAUSEMESH_MAX_STREAMS_PER_PRINCIPAL``), and a tail that closes frees its slot;
* idle tails carry keep-alive comments.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.agui import run_body
from tests.support.rest import assert_problem
from tests.support.server import ServerProcess, assert_dropped_reader_closed_quietly, stalled_post
from tests.support.starlette_server import StarletteServer

pytestmark = pytest.mark.slow


@pytest.fixture(name="server", scope="module", params=["litestar", "starlette"])
def server_fixture(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[ServerProcess]:
    """``pausemesh serve``, and a Starlette app hosting ``StarletteAgui``: the same limits."""
    data: Path = tmp_path_factory.mktemp("stream-limits")
    env = {
        "PAUSEMESH_MAX_STREAMS_PER_PRINCIPAL": "1",
        "PAUSEMESH_MAX_TAILS_PER_PRINCIPAL": "1",
        "PAUSEMESH_SEND_TIMEOUT_SECONDS": "1",
        "PAUSEMESH_KEEPALIVE_SECONDS": "0.2",
        "PAUSEMESH_DATA_DIR": str(data),
    }
    database = str(data / "pausemesh.db")
    if request.param == "starlette":
        server: ServerProcess = StarletteServer(env={**env, "PAUSEMESH_DATABASE_PATH": database})
    else:
        args = ["serve", "--agent", "tests.support.limits_agent:agent"]
        server = ServerProcess([*args, "--database-path", database], env=env)
    with server:
        yield server


def _user(text: str) -> list[dict[str, str]]:
    return [{"id": f"u-{text}", "role": "user", "content": text}]


def _events(raw: str) -> list[dict[str, Any]]:
    return [
        json.loads(line[len("data: ") :]) for line in raw.split("\n") if line.startswith("data: ")
    ]


def _stalled_run(server: ServerProcess, thread_id: str) -> socket.socket:
    """POST a flooding run from a socket with a tiny receive buffer, read only its head."""
    body = json.dumps(run_body(thread_id, "r-flood", messages=_user("flood"))).encode()
    return stalled_post(server, "/agui", body, {"Content-Type": "application/json"})


def test_a_reader_that_stops_reading_is_dropped_and_frees_its_run_and_slot(
    server: ServerProcess,
) -> None:
    stalled = _stalled_run(server, "t-stalled")
    try:
        with httpx.Client(base_url=server.base_url, timeout=60) as http:
            # Until the server gives up on the stalled reader, its slot (the only one) is held.
            deadline = time.monotonic() + 90
            while True:
                assert time.monotonic() < deadline, server.output()[-3000:]
                response = http.post(
                    "/agui", json=run_body("t-stalled", "r-next", messages=_user("hello"))
                )
                if response.status_code == 429:
                    assert_problem(response, 429, "TOO_MANY_STREAMS")
                    time.sleep(0.2)
                    continue
                assert response.status_code == 200, response.text
                events = _events(response.text)
                if events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "THREAD_BUSY":
                    time.sleep(0.2)  # the slot is free; the lease goes a moment later
                    continue
                break
        # The same thread runs again, normally: the stalled run's lease is gone.
        assert events[0]["type"] == "RUN_STARTED"
        assert events[-1]["type"] == "RUN_FINISHED"
        output = server.wait_for_output("dropped an SSE reader that accepted nothing")
        assert "Traceback" not in output
    finally:
        stalled.close()
    if isinstance(server, StarletteServer):
        return  # its log is the host app's own
    assert_dropped_reader_closed_quietly(server)


def test_the_tail_cap_trips_before_a_tail_starts_a_run_still_starts_and_a_closed_tail_frees_it(
    server: ServerProcess,
) -> None:
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        first = http.post("/agui", json=run_body("t-cap", "r-1", messages=_user("hello")))
        assert first.status_code == 200
        with http.stream("GET", "/agui/threads/t-cap/events") as tail:
            assert tail.status_code == 200
            refused = http.get("/agui/threads/t-cap/events")
            problem = assert_problem(refused, 429, "TOO_MANY_STREAMS")
            assert problem["detail"] == "Too many open tails (at most 1); close one and retry"
            assert refused.headers["retry-after"] == "1"
            # Tails count apart from runs: the held tail leaves the one run slot free.
            run = http.post("/agui", json=run_body("t-cap", "r-2", messages=_user("hello")))
            assert run.status_code == 200, run.text
            assert _events(run.text)[-1]["type"] == "RUN_FINISHED"
        # The tail closed: its slot is free again (the server notices the disconnect).
        deadline = time.monotonic() + 30
        while True:
            with http.stream("GET", "/agui/threads/t-cap/events") as again:
                status = again.status_code
            if status != 429 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert status == 200


def test_an_idle_tail_carries_keep_alive_comments(server: ServerProcess) -> None:
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        http.post("/agui", json=run_body("t-idle", "r-1", messages=_user("hello")))
        comments = 0
        with http.stream("GET", "/agui/threads/t-idle/events") as tail:
            for line in tail.iter_lines():
                if line == ": keep-alive":
                    comments += 1
                if comments == 3:
                    break
        assert comments == 3
