# ruff: noqa: E402 - sys.path is fixed before the imports (see below)
"""Bring-your-own-agent benchmark: one pydantic-ai agent, two servers, one client, one run.

The agent is ``examples/pydantic_ai_refund.py`` on its scripted ``FunctionModel`` (no network):
ask run (a user message → the ``issue_refund`` approval interrupt) + answer run (approve → the
refund runs → the model confirms) is one approval round trip. Served by

(a) pydantic-ai's own AG-UI app (``bench/pydantic_ai_agui_app.py`` under uvicorn; not durable:
    the client sends the history back, the pending approval lives in the client only), and
(b) ``pausemesh serve --agent examples.pydantic_ai_refund:agent`` (SQLite file, WAL,
    ``synchronous=FULL``: the thread, its event log, the pause with pydantic-ai's history, the
    continuation and the ledger entry are all durable).

``--concurrency`` round trips are kept in flight (16 new threads at any time); rounds alternate
a, b, a, b... Prints round trips/s, time to first event (request sent → first SSE ``data``
frame) p50/p99 over both runs of the round trip, server CPU per round trip (``/proc/<pid>/stat``)
and the ratio (b)/(a). Figures, never assertions.

Usage: .venv/bin/python bench/agents.py [--seconds 8] [--warmup 2] [--concurrency 16] [--rounds 2]
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse
import asyncio
import json
import os
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvloop
from tests.support.server import ServerProcess

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc/<pid>/stat (fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


class UvicornApp(ServerProcess):
    """``python -m uvicorn <module:app>`` (pydantic-ai's own app) instead of the CLI."""

    def command(self) -> list[str]:
        (app,) = self.args
        return [
            sys.executable,
            "-m",
            "uvicorn",
            app,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--no-access-log",
            "--log-level",
            "warning",
            "--loop",
            "uvloop",
        ]


@dataclass
class Tally:
    round_trips: int = 0
    first_event: list[float] = field(default_factory=list)


async def _run(client: httpx.AsyncClient, body: dict[str, Any], tally: Tally | None) -> list[Any]:
    sent = time.perf_counter()
    events: list[Any] = []
    async with client.stream("POST", "/agui", json=body) as response:
        if response.status_code != 200:
            msg = f"{response.status_code}: {(await response.aread())!r}"
            raise RuntimeError(msg)
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                if not events and tally is not None:
                    tally.first_event.append(time.perf_counter() - sent)
                events.append(json.loads(line[6:]))
    last = events[-1] if events else {}
    if last.get("type") != "RUN_FINISHED":
        msg = f"run ended with {last}"
        raise RuntimeError(msg)
    return events


def _history(user: dict[str, Any], events: list[Any]) -> list[dict[str, Any]]:
    """What pydantic-ai's app needs back: the user message and the assistant's tool call."""
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    start = next(e for e in events if e["type"] == "TOOL_CALL_START")
    arguments = "".join(e["delta"] for e in events if e["type"] == "TOOL_CALL_ARGS")
    call = {
        "id": start["toolCallId"],
        "type": "function",
        "function": {"name": start["toolCallName"], "arguments": arguments},
    }
    assistant = {
        "id": start.get("parentMessageId", f"m-{uuid.uuid4()}"),
        "role": "assistant",
        "content": text,
        "toolCalls": [call],
    }
    return [user, assistant]


async def round_trip(client: httpx.AsyncClient, tally: Tally | None, *, send_history: bool) -> None:
    thread_id = f"bench-{uuid.uuid4()}"
    user = {"id": f"u-{uuid.uuid4()}", "role": "user", "content": "Please refund order A-1001"}
    base = {"threadId": thread_id, "state": {}, "tools": [], "context": [], "forwardedProps": {}}
    asked = await _run(client, {**base, "runId": "ask", "messages": [user]}, tally)
    [interrupt] = asked[-1]["outcome"]["interrupts"]
    entry = {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}
    # pydantic-ai's app keeps nothing: the client sends the history back. PauseMesh keeps it.
    messages = _history(user, asked) if send_history else []
    done = await _run(
        client, {**base, "runId": "answer", "messages": messages, "resume": [entry]}, tally
    )
    if not any(e["type"] == "TOOL_CALL_RESULT" for e in done):
        msg = f"the approved tool did not run: {done}"
        raise RuntimeError(msg)
    if tally is not None:
        tally.round_trips += 1


async def measure(
    base_url: str, *, seconds: float, warmup: float, concurrency: int, send_history: bool, pid: int
) -> tuple[Tally, float, float]:
    limits = httpx.Limits(
        max_connections=concurrency * 2, max_keepalive_connections=concurrency * 2
    )
    async with httpx.AsyncClient(base_url=base_url, timeout=60, limits=limits) as client:
        counting: dict[str, Tally | None] = {"tally": None}
        stop = time.perf_counter() + warmup + seconds

        async def worker() -> None:
            while time.perf_counter() < stop:
                await round_trip(client, counting["tally"], send_history=send_history)

        workers = [asyncio.create_task(worker()) for _ in range(concurrency)]
        await asyncio.sleep(warmup)
        tally = Tally()
        counting["tally"] = tally
        cpu_before, started = cpu_seconds(pid), time.perf_counter()
        await asyncio.sleep(seconds)
        counting["tally"] = None
        cpu, elapsed = cpu_seconds(pid) - cpu_before, time.perf_counter() - started
        await asyncio.gather(*workers)
    return tally, elapsed, cpu


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pausemesh-bench-agents-") as tmp:
        servers: dict[str, tuple[Callable[[], ServerProcess], bool]] = {
            "(a) pydantic-ai AG-UI app": (
                lambda: UvicornApp(["bench.pydantic_ai_agui_app:app"]),
                True,
            ),
            "(b) pausemesh serve --agent": (
                lambda: ServerProcess(
                    [
                        "serve",
                        "--agent",
                        "examples.pydantic_ai_refund:agent",
                        "--database-path",
                        str(Path(tmp) / "agents.db"),
                        "--log-level",
                        "warning",
                    ]
                ),
                False,
            ),
        }
        results: dict[str, list[tuple[Tally, float, float]]] = {name: [] for name in servers}
        for _ in range(args.rounds):
            for name, (make, send_history) in servers.items():
                with make() as server:
                    measured = uvloop.run(
                        measure(
                            server.base_url,
                            seconds=args.seconds,
                            warmup=args.warmup,
                            concurrency=args.concurrency,
                            send_history=send_history,
                            pid=server.pid,
                        )
                    )
                results[name].append(measured)
                tally, elapsed, cpu = measured
                print(
                    f"{name}: {tally.round_trips / elapsed:7.1f} round trips/s,"
                    f" server CPU {cpu / max(tally.round_trips, 1) * 1000:5.1f} ms each",
                    flush=True,
                )
    print(f"\n{args.concurrency} round trips in flight, {args.rounds} rounds of {args.seconds}s")
    rates: dict[str, float] = {}
    for name, runs in results.items():
        trips = sum(t.round_trips for t, _, _ in runs)
        elapsed = sum(e for _, e, _ in runs)
        cpu = sum(c for _, _, c in runs)
        firsts = [f for t, _, _ in runs for f in t.first_event]
        rates[name] = trips / elapsed
        print(
            f"{name:30s} {rates[name]:7.1f} round trips/s  "
            f"first event p50 {_pct(firsts, 0.5):6.1f} ms  p99 {_pct(firsts, 0.99):6.1f} ms  "
            f"server CPU {cpu / max(trips, 1) * 1000:5.1f} ms/round trip"
        )
    a, b = rates.values()
    print(f"ratio (b)/(a): {b / a:.2f} (goal >= 0.75)")


if __name__ == "__main__":
    main()
