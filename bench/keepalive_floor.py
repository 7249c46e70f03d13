# ruff: noqa: E402 - sys.path is fixed before the imports (see below)
"""The floor under an idle tail's keep-alive on this machine: one socket write, nothing else.

``bench/tails.py`` measures what ``pausemesh demo`` spends while 10,000 tails sit idle and a
keep-alive goes to each every 15 s. This measures what the same writes cost with no server
around them: one uvloop process accepts ``--connections`` TCP connections on loopback from a
client process (which reads and discards), and a timer every 0.5 s (the tail wheel's
granularity) writes the bytes an SSE keep-alive puts on the wire (the comment frame in one
HTTP chunk, as uvicorn writes it) to the connections whose turn it is, so each gets one every
``--interval`` seconds. Prints the process's CPU (user + kernel, ``getrusage``) as a share of
one core with the timer writing nothing, and writing; and the CPU per write.

No ASGI, no task per connection, no Python per write beyond ``transport.write``: what the
kernel's loopback and uvloop charge per keep-alive, below which no server on this machine goes.

Usage: .venv/bin/python bench/keepalive_floor.py [--connections 10000] [--interval 15]
       [--seconds 30]
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse
import asyncio
import os
import resource
import subprocess
import time
from typing import Any

import uvloop

from pausemesh.agui.sse import KEEPALIVE_FRAME

TICK = 0.5
WAVE = 500
# One HTTP/1.1 chunk holding the keep-alive comment, as uvicorn's ``send`` frames it.
WIRE = b"%x\r\n" % len(KEEPALIVE_FRAME) + KEEPALIVE_FRAME + b"\r\n"


def raise_fd_limit() -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def cpu_now() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class _Discard(asyncio.Protocol):
    def data_received(self, data: bytes) -> None:
        pass


class _Accepted(asyncio.Protocol):
    def __init__(self, transports: list[Any], wanted: int, all_in: asyncio.Event) -> None:
        self.transports = transports
        self.wanted = wanted
        self.all_in = all_in

    def connection_made(self, transport: Any) -> None:  # uvloop's, not asyncio.Transport
        self.transports.append(transport)
        if len(self.transports) >= self.wanted:
            self.all_in.set()


async def client(port: int, connections: int) -> None:
    loop = asyncio.get_running_loop()
    held: list[Any] = []
    for start in range(0, connections, WAVE):
        wave = [
            loop.create_connection(_Discard, "127.0.0.1", port)
            for _ in range(min(WAVE, connections - start))
        ]
        held += await asyncio.gather(*wave)
    print("connected", flush=True)
    await loop.run_in_executor(None, sys.stdin.read)  # until the server closes our stdin


async def _window(
    transports: list[Any], interval: float | None, seconds: float
) -> tuple[float, float]:
    """CPU share of one core over ``seconds`` and the writes made, ticking every ``TICK``."""
    per_tick = 0 if interval is None else round(len(transports) * TICK / interval)
    cursor = writes = 0
    started, cpu_before = time.perf_counter(), cpu_now()
    deadline = started + seconds
    while (now := time.perf_counter()) < deadline:
        await asyncio.sleep(min(TICK, deadline - now))
        for _ in range(per_tick):
            transports[cursor].write(WIRE)
            cursor = (cursor + 1) % len(transports)
        writes += per_tick
    wall = time.perf_counter() - started
    return 100 * (cpu_now() - cpu_before) / wall, writes / wall


async def server(args: argparse.Namespace) -> None:
    transports: list[Any] = []
    loop = asyncio.get_running_loop()
    all_in = asyncio.Event()
    listener = await loop.create_server(
        lambda: _Accepted(transports, args.connections, all_in), "127.0.0.1", 0, backlog=4096
    )
    port = listener.sockets[0].getsockname()[1]
    child = subprocess.Popen(  # noqa: ASYNC220 - started once, before anything is measured
        [sys.executable, __file__, "--client", str(port), "--connections", str(args.connections)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert child.stdout is not None  # noqa: S101
    await loop.run_in_executor(None, child.stdout.readline)
    await all_in.wait()
    await asyncio.sleep(1)  # let the accept burst settle
    print(
        f"bench/keepalive_floor.py: {len(transports):,} loopback connections, one uvloop"
        f" process, {os.cpu_count()} cores"
    )
    idle, _ = await _window(transports, None, args.seconds)
    print(f"  timer only, no writes (% of a core)          {idle:6.2f}")
    for interval in args.intervals:
        share, rate = await _window(transports, interval, args.seconds)
        per_write = 1e6 * (share - idle) / 100 / rate if rate else 0.0
        print(
            f"  a keep-alive every {interval:g}s ({rate:,.0f} writes/s)   {share:6.2f}"
            f"   ({per_write:.1f} us per write above the timer)"
        )
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} at the end")
    assert child.stdin is not None  # noqa: S101
    child.stdin.close()
    child.wait()
    listener.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=10_000)
    parser.add_argument(
        "--interval",
        dest="intervals",
        type=float,
        action="append",
        help="keep-alive interval in seconds (repeatable; default 15 and 1.5)",
    )
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--client", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    raise_fd_limit()
    if args.client is not None:
        uvloop.run(client(args.client, args.connections))
        return
    args.intervals = args.intervals or [15.0, 1.5]
    uvloop.run(server(args))


if __name__ == "__main__":
    main()
