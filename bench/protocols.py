"""Protocol benchmark: durable pauses completed per second over MCP and over A2A.

Against one real ``pausemesh demo`` process on SQLite (WAL, ``synchronous=FULL``), with the
official clients:

* MCP 2026-07-28: ``tools/call book_flight`` → ``input_required`` + sealed ``requestState``
  → retry with the answer → booking (2 HTTP exchanges, 1 continuation, 1 ledger operation).
* A2A (JSON-RPC, blocking): ``SendMessage`` → ``TASK_STATE_INPUT_REQUIRED`` → follow-up
  ``SendMessage`` → ``TASK_STATE_COMPLETED`` (2 exchanges, plus the task record writes).

``--concurrency`` pauses run at once. Prints pauses/s and p50/p99 pause latency. Figures,
never assertions.

Usage: .venv/bin/python bench/protocols.py [--pauses 200] [--concurrency 8]
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this directory would come first on sys.path and its http.py would shadow
# the stdlib's ``http`` package: swap it for the repository root before other imports.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Awaitable, Callable  # noqa: E402
from typing import Any  # noqa: E402

import httpx  # noqa: E402
from a2a.client import ClientConfig, create_client  # noqa: E402
from a2a.types import SendMessageRequest, TaskState  # noqa: E402
from mcp import Client  # noqa: E402
from mcp_types import CallToolResult, ElicitResult, InputRequiredResult  # noqa: E402
from tests.support.protocol_clients import user_message  # noqa: E402
from tests.support.server import ServerProcess  # noqa: E402


async def _never(_context: Any, _params: Any) -> ElicitResult:
    raise RuntimeError("the benchmark answers rounds itself")


async def mcp_pause(client: Client, n: int) -> None:
    arguments = {"destination": f"City {n}"}
    first = await client.session.call_tool("book_flight", arguments, allow_input_required=True)
    if not isinstance(first, InputRequiredResult):
        raise TypeError(first)
    done = await client.session.call_tool(
        "book_flight",
        arguments,
        allow_input_required=True,
        input_responses={"flight": ElicitResult(action="accept", content={"flight": "PM101"})},
        request_state=first.request_state,
    )
    if not isinstance(done, CallToolResult) or done.is_error:
        raise RuntimeError(done)


async def a2a_pause(client: Any, n: int) -> None:
    task = None
    async for response in client.send_message(
        SendMessageRequest(message=user_message(text=f"City {n}"))
    ):
        task = response.task
    if task is None or task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
        raise RuntimeError(task)
    follow_up = user_message(data={"flight": "PM202"}, task_id=task.id)
    async for response in client.send_message(SendMessageRequest(message=follow_up)):
        task = response.task
    if task.status.state != TaskState.TASK_STATE_COMPLETED:
        raise RuntimeError(task)


async def run(
    name: str, pauses: int, concurrency: int, one: Callable[[int], Awaitable[None]]
) -> None:
    latencies: list[float] = []
    queue = iter(range(pauses))

    async def worker() -> None:
        for n in queue:
            start = time.perf_counter()
            await one(n)
            latencies.append(time.perf_counter() - start)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    print(
        f"{name:<28} {pauses / elapsed:8.1f} pauses/s   p50 {statistics.median(latencies) * 1000:6.1f} ms"
        f"   p99 {p99 * 1000:6.1f} ms   ({pauses} pauses, concurrency {concurrency})"
    )


async def main(pauses: int, concurrency: int) -> None:
    with tempfile.TemporaryDirectory() as data:
        server = ServerProcess(
            [
                "demo",
                "--no-browser",
                "--database-path",
                f"{data}/pausemesh.db",
                "--log-level",
                "warning",
            ],
            env={"PAUSEMESH_DATA_DIR": data},
        )
        with server:
            async with Client(
                server.url("/mcp"),
                mode="2026-07-28",
                elicitation_callback=_never,  # type: ignore[arg-type]
            ) as mcp:
                await run(
                    "MCP 2026-07-28 round trip", pauses, concurrency, lambda n: mcp_pause(mcp, n)
                )
            async with httpx.AsyncClient(timeout=60) as http:
                a2a = await create_client(
                    server.url("/a2a"),
                    client_config=ClientConfig(httpx_client=http, streaming=False),
                )
                await run(
                    "A2A JSON-RPC follow-up", pauses, concurrency, lambda n: a2a_pause(a2a, n)
                )
                await a2a.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pauses", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=8)
    options = parser.parse_args()
    asyncio.run(main(options.pauses, options.concurrency))
