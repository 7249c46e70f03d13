"""Idle tails count apart from runs, against a real ``pausemesh serve`` process with the default
caps (32 tails, 32 runs per principal) and a principal named by the ``X-Principal`` header.

One principal opens 40 tails of its thread: 32 are admitted, the other 8 get 429
``TOO_MANY_STREAMS`` saying the tails are full. Holding all 32, the same principal still starts
a run, and the held tails carry it: an idle tail never costs its owner the next message.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from tests.support.agui import post_run, run_body
from tests.support.rest import assert_problem
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

TAILS = 40
DEFAULT_TAIL_CAP = 32
ALICE = {"x-principal": "alice"}


@pytest.fixture(name="server", scope="module")
def server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data: Path = tmp_path_factory.mktemp("idle-tails")
    args = [
        "serve",
        "--agent",
        "tests.support.limits_agent:agent",
        "--principal-resolver",
        "tests.support.agui:header_principal",
        "--database-path",
        str(data / "pausemesh.db"),
    ]
    with ServerProcess(args, env={"PAUSEMESH_DATA_DIR": str(data)}) as server:
        yield server


def _user(text: str) -> list[dict[str, str]]:
    return [{"id": f"u-{text}", "role": "user", "content": text}]


def test_a_principal_holding_its_tail_cap_still_starts_a_run_that_its_tails_carry(
    server: ServerProcess,
) -> None:
    limits = httpx.Limits(max_connections=TAILS + 8, max_keepalive_connections=0)
    with (
        httpx.Client(base_url=server.base_url, timeout=60, limits=limits, headers=ALICE) as http,
        ExitStack() as held,
    ):
        post_run(http, run_body("t-tails", "r-first", messages=_user("hello")))
        tails: list[httpx.Response] = []
        refused: list[httpx.Response] = []
        for _ in range(TAILS):
            tail = held.enter_context(http.stream("GET", "/agui/threads/t-tails/events?after=0"))
            if tail.status_code == 429:
                tail.read()
                refused.append(tail)
            else:
                tails.append(tail)

        run = post_run(http, run_body("t-tails", "r-while-tailing", messages=_user("hello")))

        # A held tail carries the run it did not stand in the way of.
        carried = []
        for line in tails[0].iter_lines():
            if line.startswith("data: "):
                event = json.loads(line[len("data: ") :])
                if event.get("runId") == "r-while-tailing":
                    carried.append(event["type"])
                    if event["type"] == "RUN_FINISHED":
                        break

    assert [tail.status_code for tail in tails] == [200] * DEFAULT_TAIL_CAP
    assert len(refused) == TAILS - DEFAULT_TAIL_CAP
    for answer in refused:
        problem = assert_problem(answer, 429, "TOO_MANY_STREAMS")
        assert problem["detail"] == "Too many open tails (at most 32); close one and retry"
    assert run.events[0]["type"] == "RUN_STARTED"
    assert run.last["type"] == "RUN_FINISHED"
    assert carried[0] == "RUN_STARTED"
    assert carried[-1] == "RUN_FINISHED"
