"""``PAUSEMESH_MAX_THREAD_BYTES`` against real server processes (issue 40, item 6): ``pausemesh
serve`` (the plugin's routes) and a Starlette app hosting ``StarletteAgui``, each with a 64 KiB
bound and the limits agent (``ask`` pauses). A thread filled to its bound refuses the next run
with ``RUN_ERROR`` ``THREAD_TOO_LARGE`` before anything is stored (its snapshot and log are
unchanged), and its pending question is still answered."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.agui import RunResult, post_run, run_body
from tests.support.server import ServerProcess
from tests.support.starlette_server import StarletteServer

pytestmark = pytest.mark.slow

LIMIT = 65_536
# Three runs of 20,000 characters fill about 60 KB of the 64 KiB; a fourth would pass it.
FILLER = 20_000


@pytest.fixture(name="server", scope="module", params=["litestar", "starlette"])
def server_fixture(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[ServerProcess]:
    data: Path = tmp_path_factory.mktemp("thread-size")
    env = {
        "PAUSEMESH_MAX_THREAD_BYTES": str(LIMIT),
        # A tail that has replayed the log says so soon (``_log`` stops at the first comment).
        "PAUSEMESH_KEEPALIVE_SECONDS": "0.3",
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


def _user(message_id: str, text: str) -> list[dict[str, str]]:
    return [{"id": message_id, "role": "user", "content": text}]


def _run(http: httpx.Client, thread_id: str, run_id: str, **fields: Any) -> RunResult:
    return post_run(http, run_body(thread_id, run_id, **fields))


def _log(http: httpx.Client, thread_id: str) -> str:
    """The thread's whole event log as replayed: the tail is cut at its first comment (a
    keep-alive once it idles, or sse-starlette's ping)."""
    lines: list[str] = []
    with http.stream("GET", f"/agui/threads/{thread_id}/events") as tail:
        for line in tail.iter_lines():
            if line.startswith(":"):
                break
            lines.append(line)
    return "\n".join(lines)


def test_a_thread_at_its_byte_limit_refuses_the_next_run_and_still_takes_the_answer(
    server: ServerProcess,
) -> None:
    thread = "t-full"
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        for n in range(3):
            filled = _run(http, thread, f"r-{n}", messages=_user(f"u-{n}", "f" * FILLER))
            assert filled.last["type"] == "RUN_FINISHED", filled.events
        asked = _run(http, thread, "r-ask", messages=_user("u-ask", "ask"))
        (interrupt,) = asked.interrupts
        snapshot = http.get(f"/agui/threads/{thread}").json()
        assert [i["id"] for i in snapshot["pendingInterrupts"]] == [interrupt["id"]]
        log = _log(http, thread)

        refused = _run(http, thread, "r-more", messages=_user("u-more", "m" * FILLER))

        assert refused.types == ["RUN_ERROR"]
        assert refused.error_code == "THREAD_TOO_LARGE"
        assert f"limit of {LIMIT} bytes per thread" in refused.last["message"]
        # Nothing stored: the same snapshot (messages, pending question, last sequence) and
        # the same log, byte for byte.
        assert http.get(f"/agui/threads/{thread}").json() == snapshot
        assert _log(http, thread) == log
        # The pending question is answered all the same: the answer adds no message.
        answered = _run(
            http,
            thread,
            "r-answer",
            resume=[{"interruptId": interrupt["id"], "status": "resolved", "payload": "yes"}],
        )
        assert answered.last["type"] == "RUN_FINISHED", answered.events
        assert answered.text().startswith("resolved.")
        after = http.get(f"/agui/threads/{thread}").json()
        assert after["pendingInterrupts"] == []
        assert all(m["id"] != "u-more" for m in after["messages"])
        # And the thread stays full for anything new.
        again = _run(http, thread, "r-again", messages=_user("u-again", "m" * FILLER))
        assert again.error_code == "THREAD_TOO_LARGE"


def test_a_thread_under_its_limit_runs_as_before(server: ServerProcess) -> None:
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        result = _run(http, "t-small", "r-1", messages=_user("u-1", "hello"))
        assert result.types[0] == "RUN_STARTED"
        assert result.last["type"] == "RUN_FINISHED"
