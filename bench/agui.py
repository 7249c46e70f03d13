# ruff: noqa: E402 - sys.path is fixed before the imports (see below)
"""AG-UI benchmark.

Part 1 (``bench_validation``): whole-batch resume validation for cohorts of 1, 10 and 100
interrupts — body bytes in, ``ResumePlan`` out, as a run does it: the route's
``read_run_input`` (preflight, typing, once) then ``validate_resume`` (receipt recompute,
current-cohort checks, JSON Schema per answer). It also prints, from the same run, the ratio
against the path before issue 10 (typed, then back to builtins and preflighted again). It should grow linearly: the per-interrupt
cost at 100 should be close to the per-interrupt cost at 10 (the 1-interrupt figure also
carries the fixed per-request cost).

Part 2 (``bench_sse``): a real server process (uvicorn, SQLite file, ``synchronous=FULL``)
running a bench agent that streams one long text message: events/s through one SSE stream
(every event is appended to the durable thread log before it is sent) and time to first
event (POST sent → ``RUN_STARTED`` frame read: thread record, run lease, first log append).

Usage: .venv/bin/python bench/agui.py [--seconds 1.0] [--events 20000] [--skip-sse]
       (``--serve PORT DB`` is the server half, started by the bench itself)
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this directory would come first on sys.path and bench/http.py would
# shadow the stdlib's ``http``: put the repository root there instead.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import msgspec

from pausemesh.agui import (
    AgentOutput,
    RunContext,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from pausemesh.agui.input import read_run_input
from pausemesh.agui.receipts import issue_interrupts
from pausemesh.agui.resume import ResumePlan, validate_resume
from pausemesh.agui.resume_json import check_resume
from pausemesh.core.model import Continuation
from pausemesh.core.pause import pause_payload
from pausemesh.core.schema import SchemaValidatorCache

FLIGHTS = ["PM101", "PM202", "PM303"]
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"flight": {"type": "string", "enum": FLIGHTS}},
    "required": ["flight"],
    "additionalProperties": False,
}
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _cohort(n: int) -> tuple[list[Continuation], Any, bytes]:
    members = [
        Continuation(
            schema_version=1,
            continuation_id=f"c-{i:04d}",
            correlation_id="thread-1",
            version=1,
            status="pending",
            created_at=NOW,
            expires_at=NOW + timedelta(minutes=15),
            payload=pause_payload("Which flight should I book?", response_schema=SCHEMA),
            metadata={},
        )
        for i in range(n)
    ]
    _, receipt = issue_interrupts(members, thread_id="thread-1", run_id="run-1")
    body = msgspec.json.encode(
        {
            "threadId": "thread-1",
            "runId": "run-2",
            "messages": [{"id": "u1", "role": "user", "content": "book it"}],
            "resume": [
                {
                    "interruptId": m.continuation_id,
                    "status": "resolved",
                    "payload": {"flight": "PM202"},
                }
                for m in reversed(members)
            ],
        }
    )
    return members, receipt, body


def _typed_once(members: list[Continuation], receipt: Any, body: bytes, schemas: Any) -> Any:
    # The run path: the route bounds and types the body once, validation takes it typed.
    return validate_resume(read_run_input(body), receipt, members, now=NOW, schemas=schemas)


def _typed_then_checked(
    members: list[Continuation], receipt: Any, body: bytes, schemas: Any
) -> Any:
    # The run path before issue 10: typed at the route, then turned back into builtins and
    # preflighted again (with the receipt and the continuations) inside validation.
    return check_resume(read_run_input(body), receipt, members, now=NOW, schemas=schemas)


def _time_validation(n: int, seconds: float, path: Any = _typed_once) -> float:
    """Mean seconds per validation of an ``n``-interrupt batch along ``path``."""
    members, receipt, body = _cohort(n)
    schemas = SchemaValidatorCache()
    check = path(members, receipt, body, schemas)
    if not isinstance(check, ResumePlan) or len(check.commands) != n:
        msg = f"benchmark batch of {n} did not validate: {check}"
        raise RuntimeError(msg)
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        path(members, receipt, body, schemas)
        count += 1
    return (time.perf_counter() - start) / count


def bench_validation(
    seconds: float = 1.0, sizes: tuple[int, ...] = (1, 10, 100)
) -> dict[int, float]:
    """Print per-batch and per-interrupt validation time; return {size: seconds per batch}."""
    results = {n: _time_validation(n, seconds) for n in sizes}
    print("resume validation (body bytes -> ResumePlan, responseSchema enforced)")
    for n, per_batch in results.items():
        print(
            f"  {n:>4} interrupts: {per_batch * 1e6:10.1f} µs/batch"
            f"  {per_batch / n * 1e6:8.1f} µs/interrupt"
        )
    smallest, largest = min(sizes), max(sizes)
    mid = sorted(sizes)[len(sizes) // 2]
    print(
        f"  per-interrupt ratio {largest}/{mid}: "
        f"{(results[largest] / largest) / (results[mid] / mid):.2f} (1.0 = linear)"
    )
    print(
        f"  batch-time ratio {largest}/{smallest}: {results[largest] / results[smallest]:.1f}"
        f" for {largest // smallest}x the interrupts"
    )
    twice = _time_validation(mid, seconds, _typed_then_checked)
    print(
        f"  typed once / typed then preflighted again ({mid} interrupts):"
        f" {results[mid] / twice:.2f} (below 1.0 = the single pass is cheaper)"
    )
    return results


# --- part 2: SSE through a real server --------------------------------------------------------


async def stream_agent(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """Bench agent: one assistant message of ``forwardedProps.events`` deltas."""
    props = ctx.forwarded_props if isinstance(ctx.forwarded_props, dict) else {}
    count = int(props.get("events", 0))
    yield TextMessageStartEvent(message_id=f"m-{ctx.run_id}")
    for i in range(count):
        yield TextMessageContentEvent(message_id=f"m-{ctx.run_id}", delta=f"token {i:08d} ")
    yield TextMessageEndEvent(message_id=f"m-{ctx.run_id}")


def _serve(port: int, database: str) -> None:
    from pausemesh.cli.serve import serve_app  # noqa: PLC0415 - only the server half needs it
    from pausemesh.settings import load_settings  # noqa: PLC0415

    settings = load_settings(
        env_file=os.devnull,
        overrides={"port": port, "database_path": database, "log_level": "warning"},
    )
    serve_app(settings, agent=stream_agent)


def _first_and_count(client: httpx.Client, thread: str, events: int) -> tuple[float, float, int]:
    """(seconds to the first frame, seconds from first to last frame, frames read)."""
    body = {
        "threadId": thread,
        "runId": "run-1",
        "messages": [],
        "forwardedProps": {"events": events},
    }
    start = time.perf_counter()
    first = 0.0
    frames = 0
    with client.stream("POST", "/agui", json=body) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if line.startswith("data: "):
                if frames == 0:
                    first = time.perf_counter()
                frames += 1
    return first - start, time.perf_counter() - first, frames


def bench_sse(events: int = 20_000, samples: int = 30) -> None:
    from tests.support.server import ServerProcess  # noqa: PLC0415 - repo-only helper

    class _BenchServer(ServerProcess):
        def command(self) -> list[str]:
            return [
                sys.executable,
                str(Path(__file__).resolve()),
                "--serve",
                str(self.port),
                self.args[0],
            ]

    with (
        tempfile.TemporaryDirectory() as tmp,
        _BenchServer([str(Path(tmp) / "bench.db")]) as server,
        httpx.Client(base_url=server.base_url, timeout=120) as client,
    ):
        _first_and_count(client, "warmup", 100)
        firsts = sorted(_first_and_count(client, f"ttfe-{i}", 0)[0] for i in range(samples))
        _, duration, frames = _first_and_count(client, "throughput", events)
    print("SSE through a real server (SQLite, every event logged before it is sent)")
    print(
        f"  time to first event: p50 {statistics.median(firsts) * 1e3:.2f} ms,"
        f" p90 {firsts[int(len(firsts) * 0.9)] * 1e3:.2f} ms ({samples} runs)"
    )
    print(f"  one stream: {frames} events in {duration:.2f} s = {frames / duration:,.0f} events/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="time per measurement")
    parser.add_argument("--events", type=int, default=20_000, help="events in the SSE stream")
    parser.add_argument("--skip-sse", action="store_true", help="only the validation part")
    parser.add_argument("--serve", nargs=2, metavar=("PORT", "DB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve(int(args.serve[0]), args.serve[1])
        return
    bench_validation(args.seconds)
    if not args.skip_sse:
        bench_sse(args.events)


if __name__ == "__main__":
    main()
