"""SIGTERM against a real ``pausemesh serve`` process with open tails and runs in flight.

The server stops taking runs, lets a run that finishes within ``PAUSEMESH_SHUTDOWN_GRACE_SECONDS``
finish, ends the one that does not with ``RUN_ERROR`` ``SERVER_SHUTTING_DOWN``, ends every tail
with a clean end of stream (whole SSE frames, a complete chunked body), and exits 0 with no
ERROR line or traceback in its log. With a 2 s grace it is gone within grace + 2 s, a run that
reaches its route during the drain gets 503 ``SERVER_SHUTTING_DOWN`` with ``Retry-After``, and
after a restart the interrupted thread runs again and the tail resumes from ``Last-Event-ID``.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.agui import run_body
from tests.support.server import ServerProcess, assert_clean_exit, held_request, read_response

pytestmark = pytest.mark.slow

_AGENT = "tests.support.limits_agent:agent"


def _events(raw: str) -> list[dict[str, Any]]:
    return [
        json.loads(line[len("data: ") :]) for line in raw.split("\n") if line.startswith("data: ")
    ]


def _user(text: str) -> list[dict[str, str]]:
    return [{"id": "u-1", "role": "user", "content": text}]


async def _read_stream(
    client: httpx.AsyncClient, method: str, path: str, started: asyncio.Event, **kwargs: Any
) -> str:
    """The whole body of an SSE response; ``started`` is set once its first frame arrived."""
    raw = ""
    async with client.stream(method, path, **kwargs) as response:
        assert response.status_code == 200, await response.aread()
        # A connection cut mid-chunk raises here (httpx.RemoteProtocolError): it must not.
        async for text in response.aiter_text():
            raw += text
            if "\n\n" in raw:
                started.set()
    return raw


def _server(tmp_path: Path, *, grace: float) -> ServerProcess:
    """``pausemesh serve`` with the limits agent, a grace of ``grace`` s, keep-alives every 0.5 s."""
    env = {
        "PAUSEMESH_SHUTDOWN_GRACE_SECONDS": str(grace),
        "PAUSEMESH_KEEPALIVE_SECONDS": "0.5",
        "PAUSEMESH_DATA_DIR": str(tmp_path),
    }
    args = ["serve", "--agent", _AGENT, "--database-path", str(tmp_path / "pausemesh.db")]
    return ServerProcess(args, env=env)


async def test_sigterm_finishes_short_runs_ends_long_ones_and_closes_tails(tmp_path: Path) -> None:
    server = _server(tmp_path, grace=3)
    with server:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as client:
            # A thread with history, so its tail replays something before it idles.
            first = await client.post("/agui", json=run_body("t-tail", "r-0", messages=_user("hi")))
            assert first.status_code == 200
            started = [asyncio.Event() for _ in range(4)]
            streams = [
                _read_stream(client, "GET", "/agui/threads/t-tail/events", started[0]),
                _read_stream(
                    client,
                    "GET",
                    "/agui/threads/t-tail/events",
                    started[1],
                    headers={"last-event-id": "2"},
                ),
                _read_stream(
                    client,
                    "POST",
                    "/agui",
                    started[2],
                    json=run_body("t-short", "r-1", messages=_user("slow 1")),
                ),
                _read_stream(
                    client,
                    "POST",
                    "/agui",
                    started[3],
                    json=run_body("t-long", "r-1", messages=_user("slow 120")),
                ),
            ]
            tasks = [asyncio.create_task(stream) for stream in streams]
            await asyncio.wait_for(asyncio.gather(*(e.wait() for e in started)), timeout=30)
            assert server.process is not None
            server.process.send_signal(signal.SIGTERM)
            tail, replay, short, long = await asyncio.wait_for(asyncio.gather(*tasks), timeout=30)

        code = await asyncio.to_thread(server.process.wait, 30)
        log = server.output()

    for raw in (tail, replay, short, long):
        assert raw.endswith("\n\n"), raw[-200:]  # whole frames only
    assert [e["type"] for e in _events(tail)][-1] in {"RUN_FINISHED", "TEXT_MESSAGE_END"}
    assert _events(short)[-1]["type"] == "RUN_FINISHED"
    assert not [e for e in _events(short) if e["type"] == "RUN_ERROR"]
    ended = _events(long)[-1]
    assert ended["type"] == "RUN_ERROR"
    assert ended["code"] == "SERVER_SHUTTING_DOWN"
    assert_clean_exit(code, log)


def _id_lines(raw: str) -> list[str]:
    return [line[len("id: ") :] for line in raw.split("\n") if line.startswith("id: ")]


async def _tail_until_finished(client: httpx.AsyncClient, path: str, **kwargs: Any) -> str:
    """A tail read up to the end of the next finished run (the tail itself stays open)."""
    raw = ""
    async with client.stream("GET", path, **kwargs) as response:
        assert response.status_code == 200, await response.aread()
        async for text in response.aiter_text():
            raw += text
            if '"type":"RUN_FINISHED"' in raw.replace(" ", "") and raw.endswith("\n\n"):
                return raw
    return raw


async def test_sigterm_with_a_short_grace_exits_in_time_and_the_thread_works_after_a_restart(
    tmp_path: Path,
) -> None:
    grace = 2.0
    server = _server(tmp_path, grace=grace)
    with server:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as client:
            first = await client.post("/agui", json=run_body("t-a", "r-0", messages=_user("hi")))
            assert first.status_code == 200
            started = [asyncio.Event() for _ in range(2)]
            tail_task = asyncio.create_task(
                _read_stream(client, "GET", "/agui/threads/t-a/events", started[0])
            )
            long_task = asyncio.create_task(
                _read_stream(
                    client,
                    "POST",
                    "/agui",
                    started[1],
                    json=run_body("t-b", "r-1", messages=_user("slow 120")),
                )
            )
            await asyncio.wait_for(asyncio.gather(*(e.wait() for e in started)), timeout=30)
            late_body = json.dumps(run_body("t-c", "r-1", messages=_user("hi"))).encode()
            late = await asyncio.to_thread(
                held_request, server, "/agui", {"Content-Type": "application/json"}, len(late_body)
            )
            assert server.process is not None
            server.process.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            # The tail ends as soon as the drain begins; the run accepted before the signal
            # reaches its route only now.
            tail = await asyncio.wait_for(tail_task, timeout=30)
            late.sendall(late_body)
            status, headers, body = await asyncio.to_thread(read_response, late)
            late.close()
            long = await asyncio.wait_for(long_task, timeout=30)
        code = await asyncio.to_thread(server.process.wait, 30)
        exited = time.monotonic()
        log = server.output()

        # The process is gone within the grace period plus 2 s, cleanly.
        assert_clean_exit(code, log, took=exited - signalled, grace=grace)
        # The open tail ended after a whole frame (a cut chunk raised in _read_stream).
        assert tail.endswith("\n\n"), tail[-200:]
        assert _events(tail)[-1]["type"] == "RUN_FINISHED"
        # The run that outlasted the grace ended with SERVER_SHUTTING_DOWN, as a whole frame.
        assert long.endswith("\n\n"), long[-200:]
        assert _events(long)[-1]["type"] == "RUN_ERROR"
        assert _events(long)[-1]["code"] == "SERVER_SHUTTING_DOWN"
        # The run that reached its route during the drain was turned away, with when to retry.
        assert status == 503, body
        assert json.loads(body)["code"] == "SERVER_SHUTTING_DOWN"
        assert int(headers["retry-after"]) >= 1

        # After a restart: the interrupted thread runs again, and the tail resumes from the
        # last event id it saw with only what came after it.
        last_seen = _id_lines(tail)[-1]
        server.start()
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as client:
            again = await client.post(
                "/agui", json=run_body("t-b", "r-2", messages=_user("hi again"))
            )
            assert again.status_code == 200
            assert _events(again.text)[0]["type"] == "RUN_STARTED"
            assert _events(again.text)[-1]["type"] == "RUN_FINISHED"
            late_run = await client.post("/agui", json=run_body("t-c", "r-1", messages=_user("hi")))
            assert _events(late_run.text)[-1]["type"] == "RUN_FINISHED"
            more = await client.post("/agui", json=run_body("t-a", "r-1", messages=_user("hi")))
            assert _events(more.text)[-1]["type"] == "RUN_FINISHED"
            resumed = await asyncio.wait_for(
                _tail_until_finished(
                    client, "/agui/threads/t-a/events", headers={"last-event-id": last_seen}
                ),
                timeout=30,
            )
        replayed = _events(resumed)
        assert (replayed[0]["type"], replayed[0]["runId"]) == ("RUN_STARTED", "r-1")
        assert [e["type"] for e in replayed][-1] == "RUN_FINISHED"
        assert all(int(i) > int(last_seen) for i in _id_lines(resumed))
