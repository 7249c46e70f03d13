"""SIGTERM and SIGINT against ``pausemesh serve --workers 2`` with tails and runs open on each worker.

uvicorn's supervisor forwards a stop to its workers as SIGTERM; each worker then drains as the
single process does (``tests/e2e/test_graceful_shutdown.py``): its tails end with a clean end of
stream, a run that finishes within ``PAUSEMESH_SHUTDOWN_GRACE_SECONDS`` finishes, a longer one
ends with ``RUN_ERROR`` ``SERVER_SHUTTING_DOWN``; the supervisor exits 0 and no process logs an
ERROR or a traceback. "Ctrl-C" is SIGINT to every process of the group at once, as a terminal
sends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.agui import run_body
from tests.support.pinning import wait_for_every_worker
from tests.support.server import ServerProcess, assert_clean_exit

pytestmark = pytest.mark.slow

_AGENT = "tests.support.limits_agent:agent"
# Liveness bound for waits: only a stuck system gets near it (never a timing assertion).
STUCK = 60.0
WORKERS = 2
STREAMS_PER_WORKER = 3  # a tail, a run that ends within the grace, one that does not


def _events(raw: str) -> list[dict[str, Any]]:
    return [
        json.loads(line[len("data: ") :]) for line in raw.split("\n") if line.startswith("data: ")
    ]


def _user(text: str) -> list[dict[str, str]]:
    return [{"id": "u-1", "role": "user", "content": text}]


@contextlib.asynccontextmanager
async def clients_per_worker(
    server: ServerProcess,
) -> AsyncIterator[dict[int, list[httpx.AsyncClient]]]:
    """``STREAMS_PER_WORKER`` clients on each worker, each on one connection (so it stays)."""
    found: dict[int, list[httpx.AsyncClient]] = {}
    every: list[httpx.AsyncClient] = []
    # Every worker listens first, so the clients below are found quickly: one left idle for
    # the server's idle timeout (5 s) would reconnect, maybe to another worker.
    deadline = time.monotonic() + STUCK
    await asyncio.to_thread(wait_for_every_worker, server, WORKERS, deadline=deadline)
    try:
        while sum(len(c) for c in found.values()) < WORKERS * STREAMS_PER_WORKER:
            assert len(every) < 200, f"the connections did not spread: {found.keys()}"
            client = httpx.AsyncClient(
                base_url=server.base_url,
                timeout=STUCK,
                limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            )
            every.append(client)
            ready = await client.get("/readyz")
            assert ready.status_code == 200, ready.text
            on = found.setdefault(ready.json()["worker"], [])
            if len(on) < STREAMS_PER_WORKER:
                on.append(client)
        yield found
    finally:
        for client in every:
            await client.aclose()


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


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGINT", "ctrl-c"])
async def test_every_worker_drains_on_a_stop_and_the_supervisor_exits_0(
    tmp_path: Path, stop: str
) -> None:
    env = {
        "PAUSEMESH_SHUTDOWN_GRACE_SECONDS": "3",
        "PAUSEMESH_KEEPALIVE_SECONDS": "0.5",
        "PAUSEMESH_DATA_DIR": str(tmp_path),
    }
    args = ["serve", "--workers", str(WORKERS), "--agent", _AGENT]
    server = ServerProcess([*args, "--database-path", str(tmp_path / "pausemesh.db")], env=env)
    with server:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=STUCK) as client:
            # A thread with history, so its tails replay something before they idle.
            first = await client.post("/agui", json=run_body("t-tail", "r-0", messages=_user("hi")))
            assert first.status_code == 200
        async with clients_per_worker(server) as per_worker:
            assert len(per_worker) == WORKERS
            tasks: dict[tuple[int, str], asyncio.Task[str]] = {}
            started: list[asyncio.Event] = []
            for worker, (tail, brief, lasting) in per_worker.items():
                requests: list[tuple[str, httpx.AsyncClient, str, str, dict[str, Any]]] = [
                    ("tail", tail, "GET", "/agui/threads/t-tail/events", {}),
                    ("short", brief, "POST", "/agui", _run(f"t-short-{worker}", "slow 1")),
                    ("long", lasting, "POST", "/agui", _run(f"t-long-{worker}", "slow 120")),
                ]
                for kind, client, method, path, options in requests:
                    started.append(asyncio.Event())
                    stream = _read_stream(client, method, path, started[-1], **options)
                    tasks[worker, kind] = asyncio.create_task(stream)
            await asyncio.wait_for(asyncio.gather(*(e.wait() for e in started)), timeout=STUCK)
            assert server.process is not None
            if stop == "ctrl-c":
                # A terminal's ^C: the supervisor and every worker get SIGINT at once.
                for pid in [server.pid, *per_worker]:
                    os.kill(pid, signal.SIGINT)
            else:
                server.process.send_signal(signal.Signals[stop])
            bodies = await asyncio.wait_for(asyncio.gather(*tasks.values()), timeout=STUCK)
        code = await asyncio.to_thread(server.process.wait, STUCK)
        log = server.output()

    ended = dict(zip(tasks, bodies, strict=True))
    for worker in per_worker:
        for kind in ("tail", "short", "long"):
            assert ended[worker, kind].endswith("\n\n"), ended[worker, kind][-200:]  # whole frames
        assert _events(ended[worker, "tail"])[-1]["type"] in {"RUN_FINISHED", "TEXT_MESSAGE_END"}
        short = _events(ended[worker, "short"])
        assert short[-1]["type"] == "RUN_FINISHED"
        assert not [e for e in short if e["type"] == "RUN_ERROR"]
        long = _events(ended[worker, "long"])[-1]
        assert (long["type"], long["code"]) == ("RUN_ERROR", "SERVER_SHUTTING_DOWN")
        assert f"pausemesh.web[{worker}]: shutting down" in log
    assert_clean_exit(code, log)


def _run(thread_id: str, text: str) -> dict[str, Any]:
    return {"json": run_body(thread_id, "r-1", messages=_user(text))}
