# ruff: noqa: E402 - sys.path is fixed before the imports (see below)
"""``/healthz`` latency while long threads are read (issue 40, item 6).

One real server (``pausemesh serve``, SQLite file, ``synchronous=FULL``), ``--threads`` threads
of ``--mib`` MiB each (``--message-kib`` user messages, each answered "Hello."), written
through the store's own ``save`` before the server starts; a probe in a process of its own
sends ``GET /healthz`` every 5 ms on one keep-alive connection.

By default, ``--bursts`` times: every thread is read at once, half of them by
``GET /agui/threads/{id}`` (the snapshot), half by ``POST /agui/connect`` (the reload): 6 x 7.5
MiB is the issue's "50 MB of threads read"; ``--pause`` seconds between bursts. The probe's
latency counts only while a burst is being read. ``--sustained SECONDS`` instead keeps
``--readers`` clients reading for that long (``--runs``: every third read is a run adding a
short message, the issue's "runs served on a long thread").

Prints the megabytes read, the server's CPU, the probe's latency p50, p99 and max, and the
same probe's p99 against an idle server on the same machine at the same moments (what a busy
machine adds on its own). The issue's goal: ``/healthz`` p99 under 20 ms while 50 MB of threads
are read.

Usage: .venv/bin/python bench/thread_reads.py [--threads 6] [--mib 7.5] [--bursts 20]
       [--pause 0.3] [--sustained SECONDS [--readers 6] [--runs]] [--nice -10]
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
import asyncio
import json
import multiprocessing
import os
import socket
import statistics
import tempfile
import time
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event as EventType

import httpx
import msgspec
from tests.support.server import ServerProcess

from pausemesh.stores.sqlite import SqliteDatabase, SqliteThreadStore

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_AGENT = "tests.support.limits_agent:agent"
_PROBE_INTERVAL = 0.005


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc/<pid>/stat (fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


async def seed(path: Path, threads: int, mib: float, message_kib: int) -> None:
    """``threads`` threads of about ``mib`` MiB, through ``SqliteThreadStore.save``."""
    database = await SqliteDatabase(path).open()
    store = SqliteThreadStore(database, owns_database=True)
    now = datetime.now(UTC)
    text = ("All work and no play makes a long thread. " * (message_kib * 25))[: message_kib * 1024]
    count = max(1, int(mib * 1024 * 1024 / (len(text) + 120)))
    try:
        for n in range(threads):
            record = await store.create_or_load(f"long-{n}", owner=None, now=now)
            messages = []
            for i in range(count):
                messages.append({"id": f"u{i}", "role": "user", "content": f"{i} {text}"})
                messages.append({"id": f"a{i}", "role": "assistant", "content": "Hello."})
            await store.save(msgspec.structs.replace(record, messages=messages), now=now)
            size = len(msgspec.json.encode(messages))
            print(f"seeded long-{n}: {size / 1e6:.1f} MB of messages", flush=True)
    finally:
        await store.close()


def probe(host: str, port: int, stop: EventType, out: Connection, nice: int) -> None:
    """``GET /healthz`` every ``_PROBE_INTERVAL`` on one connection until ``stop`` is set;
    sends (when each began, its latency) in seconds."""
    if nice:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    request = f"GET /healthz HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
    samples: list[tuple[float, float]] = []
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
            samples.append((began, time.monotonic() - began))
            time.sleep(_PROBE_INTERVAL)
    out.send(samples)


async def _read(http: httpx.AsyncClient, thread_id: str, *, snapshot: bool, tag: str) -> int:
    """One read of the thread, counted and not kept (the client does as little as it can)."""
    if snapshot:
        request = http.build_request("GET", f"/agui/threads/{thread_id}")
    else:
        body = {"threadId": thread_id, "runId": f"c-{tag}", "messages": []}
        request = http.build_request("POST", "/agui/connect", json=body)
    response = await http.send(request, stream=True)
    if response.status_code != 200:
        raise RuntimeError((await response.aread())[:500])
    size = 0
    async for chunk in response.aiter_raw():
        size += len(chunk)
    await response.aclose()
    return size


async def _run(http: httpx.AsyncClient, thread_id: str, tag: str) -> None:
    body = {
        "threadId": thread_id,
        "runId": f"r-{tag}",
        "messages": [{"id": f"m-{tag}", "role": "user", "content": "hi"}],
    }
    async with http.stream("POST", "/agui", json=body) as response:
        async for chunk in response.aiter_raw():
            if b"RUN_ERROR" in chunk:
                raise RuntimeError(chunk[:500])


async def bursts(
    server: ServerProcess, threads: int, count: int, pause: float
) -> tuple[int, list[tuple[float, float]]]:
    """``count`` bursts, each reading every thread at once: (bytes read, burst windows)."""
    total = 0
    windows: list[tuple[float, float]] = []
    clients = [httpx.AsyncClient(base_url=server.base_url, timeout=120) for _ in range(threads)]
    try:
        for burst in range(count):
            began = time.monotonic()
            sizes = await asyncio.gather(
                *(
                    _read(http, f"long-{n}", snapshot=(n + burst) % 2 == 0, tag=f"{burst}-{n}")
                    for n, http in enumerate(clients)
                )
            )
            windows.append((began, time.monotonic()))
            total += sum(sizes)
            await asyncio.sleep(pause)
    finally:
        for http in clients:
            await http.aclose()
    return total, windows


async def sustained(
    server: ServerProcess, threads: int, readers: int, seconds: float, *, runs: bool
) -> tuple[int, int]:
    """Readers until ``seconds`` are over: (bytes read, runs)."""
    totals = [0, 0]
    deadline = time.monotonic() + seconds

    async def reader(index: int) -> None:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=120) as http:
            turn = 0
            while time.monotonic() < deadline:
                thread_id = f"long-{(index + turn) % threads}"
                turn += 1
                if runs and turn % 3 == 0:
                    await _run(http, thread_id, f"{index}-{turn}")
                    totals[1] += 1
                else:
                    tag = f"{index}-{turn}"
                    totals[0] += await _read(http, thread_id, snapshot=turn % 2 == 1, tag=tag)

    await asyncio.gather(*(reader(i) for i in range(readers)))
    return totals[0], totals[1]


def _ms(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)


def _within(samples: list[tuple[float, float]], windows: list[tuple[float, float]]) -> list[float]:
    return [latency for at, latency in samples if any(a <= at <= b for a, b in windows)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=6)
    parser.add_argument("--mib", type=float, default=7.5, help="size of each thread")
    parser.add_argument("--message-kib", type=int, default=60)
    parser.add_argument("--bursts", type=int, default=20)
    parser.add_argument("--pause", type=float, default=0.3, help="seconds between bursts")
    parser.add_argument("--sustained", type=float, metavar="SECONDS", help="read this long")
    parser.add_argument("--readers", type=int, default=6, help="with --sustained")
    parser.add_argument(
        "--runs", action="store_true", help="with --sustained: every third read is a run"
    )
    parser.add_argument(
        "--nice",
        type=int,
        default=0,
        help="run both servers (and the probes) at this nice value, e.g. -10 (root) on a"
        " machine shared with other work, so that its load weighs less on the figures",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pm-thread-reads-") as tmp:
        db = Path(tmp) / "pm.db"
        asyncio.run(seed(db, args.threads, args.mib, args.message_kib))
        env = {"PAUSEMESH_ACCESS_LOG": "false", "PAUSEMESH_DATA_DIR": tmp}
        command = ["serve", "--agent", _AGENT, "--database-path", str(db)]
        control_command = ["serve", "--database-path", str(Path(tmp) / "control.db")]
        with (
            ServerProcess(command, env=env) as server,
            ServerProcess(control_command, env=env) as control,
        ):
            if args.nice:
                for target in (server, control):
                    os.setpriority(os.PRIO_PROCESS, target.pid, args.nice)
            # Warm the server and the page cache: each thread read once.
            asyncio.run(bursts(server, args.threads, 1, 0.0))
            cpu_before = cpu_seconds(server.pid)
            client_before = time.process_time()
            context = multiprocessing.get_context("spawn")
            stop = context.Event()
            probes = []
            for target in (server, control):
                receive, send = context.Pipe(duplex=False)
                prober = context.Process(
                    target=probe, args=(target.host, target.port, stop, send, args.nice)
                )
                prober.start()
                probes.append((prober, receive))
            time.sleep(1.0)  # the probes are connected and sampling
            began = time.monotonic()
            ran = 0
            if args.sustained:
                read_bytes, ran = asyncio.run(
                    sustained(server, args.threads, args.readers, args.sustained, runs=args.runs)
                )
                windows = [(began, time.monotonic())]
            else:
                read_bytes, windows = asyncio.run(
                    bursts(server, args.threads, args.bursts, args.pause)
                )
            elapsed = time.monotonic() - began
            cpu = cpu_seconds(server.pid) - cpu_before
            client_cpu = time.process_time() - client_before
            stop.set()
            samples = [receive.recv() for _, receive in probes]
            for prober, _ in probes:
                prober.join()
    busy, idle = (_within(s, windows) for s in samples)
    durations = [b - a for a, b in windows]
    print(
        json.dumps(
            {
                "mode": "sustained" if args.sustained else "bursts",
                "threads": args.threads,
                "mib_per_thread": args.mib,
                "mb_read": round(read_bytes / 1e6, 1),
                "mb_per_burst": round(read_bytes / 1e6 / len(windows), 1),
                "bursts": len(windows),
                "burst_seconds_p50": round(statistics.median(durations), 3),
                "runs": ran,
                "seconds": round(elapsed, 1),
                "server_cpu_seconds": round(cpu, 2),
                "client_cpu_seconds": round(client_cpu, 2),
                "healthz_samples_while_reading": len(busy),
                "healthz_p50_ms": _ms(busy, 0.5),
                "healthz_p99_ms": _ms(busy, 0.99),
                "healthz_max_ms": _ms(busy, 1.0),
                "healthz_mean_ms": round(statistics.fmean(busy) * 1000, 2),
                # The same probe against an idle server on the same machine, at the same
                # moments: what the machine itself adds (scheduling) to the figures above.
                "idle_server_healthz_p99_ms": _ms(idle, 0.99),
                "idle_server_healthz_max_ms": _ms(idle, 1.0),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
