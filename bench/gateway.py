"""Gateway benchmark: distinct operations/s through the gateway against direct upstream calls.

Both sides use the official ``mcp`` client over stdio and call the same upstream tool (the
test upstream ``tests/support/upstream_mcp.py``, which appends and fsyncs one line per real
call) with ``--concurrency`` calls in flight, each with a new business key:

* **direct**: the client spawns the upstream and calls ``create_invoice``;
* **gateway**: the client spawns ``pausemesh gateway --stdio`` (SQLite, WAL,
  ``synchronous=FULL``, a temp directory), which records a durable attempt, calls the same
  upstream once, and records the durable outcome (group-committed where calls overlap).

Prints calls/s, p50/p99 latency of each and the ratio gateway/direct, measured in one run.
Figures, never assertions.

Usage: .venv/bin/python bench/gateway.py [--seconds 10] [--concurrency 8] [--warmup 2]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Run as a script, bench/ comes first on sys.path and its http.py would shadow the stdlib's
# ``http``: use the repository root instead (for ``tests.support``).
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from tests.support.gateway import UPSTREAM, GatewayCase  # noqa: E402

_ids = itertools.count()


async def _measure(
    client: Client, *, seconds: float, concurrency: int, warmup: float, expect: str | None
) -> tuple[float, list[float]]:
    latencies: list[float] = []
    counting = False
    done = 0

    async def worker(stop_at: float) -> None:
        nonlocal done
        while time.perf_counter() < stop_at:
            order = f"O-{next(_ids)}"
            started = time.perf_counter()
            result = await client.call_tool("create_invoice", {"order_id": order, "amount": 1})
            elapsed = time.perf_counter() - started
            body = result.structured_content or {}
            if result.is_error or (expect is not None and body.get("status") != expect):
                msg = f"unexpected result: {body}"
                raise RuntimeError(msg)
            if counting:
                latencies.append(elapsed)
                done += 1

    await asyncio.gather(*(worker(time.perf_counter() + warmup) for _ in range(concurrency)))
    counting = True
    began = time.perf_counter()
    await asyncio.gather(*(worker(began + seconds) for _ in range(concurrency)))
    return done / (time.perf_counter() - began), latencies


def _line(name: str, rate: float, latencies: list[float]) -> str:
    cuts = statistics.quantiles(latencies, n=100)
    return f"{name:8s} {rate:8.1f} calls/s   p50 {cuts[49] * 1000:7.1f} ms   p99 {cuts[98] * 1000:7.1f} ms"


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="pausemesh-bench-gateway-") as root:
        case = GatewayCase(Path(root))
        case.jobs[0]["business_key"] = "invoice:{order_id}"
        await case.pin()
        direct = StdioServerParameters(
            command=sys.executable, args=[str(UPSTREAM)], env=case.upstream_env()
        )
        options: dict[str, Any] = {"seconds": args.seconds, "concurrency": args.concurrency}
        options["warmup"] = args.warmup
        async with Client(direct) as client:
            direct_rate, direct_latencies = await _measure(client, expect=None, **options)
        async with Client(case.stdio()) as client:
            gateway_rate, gateway_latencies = await _measure(
                client, expect="RESPONSE_RETAINED", **options
            )
        lines = len(case.lines())
    print(f"distinct operations, concurrency {args.concurrency}, {args.seconds:g} s each")
    print(_line("direct", direct_rate, direct_latencies))
    print(_line("gateway", gateway_rate, gateway_latencies))
    print(f"ratio gateway/direct: {gateway_rate / direct_rate:.2f}   upstream lines: {lines}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--warmup", type=float, default=2.0)
    asyncio.run(main(parser.parse_args()))
