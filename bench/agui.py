"""AG-UI benchmark.

Part 1 (``bench_validation``): whole-batch resume validation for cohorts of 1, 10 and 100
interrupts — body bytes in, ``ResumePlan`` out (preflight, typing, receipt recompute,
current-cohort checks, JSON Schema per answer). It should grow linearly: the per-interrupt
cost at 100 should be close to the per-interrupt cost at 10 (the 1-interrupt figure also
carries the fixed per-request cost).

Further parts (SSE events/s, time to first event) join ``main`` as they land.

Usage: .venv/bin/python bench/agui.py [--seconds 1.0]
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from pausemesh.agui.cohort import ResumePlan, issue_interrupts, pause_payload, validate_resume
from pausemesh.agui.schema import SchemaValidatorCache
from pausemesh.core.model import Continuation

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


def _time_validation(n: int, seconds: float) -> float:
    """Mean seconds per validation of an ``n``-interrupt batch."""
    members, receipt, body = _cohort(n)
    schemas = SchemaValidatorCache()
    check = validate_resume(body, receipt, members, now=NOW, schemas=schemas)
    if not isinstance(check, ResumePlan) or len(check.commands) != n:
        msg = f"benchmark batch of {n} did not validate: {check}"
        raise RuntimeError(msg)
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        validate_resume(body, receipt, members, now=NOW, schemas=schemas)
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
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="time per measurement")
    args = parser.parse_args()
    bench_validation(args.seconds)


if __name__ == "__main__":
    main()
