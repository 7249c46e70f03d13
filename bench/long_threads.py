# ruff: noqa: E402 - sys.path is fixed before the imports (see below)
"""What a run costs as its thread grows (issue 42).

One real server (``pausemesh serve --agent``) per store (SQLite file, then PostgreSQL in a
fresh schema), an agent that answers "ok" and never reads the history (``ok_agent`` below),
and one client. On each store, two long threads: one whose every run adds a 1 KB user
message, one whose every run adds 20 KB. At each checkpoint (10, 100, 400, 1,000 runs;
``--quick``: 10, 50, 100) the bench measures the ``--window`` runs that end there
(``--goal-window`` at the last checkpoint, the goals'), each followed by a run adding the same
message to a short thread (a new one every 10 runs): the long thread's p50 over the short
threads' p50, taken at the same moments, is the ratio the goals name, whatever the load of a
shared machine does meanwhile (the same ratio per slice of ``--window`` pairs says how much it
moves). Then one snapshot (``GET /agui/threads/{id}``) and one reload (``POST
/agui/connect``) with their time and bytes, and the server's CPU per run (``/proc``).

A probe in a process of its own sends ``GET /healthz`` every 5 ms throughout the runs: its
p99 is the server's responsiveness while long threads are served; the same probe against an
idle server on the same machine, at the same moments, says what the machine itself adds.
Inside the server ``LoopLag`` measures how late its event loop serves a 2 ms timer.

Goals (issue 42), in one run: run p50 at 400 runs of 20 KB <= 1.5x the p50 at 10 runs; at
1,000 runs of 1 KB <= 1.3x; connect bytes bounded by the snapshot page; /healthz p99 <= 20 ms.

Usage: .venv/bin/python bench/long_threads.py [--quick] [--stores sqlite,postgres]
       [--window 20] [--goal-window 60] [--database-url URL]
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

# Run as a script, this directory would come first on sys.path and bench/http.py would
# shadow the stdlib's ``http``: put the repository root there instead.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse
import asyncio
import json
import multiprocessing
import os
import secrets
import socket
import tempfile
import time
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event as EventType
from typing import Any

from pausemesh.agui import (
    AgentOutput,
    RunContext,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    lazy_history,
)

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_PROBE_INTERVAL = 0.005
_LAG_TICK = 0.002
_SHORT_RUNS = 10
_AGENT = "bench.long_threads:ok_agent"
DEFAULT_URL = os.environ.get(
    "PAUSEMESH_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test"
)


class LoopLag:
    """In the server: how late its event loop serves a timer. Every ``_LAG_TICK`` a task asks
    to wake; how late it woke is what any request arriving then waited at least: callbacks
    holding the loop (CPU work, a blocking call such as an inline fsync) and, on a shared
    machine, the process waiting for a CPU. (Not told apart: on the development VM a thread
    waiting in ``fdatasync`` counts as waiting for a CPU in ``/proc/.../schedstat``.)"""

    def __init__(self) -> None:
        self.late: list[float] = []
        self.task: asyncio.Task[None] | None = None

    async def sample(self) -> None:
        while True:
            # Not ``loop.time()``: uvloop's is the time its iteration began.
            asked = time.perf_counter()
            await asyncio.sleep(_LAG_TICK)
            self.late.append(max(time.perf_counter() - asked - _LAG_TICK, 0.0))

    def command(self, what: str) -> str:
        """``start`` (or restart) sampling; ``report`` what was sampled since, as JSON."""
        if what == "start":
            self.late = []
            if self.task is None:
                self.task = asyncio.get_running_loop().create_task(self.sample())
            return "{}"
        return json.dumps(
            {
                "loop_samples": len(self.late),
                "loop_late_p50_ms": _ms(self.late, 0.5),
                "loop_late_p99_ms": _ms(self.late, 0.99),
                "loop_late_max_ms": _ms(self.late, 1.0),
                "loop_late_over_20ms": sum(late > 0.020 for late in self.late),
            }
        )


_LAG = LoopLag()


@lazy_history
async def ok_agent(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """Answers "ok" and never reads ``ctx``'s history (``lazy_history``: none is read for it).

    A run whose ``forwardedProps`` hold ``loopLag`` drives the server's ``LoopLag`` instead,
    and answers with what it says."""
    message_id = f"ok-{ctx.run_id}"
    props = ctx.forwarded_props
    command = props.get("loopLag") if isinstance(props, dict) else None
    yield TextMessageStartEvent(message_id=message_id, role="assistant")
    yield TextMessageContentEvent(
        message_id=message_id, delta="ok" if command is None else _LAG.command(str(command))
    )
    yield TextMessageEndEvent(message_id=message_id)


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc/<pid>/stat (fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def probe(host: str, port: int, stop: EventType, out: Connection) -> None:
    """``GET /healthz`` every ``_PROBE_INTERVAL`` on one connection until ``stop`` is set;
    sends ``ready`` once its first answer came back, then the latencies in seconds."""
    request = f"GET /healthz HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
    samples: list[float] = []
    with socket.create_connection((host, port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while not stop.is_set():
            began = time.monotonic()
            sock.sendall(request)
            data = b""
            while b"\r\n\r\n" not in data or not data.endswith(b"}"):
                chunk = sock.recv(65536)
                if not chunk:
                    raise ConnectionError("the server closed the probe's connection")
                data += chunk
            if not samples:
                out.send("ready")
            samples.append(time.monotonic() - began)
            time.sleep(_PROBE_INTERVAL)
    out.send(samples)


def _ms(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)


def _run(http: Any, thread_id: str, n: int, text: str) -> float:
    """One run adding one user message; its latency (request to the stream's end)."""
    body = {
        "threadId": thread_id,
        "runId": f"r{n}",
        "messages": [{"id": f"u{n}", "role": "user", "content": f"{n} {text}"}],
    }
    began = time.perf_counter()
    with http.stream("POST", "/agui", json=body) as response:
        data = response.read()
    elapsed = time.perf_counter() - began
    if response.status_code != 200 or b"RUN_ERROR" in data or b"RUN_FINISHED" not in data:
        raise RuntimeError(data[:500])
    return elapsed


def _read(http: Any, thread_id: str, *, connect: bool) -> tuple[float, int]:
    """One snapshot or one reload: (seconds, bytes)."""
    began = time.perf_counter()
    if connect:
        body = {"threadId": thread_id, "runId": "reload", "messages": []}
        response = http.post("/agui/connect", json=body)
    else:
        response = http.get(f"/agui/threads/{thread_id}")
    elapsed = time.perf_counter() - began
    if response.status_code != 200:
        raise RuntimeError(response.content[:500])
    return elapsed, len(response.content)


def _p50_ratio(latencies: list[float], baseline: list[float]) -> float:
    return round(_ms(latencies, 0.5) / _ms(baseline, 0.5), 2)


def _lag(http: Any, command: str) -> dict[str, Any]:
    """Drive the server's ``LoopLag`` (see ``ok_agent``): its answer, decoded."""
    body = {
        "threadId": "loop-lag",
        "runId": f"lag-{secrets.token_hex(4)}",
        "messages": [],
        "forwardedProps": {"loopLag": command},
    }
    response = http.post("/agui", json=body)
    for line in response.text.splitlines():
        if line.startswith("data:") and '"TEXT_MESSAGE_CONTENT"' in line:
            answer: dict[str, Any] = json.loads(json.loads(line[5:])["delta"])
            return answer
    raise RuntimeError(response.text[:500])


class _Short:
    """Runs on short threads: a new thread every ``_SHORT_RUNS`` runs, so each run is one of
    runs 1 to 10 of its thread (the baseline a long thread's runs are compared with)."""

    def __init__(self, kib: int) -> None:
        self.kib = kib
        self.done = 0

    def run(self, http: Any, text: str) -> float:
        thread_id = f"short-{self.kib}k-{self.done // _SHORT_RUNS}"
        self.done += 1
        return _run(http, thread_id, self.done % _SHORT_RUNS or _SHORT_RUNS, text)


def measure(
    server: Any,
    kib: int,
    checkpoints: list[int],
    window: int,
    *,
    goal_window: int | None = None,
    thread_id: str | None = None,
    quiet: bool = False,
) -> list[dict[str, Any]]:
    """Runs on one thread up to each checkpoint; the ``window`` runs that end there (the last
    checkpoint: ``goal_window``) each followed by a run on a short thread, so the long
    thread's p50 and the short threads' are taken at the same moments of a shared machine."""
    import httpx  # noqa: PLC0415 - only the client needs it, not the server importing the agent

    text = ("All work and no play makes a long thread. " * (kib * 25))[: kib * 1024]
    thread_id = thread_id or f"long-{kib}k"
    short = _Short(kib)
    rows: list[dict[str, Any]] = []
    with httpx.Client(base_url=server.base_url, timeout=300) as http:
        done = 0
        for checkpoint in checkpoints:
            size = goal_window if goal_window and checkpoint == checkpoints[-1] else window
            first = max(done, checkpoint - size)
            while done < first:
                done += 1
                _run(http, thread_id, done, text)
            cpu_before = cpu_seconds(server.pid)
            latencies, baseline = [], []
            while done < checkpoint:
                done += 1
                # Which of the two goes first alternates: neither gets the other's after-effects.
                if done % 2:
                    latencies.append(_run(http, thread_id, done, text))
                    baseline.append(short.run(http, text))
                else:
                    baseline.append(short.run(http, text))
                    latencies.append(_run(http, thread_id, done, text))
            cpu = cpu_seconds(server.pid) - cpu_before
            snapshot_s, snapshot_bytes = _read(http, thread_id, connect=False)
            connect_s, connect_bytes = _read(http, thread_id, connect=True)
            rows.append(
                {
                    "message_kib": kib,
                    "runs": checkpoint,
                    "measured": len(latencies),
                    "run_p50_ms": _ms(latencies, 0.5),
                    "run_p99_ms": _ms(latencies, 0.99),
                    "short_p50_ms": _ms(baseline, 0.5),
                    "p50_ratio_to_short": _p50_ratio(latencies, baseline),
                    # The same ratio in slices of ``window`` pairs: how much it moves.
                    "slice_ratios": [
                        _p50_ratio(latencies[i : i + window], baseline[i : i + window])
                        for i in range(0, len(latencies) - window + 1, window)
                    ],
                    # Both threads' runs: what one run costs the server, whatever its thread.
                    "server_cpu_ms_per_run": round(cpu / (2 * len(latencies)) * 1000, 2),
                    "snapshot_ms": round(snapshot_s * 1000, 1),
                    "snapshot_bytes": snapshot_bytes,
                    "connect_ms": round(connect_s * 1000, 1),
                    "connect_bytes": connect_bytes,
                }
            )
            if not quiet:
                print(json.dumps(rows[-1]), flush=True)
    return rows


def bench_store(store: str, args: argparse.Namespace) -> dict[str, Any]:
    import httpx  # noqa: PLC0415 - only the client needs it, not the server importing the agent
    from tests.support.server import ServerProcess  # noqa: PLC0415 - repository helper

    env = {
        "PAUSEMESH_ACCESS_LOG": "false",
        "PAUSEMESH_LOG_LEVEL": "warning",
        # Room for 1,000 runs of 20 KB: the bound is not what is measured here.
        "PAUSEMESH_MAX_THREAD_BYTES": str(64 * 1024 * 1024),
        "PAUSEMESH_SECRET_KEY": "bench-" + "k" * 40,
    }
    schema = f"pm_long_{secrets.token_hex(4)}"
    with tempfile.TemporaryDirectory(prefix="pm-long-threads-") as tmp:
        env["PAUSEMESH_DATA_DIR"] = tmp
        if store == "sqlite":
            command = ["serve", "--agent", _AGENT, "--database-path", str(Path(tmp) / "pm.db")]
        else:
            from pausemesh.stores.postgres.migrate import migrate  # noqa: PLC0415

            asyncio.run(migrate(args.database_url, schema=schema))
            env["PAUSEMESH_DATABASE_SCHEMA"] = schema
            command = ["serve", "--agent", _AGENT, "--database-url", args.database_url]
        try:
            control_command = ["serve", "--database-path", str(Path(tmp) / "control.db")]
            with (
                ServerProcess(command, env=env) as server,
                ServerProcess(control_command, env=env) as control,
            ):
                # Warm-up: a thread of its own, so the first checkpoint is not a cold start.
                measure(server, 1, [10], 10, thread_id="warm-up", quiet=True)
                context = multiprocessing.get_context("spawn")
                stop = context.Event()
                probes = []
                for target in (server, control):
                    receive, send = context.Pipe(duplex=False)
                    prober = context.Process(
                        target=probe, args=(target.host, target.port, stop, send)
                    )
                    prober.start()
                    probes.append((prober, receive))
                # The probes' interpreters are up (they start on the same CPUs) and sampling.
                for _, receive in probes:
                    receive.recv()
                with httpx.Client(base_url=server.base_url, timeout=60) as http:
                    _lag(http, "start")
                rows = []
                for kib, checkpoints in ((20, args.checkpoints_20k), (1, args.checkpoints_1k)):
                    rows += measure(
                        server, kib, checkpoints, args.window, goal_window=args.goal_window
                    )
                with httpx.Client(base_url=server.base_url, timeout=60) as http:
                    lag = _lag(http, "report")
                stop.set()
                samples, idle = (receive.recv() for _, receive in probes)
                for prober, _ in probes:
                    prober.join()
        finally:
            if store == "postgres":
                asyncio.run(_drop(args.database_url, schema))
    return {
        "store": store,
        "rows": rows,
        "healthz_samples": len(samples),
        "healthz_p50_ms": _ms(samples, 0.5),
        "healthz_p99_ms": _ms(samples, 0.99),
        "healthz_max_ms": _ms(samples, 1.0),
        "idle_server_healthz_p99_ms": _ms(idle, 0.99),
        **lag,
    }


async def _drop(url: str, schema: str) -> None:
    import asyncpg  # noqa: PLC0415

    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


def _ratio(rows: list[dict[str, Any]], kib: int, runs: int) -> float | None:
    """p50 at ``runs`` over the p50 at the first checkpoint of the same thread (measured
    minutes apart: a shared machine's load moves it; see ``p50_ratio_to_short``)."""
    by = {r["runs"]: r for r in rows if r["message_kib"] == kib}
    first = min(by) if by else None
    if first is None or runs not in by:
        return None
    ratio: float = by[runs]["run_p50_ms"] / by[first]["run_p50_ms"]
    return round(ratio, 2)


def _goal(rows: list[dict[str, Any]], kib: int, runs: int) -> float | None:
    """p50 at ``runs`` over the p50 of short threads' runs at the same moments."""
    found = [r["p50_ratio_to_short"] for r in rows if r["message_kib"] == kib and r["runs"] == runs]
    return found[0] if found else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="checkpoints 10, 50, 100")
    parser.add_argument("--stores", default="sqlite,postgres")
    parser.add_argument("--window", type=int, default=20, help="runs measured per checkpoint")
    parser.add_argument(
        "--goal-window",
        type=int,
        default=60,
        help="runs measured at the last checkpoint (the goals'), in slices of --window",
    )
    parser.add_argument("--database-url", default=DEFAULT_URL)
    args = parser.parse_args()
    if args.quick:
        args.checkpoints_20k = args.checkpoints_1k = [10, 50, 100]
    else:
        args.checkpoints_20k = [10, 100, 400]
        args.checkpoints_1k = [10, 100, 400, 1000]
    results = []
    for store in args.stores.split(","):
        result = bench_store(store, args)
        top20, top1 = args.checkpoints_20k[-1], args.checkpoints_1k[-1]
        result[f"goal_p50_ratio_20k_{top20}_to_short"] = _goal(result["rows"], 20, top20)
        result[f"goal_p50_ratio_1k_{top1}_to_short"] = _goal(result["rows"], 1, top1)
        result[f"p50_ratio_20k_{top20}_vs_10"] = _ratio(result["rows"], 20, top20)
        result[f"p50_ratio_1k_{top1}_vs_10"] = _ratio(result["rows"], 1, top1)
        print(json.dumps({k: v for k, v in result.items() if k != "rows"}), flush=True)
        results.append(result)
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    cpus = os.cpu_count()
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"measured {started} on {cpus} CPUs shared with the server, load average {load};"
        f" window {args.window} runs, {args.goal_window} at the last checkpoint"
    )
    for result in results:
        print(
            f"\n{result['store']}: /healthz p99 {result['healthz_p99_ms']} ms"
            f" (an idle server on the same machine: {result['idle_server_healthz_p99_ms']} ms)"
            f"; the server's loop late: p99 {result['loop_late_p99_ms']} ms,"
            f" max {result['loop_late_max_ms']} ms"
        )
        print(
            "| KB | runs | run p50 ms | p99 ms | short threads' p50 | ratio (slices)"
            " | CPU ms/run | snapshot ms / KB | connect ms / KB |"
        )
        for r in result["rows"]:
            slices = ", ".join(map(str, r["slice_ratios"]))
            print(
                f"| {r['message_kib']} | {r['runs']} | {r['run_p50_ms']} | {r['run_p99_ms']} |"
                f" {r['short_p50_ms']} | {r['p50_ratio_to_short']} ({slices}) |"
                f" {r['server_cpu_ms_per_run']} | {r['snapshot_ms']} /"
                f" {r['snapshot_bytes'] // 1000} | {r['connect_ms']} / {r['connect_bytes'] // 1000} |"
            )


if __name__ == "__main__":
    main()
