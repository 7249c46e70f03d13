# ruff: noqa: E402 - sys.path is fixed before the imports (see below)
"""Where a server's CPU goes per create+resume lifecycle: cProfile on a real server process.

Starts ``pausemesh serve`` under cProfile (on the process's CPU clock) on a SQLite file, drives ``--lifecycles``
create+resume lifecycles over HTTP (the client of ``bench/http.py``), stops the server with
SIGINT (a graceful shutdown, so the profile is written) and prints the functions with the most
own time, and the cumulative time of the request stages (routing/validation, token checks,
encoding, logging, SQLite), per lifecycle. cProfile slows everything down evenly-ish: read
the shares, not the absolute figures.

Usage: .venv/bin/python bench/profile_http.py [--lifecycles 3000] [--top 25]
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse
import asyncio
import io
import os
import pstats
import signal
import subprocess
import tempfile
import time

import aiohttp
import httpx
import uvloop
from bench.http import lifecycle
from tests.support.server import REPO_ROOT, free_port

# Stages by a substring of "file:function" (C functions have file "~" and a descriptive name).
STAGES = {
    "msgspec (JSON, structs)": ("msgspec",),
    "SQLite (execute, commit)": ("sqlite3",),
    "hashing (sha256, HMAC)": ("_hashlib", "hmac.py", "openssl"),
    "logging": ("logging/",),
    "JSON Schema validation": ("jsonschema", "pausemesh/core/schema.py"),
    "litestar (routing, DI, responses)": ("litestar/",),
    "uvicorn/httptools": ("uvicorn/", "httptools"),
    "asyncio/uvloop": ("asyncio/", "uvloop"),
}


async def drive(base: str, count: int, concurrency: int) -> None:
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        queue = iter(range(count))

        async def worker() -> None:
            for n in queue:
                await lifecycle(session, base, n)

        await asyncio.gather(*(worker() for _ in range(concurrency)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lifecycles", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        profile = Path(tmp) / "server.prof"
        # cProfile on the process's CPU clock (time.process_time): time the loop spends
        # waiting in epoll is not counted, so the shares are shares of CPU.
        runner = (
            "import cProfile, runpy, sys, time\n"
            "profiler = cProfile.Profile(time.process_time)\n"
            "sys.argv = ['pausemesh', *sys.argv[2:]]\n"
            "profiler.enable()\n"
            "try:\n"
            "    runpy.run_module('pausemesh', run_name='__main__')\n"
            "except SystemExit:\n"
            "    pass\n"
            "finally:\n"
            "    profiler.disable()\n"
            f"    profiler.dump_stats({str(profile)!r})\n"
        )
        command = [
            sys.executable,
            "-c",
            runner,
            "--",
            "serve",
            "--port",
            str(port),
            "--database-path",
            str(Path(tmp) / "profile.db"),
            "--log-level",
            args.log_level,
            "--env-file",
            os.devnull,
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PAUSEMESH_")}
        server = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        uvloop.run(drive(base, args.lifecycles, args.concurrency))
        server.send_signal(signal.SIGINT)
        server.wait(60)
        stats = pstats.Stats(str(profile))

    total = stats.total_tt  # type: ignore[attr-defined]
    per = 1000 * total / args.lifecycles
    print(f"bench/profile_http.py: {args.lifecycles} lifecycles, {args.concurrency} in flight,")
    print(f"  server CPU under cProfile {total:.2f}s = {per:.2f} ms per lifecycle (inflated)")
    load = os.getloadavg()
    print(f"  load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    raw = stats.stats  # type: ignore[attr-defined]
    print("  own time by stage (% of all server CPU):")
    for name, needles in STAGES.items():
        own = sum(
            entry[2]
            for (file, _, func), entry in raw.items()
            if any(needle in f"{file}:{func}" for needle in needles)
        )
        print(f"    {name:<32} {100 * own / total:5.1f} %")
    print(f"  top {args.top} functions by own time:")
    out = io.StringIO()
    stats.stream = out  # type: ignore[attr-defined]
    stats.sort_stats("tottime").print_stats(args.top)
    lines = out.getvalue().splitlines()
    start = next(i for i, line in enumerate(lines) if "ncalls" in line)
    for line in lines[start : start + args.top + 1]:
        print("   ", line.replace(str(REPO_ROOT) + "/", "")[:150])


if __name__ == "__main__":
    main()
