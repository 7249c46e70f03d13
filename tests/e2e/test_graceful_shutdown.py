"""SIGTERM against a real ``pausemesh serve`` process with open tails and runs in flight.

The server stops taking runs, lets a run that finishes within ``PAUSEMESH_SHUTDOWN_GRACE_SECONDS``
finish, ends the one that does not with ``RUN_ERROR`` ``SERVER_SHUTTING_DOWN``, ends every tail
with a clean end of stream (whole SSE frames, a complete chunked body), and exits 0 with no
ERROR line or traceback in its log.
"""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.agui import run_body
from tests.support.server import ServerProcess

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


async def test_sigterm_finishes_short_runs_ends_long_ones_and_closes_tails(tmp_path: Path) -> None:
    env = {
        "PAUSEMESH_SHUTDOWN_GRACE_SECONDS": "3",
        "PAUSEMESH_KEEPALIVE_SECONDS": "0.5",
        "PAUSEMESH_DATA_DIR": str(tmp_path),
    }
    server = ServerProcess(
        ["serve", "--agent", _AGENT, "--database-path", str(tmp_path / "pausemesh.db")], env=env
    )
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
    assert code == 0, log
    assert " ERROR " not in log, log
    assert "Traceback" not in log, log
