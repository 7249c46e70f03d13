# ruff: noqa: E402 - sys.path is fixed before the imports (see below)
"""Where a server's CPU goes per create+resume lifecycle: cProfile on a real server process.

Starts ``pausemesh serve`` under cProfile (on the process's CPU clock) on a SQLite file, drives ``--lifecycles``
create+resume lifecycles over HTTP (the client of ``bench/http.py``), stops the server with
SIGINT (a graceful shutdown, so the profile is written) and prints the functions with the most
own time, and the cumulative time of the request stages (routing/validation, token checks,
encoding, logging, SQLite), per lifecycle. cProfile slows everything down evenly-ish: read
the shares, not the absolute figures.

``--in-process``: no socket, no uvicorn and no profiler by default: the app ``pausemesh
serve`` builds (same settings, logging to a file as the CLI configures it) is driven through
ASGI calls in this process, 16 lifecycles in flight, and the process's CPU per lifecycle is
printed (median of ``--rounds``; the driver's own share is small and the same for every
version of the app, so it is the steadiest before/after figure). ``--profile`` adds cProfile
to it.

Usage: .venv/bin/python bench/profile_http.py [--lifecycles 3000] [--top 25]
       .venv/bin/python bench/profile_http.py --in-process [--lifecycles 3000] [--rounds 5]
       [--profile] [--setting access_log=false ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse
import asyncio
import cProfile
import io
import logging
import os
import pstats
import signal
import statistics
import subprocess
import tempfile
import time
from typing import Any

import aiohttp
import httpx
import msgspec
import uvloop
from bench.http import PAYLOAD, lifecycle
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
    parser.add_argument("--in-process", action="store_true", help="drive the ASGI app directly")
    parser.add_argument("--rounds", type=int, default=5, help="--in-process: measured rounds")
    parser.add_argument("--profile", action="store_true", help="--in-process: under cProfile")
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="--in-process: a setting of the app (e.g. access_log=false), repeatable",
    )
    args = parser.parse_args()
    if args.in_process:
        in_process(args)
        return

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
    report(stats, args.top)


def report(stats: pstats.Stats, top: int) -> None:
    total = stats.total_tt  # type: ignore[attr-defined]
    raw = stats.stats  # type: ignore[attr-defined]
    print("  own time by stage (% of all server CPU):")
    for name, needles in STAGES.items():
        own = sum(
            entry[2]
            for (file, _, func), entry in raw.items()
            if any(needle in f"{file}:{func}" for needle in needles)
        )
        print(f"    {name:<32} {100 * own / total:5.1f} %")
    print(f"  top {top} functions by own time:")
    out = io.StringIO()
    stats.stream = out  # type: ignore[attr-defined]
    stats.sort_stats("tottime").print_stats(top)
    lines = out.getvalue().splitlines()
    start = next(i for i, line in enumerate(lines) if "ncalls" in line)
    for line in lines[start : start + top + 1]:
        print("   ", line.replace(str(REPO_ROOT) + "/", "")[:150])


# -- in-process: the app without a socket ------------------------------------------------

_CREATE_BODY = msgspec.json.encode({"payload": PAYLOAD})
_RESUME_BODY = msgspec.json.encode({"payload": {"flight": "PM101"}})
# What the HTTP bench's aiohttp client sends besides the request's own headers.
_CLIENT_HEADERS = [
    (b"host", b"127.0.0.1"),
    (b"accept", b"*/*"),
    (b"accept-encoding", b"gzip, deflate"),
    (b"user-agent", b"Python/3.11 aiohttp/3"),
    (b"content-type", b"application/json"),
]


async def _call(
    app: Any, path: str, body: bytes, headers: list[tuple[bytes, bytes]]
) -> tuple[int, bytes]:
    """One ASGI HTTP request: (status, body)."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [*_CLIENT_HEADERS, (b"content-length", str(len(body)).encode()), *headers],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8787),
        "state": {},
    }
    sent = False
    status = 0
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            await asyncio.Event().wait()  # the client never leaves
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    return status, b"".join(chunks)


async def _lifecycle(app: Any, n: int) -> None:
    status, raw = await _call(app, "/v1/continuations", _CREATE_BODY, [])
    if status != 201:
        msg = f"create: {status} {raw!r}"
        raise RuntimeError(msg)
    created = msgspec.json.decode(raw)
    continuation_id = created["continuation"]["continuationId"]
    headers = [
        (b"idempotency-key", f"bench-{n}".encode()),
        (b"authorization", f"PauseMesh {created['resumeToken']}".encode()),
    ]
    path = f"/v1/continuations/{continuation_id}/resume"
    status, raw = await _call(app, path, _RESUME_BODY, headers)
    if status != 200:
        msg = f"resume: {status} {raw!r}"
        raise RuntimeError(msg)


async def _lifespan(app: Any) -> tuple[asyncio.Task[None], asyncio.Queue[dict[str, Any]]]:
    """Start the app's lifespan; the queue sends it ``lifespan.shutdown`` later."""
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    started = asyncio.get_running_loop().create_future()

    async def send(message: dict[str, Any]) -> None:
        if message["type"].startswith("lifespan.startup") and not started.done():
            started.set_result(message)

    await inbox.put({"type": "lifespan.startup"})
    task = asyncio.create_task(app({"type": "lifespan", "state": {}}, inbox.get, send))
    message = await started
    if message["type"] != "lifespan.startup.complete":
        raise RuntimeError(str(message))
    return task, inbox


async def _in_process_rounds(app: Any, args: argparse.Namespace) -> list[float]:
    task, inbox = await _lifespan(app)
    counter = iter(range(1_000_000_000))

    async def run(count: int) -> None:
        todo = iter(range(count))

        async def worker() -> None:
            for _ in todo:
                await _lifecycle(app, next(counter))

        await asyncio.gather(*(worker() for _ in range(args.concurrency)))

    await run(min(500, args.lifecycles))  # warm-up: imports, caches, SQLite pages
    per: list[float] = []
    for _ in range(args.rounds):
        before = time.process_time()
        await run(args.lifecycles)
        per.append(1000 * (time.process_time() - before) / args.lifecycles)
    await inbox.put({"type": "lifespan.shutdown"})
    await task
    return per


def in_process(args: argparse.Namespace) -> None:
    from pausemesh.serving.process_logging import configure_process_logging  # noqa: PLC0415 - after sys.path is fixed
    from pausemesh.settings import load_settings  # noqa: PLC0415
    from pausemesh.web.app import create_app  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as tmp:
        environ = {k: v for k, v in os.environ.items() if not k.startswith("PAUSEMESH_")}
        settings = load_settings(
            environ=environ,
            env_file=None,
            overrides={
                "database_path": str(Path(tmp) / "profile.db"),
                "log_level": args.log_level,
                "instance_name": "profile:0",
                **dict(setting.split("=", 1) for setting in args.setting),
            },
        )
        configure_process_logging(settings)
        # The CLI logs to stderr, which the HTTP bench sends to a file: so does this.
        with (Path(tmp) / "server.log").open("w") as log:
            for handler in logging.getLogger().handlers:
                if isinstance(handler, logging.StreamHandler):
                    handler.setStream(log)
            app = create_app(settings)
            profiler = cProfile.Profile(time.process_time) if args.profile else None
            if profiler is not None:
                profiler.enable()
            per = uvloop.run(_in_process_rounds(app, args))
            if profiler is not None:
                profiler.disable()
    load = os.getloadavg()
    print(
        f"bench/profile_http.py --in-process: {args.rounds} rounds of {args.lifecycles}"
        f" lifecycles, {args.concurrency} in flight, log level {args.log_level}"
        f"{''.join(', ' + setting for setting in args.setting)}"
        f"{', under cProfile (inflated)' if profiler else ''}"
    )
    print("  CPU per lifecycle (ms) by round: " + " ".join(f"{p:.3f}" for p in per))
    print(f"  median {statistics.median(per):.3f} ms, min {min(per):.3f} ms")
    print(f"  load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    if profiler is not None:
        report(pstats.Stats(profiler), args.top)


if __name__ == "__main__":
    main()
