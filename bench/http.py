# ruff: noqa: A005 - the file name is the Makefile target's; the stdlib clash is handled below
"""HTTP benchmark: create+resume lifecycles/s against a real ``pausemesh serve`` process.

One lifecycle = ``POST /v1/continuations`` then ``POST …/resume`` with its token. The
client keeps ``--concurrency`` lifecycles in flight (16 by default) against a server on SQLite
(WAL, one file in a temp directory; ``--sqlite-sync``: ``commit``, the default,
``synchronous=FULL`` as the reference, or ``ack``; either way no write is acknowledged before
it is on disk). ``--client native`` (the default
when the machine has a C compiler) is ``bench/lifecycle_client.c``: one keep-alive connection
per thread, a few microseconds of CPU per request, so on a 2-core machine the cores are left
to the server under test; ``--client aiohttp`` is aiohttp on uvloop (about 0.5 ms of CPU per
lifecycle, close to half a core at these rates). ``--jwt``, ``--observability`` and
``--agent`` always use aiohttp.

Prints lifecycles/s, p50/p99 lifecycle latency and the server's CPU use (the server process
and its worker processes), read from ``/proc/<pid>/stat`` over the measured window, for each
``--workers`` setting in turn, and raw one-row SQLite commits/s on the same disk in the same
run: a lifecycle is two commits, so "raw commits ÷ 2" is what SQLite alone could sustain.
With ``--workers``, each serving process's share too, round by round: its CPU (% of a core)
and how many of the client's connections it held halfway through (the kernel spreads them
over the workers' listening sockets), which tells a worker left idle from one at full load;
and the whole machine's idle, iowait and softirq shares (``/proc/stat``), the kernel's part
that no process's CPU figure includes.
Figures, never assertions.

``--reference PATH`` (a checkout or git directory of ``aantenore/pausemesh``, the TypeScript
reference: ``git clone https://github.com/aantenore/pausemesh``) measures that server first, in
the same run with the same client, on its own SQLite file (WAL, ``synchronous`` FULL), and
prints the ratio ours/reference for each ``--workers`` setting. ``bench/reference.py`` builds
it in a cache directory (with Node 24 from npm when the ``node`` on PATH is older).

``--jwt`` adds, in the same run, a second server with JWT bearer identity on
(``PAUSEMESH_AUTH_JWKS_URL``: an RS256 key in a local JWKS file; every request carries one
access token, verified on each request) and prints its lifecycles/s against auth off. The two
are measured in alternating rounds (``--rounds``), so background load falls on both alike.

``--observability``: instead, rounds alternate between a server with tracing and metrics on
(the OpenTelemetry SDK records every span and exports it to nothing, ``PAUSEMESH_METRICS=1``)
and one with both off, and the ratio on/off is printed (same run, same machine load).

``--agent``: rounds alternate between a server with an agent (``--agent``, so ``/agui`` and the
owed-run machinery are on) and one without, and the ratio agent/plain is printed: what serving
an agent costs a plain continuation's create+resume (same run, same machine load). Both
servers export metrics (``PAUSEMESH_METRICS=1``): the store writes and commits per lifecycle
are read from ``/metrics`` (the SQLite group-commit histogram), a count the load cannot blur.

``--store-metrics`` (with ``--workers``): our servers export metrics, and the table adds where a
SQLite write group's time goes, read from ``/metrics`` of each worker that answers: writes per
commit, the wait for the write turn a sibling worker holds, and BEGIN to COMMIT.

``--floor`` (with ``--workers``): the table adds the stack under PauseMesh alone, served as
``--workers N`` serves PauseMesh (``bench/stack_floor.py``): ``Litestar``, an app of the same
two routes with no store, no log line and no middleware, and ``uvicorn``, a bare ASGI app; and
it prints how the server CPU per lifecycle splits into the stack's and PauseMesh's own, against
what 0.8 of raw commits ÷ 2 leaves per lifecycle on these cores.

Usage: .venv/bin/python bench/http.py [--seconds 10] [--concurrency 16] [--warmup 2]
       [--workers 1,2] [--rounds 1] [--client native|aiohttp]
       [--reference PATH] [--cache-dir DIR] [--store-metrics] [--floor]
       .venv/bin/python bench/http.py --jwt [--rounds 2]
       .venv/bin/python bench/http.py --agent [--rounds 3]
       .venv/bin/python bench/http.py --observability [--rounds 2] [--seconds 8]
"""

from __future__ import annotations

import sys
from pathlib import Path

# This file is named http.py: run as a script, its directory would shadow the stdlib's
# ``http`` package. Swap that directory for the repository root before other imports.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from contextlib import suppress  # noqa: E402
from urllib.parse import urlsplit  # noqa: E402

import aiohttp  # noqa: E402
import uvloop  # noqa: E402
from bench.core import raw_commit_rate  # noqa: E402
from bench.native_client import ClientRun, build_client, compiler, run_client  # noqa: E402
from bench.reference import (  # noqa: E402
    ReferenceServer,
    build_reference,
    cache_dir,
    node_24,
    node_version,
)
from bench.stack_floor import APPS as FLOOR_APPS  # noqa: E402
from bench.stack_floor import FloorServer  # noqa: E402
from tests.support.identity import SigningKey, jwt_env, write_jwks  # noqa: E402
from tests.support.server import ServerProcess  # noqa: E402

from pausemesh.credentials.bearer import bearer_auth  # noqa: E402
from pausemesh.settings import load_settings  # noqa: E402

PAYLOAD = {
    "kind": "input",
    "message": "Which flight should I book?",
    "responseSchema": {
        "type": "object",
        "properties": {"flight": {"type": "string", "enum": ["PM101", "PM202"]}},
        "required": ["flight"],
    },
}
RESUME = {"payload": {"flight": "PM101"}}
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

# The server of the "on" rounds: the SDK records every span (a batch processor, as in
# production) and its exporter drops them, so the cost measured is PauseMesh's, not a network's.
# The tracer provider is the one ``pausemesh.observability.otel.configure_tracing`` builds.
_SETUP = """
from opentelemetry import trace
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from pausemesh.observability.otel import tracer_provider

class Discard(SpanExporter):
    def export(self, spans):
        return SpanExportResult.SUCCESS

provider = tracer_provider()
provider.add_span_processor(BatchSpanProcessor(Discard()))
trace.set_tracer_provider(provider)
"""


_MAIN = """
import sys
from pausemesh.cli import main
sys.exit(main(sys.argv[1:]))
"""
_TRACED = _SETUP + _MAIN


class TracedServer(ServerProcess):
    def command(self) -> list[str]:
        command = super().command()
        return [sys.executable, "-c", _TRACED, *command[3:]]


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def process_stats() -> Iterator[tuple[int, list[str]]]:
    """(pid, the fields of ``/proc/<pid>/stat`` after the name) of every process still there."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            yield int(proc.name), _stat(int(proc.name))
        except OSError:
            continue


def serving_processes(pid: int) -> list[int]:
    """The processes that serve requests for server ``pid``: the worker processes uvicorn's
    supervisor spawned (not its resource tracker), or ``pid`` itself when it has none."""
    workers = []
    for child, fields in process_stats():
        if int(fields[1]) != pid:  # the parent pid
            continue
        with suppress(OSError):  # gone meanwhile
            if b"--multiprocessing-fork" in Path(f"/proc/{child}/cmdline").read_bytes():
                workers.append(child)
    return sorted(workers) or [pid]


def _cpu_of(fields: list[str]) -> float:
    """utime + stime (seconds) from a process's ``_stat`` fields, its threads included."""
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def process_cpu(pid: int) -> float:
    """utime + stime of one process (its threads included), from /proc; 0 once it is gone."""
    try:
        return _cpu_of(_stat(pid))
    except OSError:
        return 0.0


def machine_ticks() -> list[int]:
    """The whole machine's CPU time so far, in ticks, from the first line of /proc/stat:
    user, nice, system, idle, iowait, irq, softirq, steal."""
    return [int(n) for n in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]


def machine_shares(before: list[int], after: list[int]) -> tuple[float, float, float]:
    """Idle, iowait and softirq as fractions of all the cores' time between two readings of
    ``machine_ticks``: what the processes' own CPU figures leave out (softirq is the kernel's
    packet work for the loopback, charged to no process)."""
    spent = [b - a for a, b in zip(before, after, strict=True)]
    total = sum(spent) or 1
    return spent[3] / total, spent[4] / total, spent[6] / total


def connections_held(pids: list[int], port: int) -> dict[int, int]:
    """How many established TCP connections to local ``port`` each of ``pids`` holds: which
    worker the kernel gave each of the client's connections to (/proc/net/tcp and each
    process's file descriptors)."""
    established: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                # local address (hex ip:port), state (01: established), inode
                if fields[3] == "01" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    established.add(f"socket:[{fields[9]}]")
    held = dict.fromkeys(pids, 0)
    for pid in pids:
        with suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with suppress(OSError):
                    held[pid] += os.readlink(fd) in established
    return held


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process and its live children (the workers), from /proc."""
    total = 0.0
    for proc, fields in process_stats():
        if proc == pid or int(fields[1]) == pid:  # fields[1]: the parent pid
            total += _cpu_of(fields)
    return total


async def lifecycle(
    session: aiohttp.ClientSession, base: str, n: int, bearer: str | None = None
) -> None:
    identity = {} if bearer is None else {"authorization": f"Bearer {bearer}"}
    async with session.post(
        f"{base}/v1/continuations", json={"payload": PAYLOAD}, headers=identity
    ) as response:
        if response.status != 201:
            msg = f"create: {response.status} {await response.text()}"
            raise RuntimeError(msg)
        created = await response.json()
    continuation_id = created["continuation"]["continuationId"]
    token = created["resumeToken"]
    headers = {"idempotency-key": f"bench-{n}"}
    if bearer is None:
        headers["authorization"] = f"PauseMesh {token}"
    else:
        # Authorization carries the caller's identity; the resume token has its own header.
        headers.update(identity, **{"pausemesh-token": token})
    async with session.post(
        f"{base}/v1/continuations/{continuation_id}/resume",
        json=RESUME,
        headers=headers,
    ) as response:
        if response.status != 200:
            msg = f"resume: {response.status} {await response.text()}"
            raise RuntimeError(msg)
        await response.read()


async def drive(
    base: str, seconds: float, concurrency: int, pid: int | None, bearer: str | None = None
) -> tuple[int, list[float], float, float, float]:
    """Run lifecycles for ``seconds``: (count, latencies, wall s, server CPU s, client CPU s)."""
    connector = aiohttp.TCPConnector(limit=concurrency)
    latencies: list[float] = []
    counter = 0
    async with aiohttp.ClientSession(connector=connector) as session:
        deadline = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal counter
            while time.perf_counter() < deadline:
                counter += 1
                start = time.perf_counter()
                await lifecycle(session, base, counter, bearer)
                latencies.append(time.perf_counter() - start)

        cpu_before = cpu_seconds(pid) if pid else 0.0
        client_before = time.process_time()
        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - started
        cpu = (cpu_seconds(pid) - cpu_before) if pid else 0.0
        client_cpu = time.process_time() - client_before
    return len(latencies), latencies, wall, cpu, client_cpu


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def observability(args: argparse.Namespace) -> None:
    """Rounds alternating off/on; the on/off ratio of lifecycles/s over all rounds."""
    totals = {"off": [0, 0.0, 0.0], "on": [0, 0.0, 0.0]}
    print("bench/http.py --observability: tracing (SDK, exported to nothing) + metrics on vs off")
    for round_no in range(1, args.rounds + 1):
        for mode in ("off", "on"):
            with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
                server_args = [
                    "serve",
                    "--database-path",
                    str(Path(tmp) / "bench.db"),
                    "--log-level",
                    args.log_level,
                ]
                env = {"PAUSEMESH_METRICS": "1"} if mode == "on" else {}
                kind = TracedServer if mode == "on" else ServerProcess
                with kind(server_args, env=env) as server:
                    uvloop.run(drive(server.base_url, args.warmup, args.concurrency, None))
                    count, latencies, wall, cpu, _ = uvloop.run(
                        drive(server.base_url, args.seconds, args.concurrency, server.pid)
                    )
            totals[mode][0] += count
            totals[mode][1] += wall
            totals[mode][2] += cpu
            print(
                f"  round {round_no} {mode:>3}: {count / wall:8,.0f} lifecycles/s"
                f"  p50 {1000 * statistics.median(latencies):6.2f} ms"
                f"  p99 {1000 * percentile(latencies, 0.99):6.2f} ms"
                f"  server CPU/lifecycle {1000 * cpu / count:5.2f} ms"
                f"  (load average {os.getloadavg()[0]:.1f})"
            )
    rate = {mode: c / w for mode, (c, w, _) in totals.items()}
    cost = {mode: cpu / c for mode, (c, _, cpu) in totals.items()}
    print(f"  on/off lifecycles/s: {rate['on'] / rate['off']:.2f}  (goal >= 0.85)")
    print(f"  on/off server CPU per lifecycle: {cost['on'] / cost['off']:.2f}")
    print(f"  ({os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end)")


# Any agent will do: a plain continuation's lifecycle never runs it.
_AGENT = "tests.support.limits_agent:agent"
_GROUP = "pausemesh_store_commit_group_size"
_COMMIT = "pausemesh_store_commit_seconds"
_TURN_WAIT = "pausemesh_store_write_turn_wait_seconds"
_WAL_SYNC = "pausemesh_store_wal_sync_seconds"
_SQLITE = '{store="sqlite"}'
# Each histogram's _sum and _count as /metrics names them (turn wait and sync: no label).
_STORE_SERIES = {
    f"{name}_{part}{labels}": (name, part)
    for name, labels in ((_GROUP, _SQLITE), (_COMMIT, _SQLITE), (_TURN_WAIT, ""), (_WAL_SYNC, ""))
    for part in ("sum", "count")
}


def store_histograms(base: str) -> dict[tuple[str, str], float]:
    """The SQLite store's write histograms (group size, commit and turn-wait seconds) so far,
    ``{(name, "sum" | "count"): value}``, from the ``/metrics`` of whichever process answers."""
    import httpx  # noqa: PLC0415 - only --agent and --store-metrics read metrics

    text = httpx.get(f"{base}/metrics", timeout=30).text
    found = dict.fromkeys(_STORE_SERIES.values(), 0.0)
    for line in text.splitlines():
        series, _, value = line.rpartition(" ")
        if series in _STORE_SERIES:
            found[_STORE_SERIES[series]] = float(value)
    return found


def store_writes(base: str) -> tuple[float, float]:
    """(writes, commits) the server's SQLite store made so far, from its ``/metrics``."""
    found = store_histograms(base)
    return found[_GROUP, "sum"], found[_GROUP, "count"]


def workers_store_histograms(base: str, workers: int) -> list[dict[tuple[str, str], float]]:
    """``store_histograms`` of as many of the server's worker processes as answer in a few
    tries: each request is a new connection, which the kernel hands to any worker; workers
    are told apart by their counts (the load has stopped, so a worker's counts stand still)."""
    seen: dict[float, dict[tuple[str, str], float]] = {}
    for _ in range(8 * workers):
        found = store_histograms(base)
        seen[found[_GROUP, "count"]] = found
        if len(seen) == workers:
            break
    return list(seen.values())


def compare_agent(args: argparse.Namespace) -> None:
    """A server without an agent against one with: two servers, alternating rounds."""
    # lifecycles, wall s, server CPU s, store writes, commits
    totals = {"plain": [0, 0.0, 0.0, 0.0, 0.0], "agent": [0, 0.0, 0.0, 0.0, 0.0]}
    metrics = {"PAUSEMESH_METRICS": "1"}
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        common = ["serve", "--log-level", args.log_level]
        servers = {
            "plain": ServerProcess(
                [*common, "--database-path", str(Path(tmp) / "plain.db")], env=metrics
            ),
            "agent": ServerProcess(
                [*common, "--agent", _AGENT, "--database-path", str(Path(tmp) / "agent.db")],
                env=metrics,
            ),
        }
        with servers["plain"], servers["agent"]:
            for server in servers.values():
                uvloop.run(drive(server.base_url, args.warmup, args.concurrency, None))
            for round_no in range(1, args.rounds + 1):
                for name, server in servers.items():
                    writes, commits = store_writes(server.base_url)
                    count, _, wall, cpu, _ = uvloop.run(
                        drive(server.base_url, args.seconds, args.concurrency, server.pid)
                    )
                    # The last owed-run pokes of the round finish before the scrape.
                    time.sleep(0.5)
                    writes_after, commits_after = store_writes(server.base_url)
                    row = totals[name]
                    row[0] += count
                    row[1] += wall
                    row[2] += cpu
                    row[3] += writes_after - writes
                    row[4] += commits_after - commits
                    print(
                        f"  round {round_no} {name:>5}: {count / wall:8,.0f} lifecycles/s"
                        f"  server CPU/lifecycle {1000 * cpu / count:5.2f} ms"
                        f"  store writes/lifecycle {(writes_after - writes) / count:4.2f}"
                        f"  (load average {os.getloadavg()[0]:.1f})"
                    )
    print(
        f"bench/http.py --agent: create+resume of plain continuations over HTTP, {args.rounds}"
        f" alternating rounds of {args.seconds:.0f}s each"
    )
    print(f"  ({os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end)")
    rate, cost = {}, {}
    for name, (done, wall, cpu, writes, commits) in totals.items():
        rate[name], cost[name] = done / wall, cpu / done
        print(
            f"  {name:>5}: {rate[name]:8,.0f} lifecycles/s,"
            f" server CPU per lifecycle {1000 * cost[name]:.3f} ms,"
            f" store writes per lifecycle {writes / done:.2f}"
            f" (commits {commits / done:.2f})"
        )
    print(f"  agent/plain lifecycles/s: {rate['agent'] / rate['plain']:.2f}")
    print(f"  agent/plain server CPU per lifecycle: {cost['agent'] / cost['plain']:.2f}")


class Totals:
    """One setting's figures summed over its rounds."""

    def __init__(self, label: str, processes: int = 1) -> None:
        self.label = label
        self.processes = processes
        self.count = 0
        self.latencies: list[float] = []
        self.wall = self.cpu = self.client_cpu = 0.0
        # --store-metrics: the store histograms' sums and counts over every worker seen.
        self.store: dict[tuple[str, str], float] = {}
        self.workers_seen = 0
        # Per round: its wall time, and each serving process's CPU seconds and the client
        # connections it held.
        self.per_process: list[tuple[float, list[tuple[float, int]]]] = []
        # Per round: the whole machine's idle, iowait and softirq shares.
        self.machine: list[tuple[float, float, float]] = []

    @property
    def rate(self) -> float:
        return self.count / self.wall

    def rows(self) -> list[tuple[str, str]]:
        return [
            ("server", self.label),
            ("lifecycles (create+resume)", f"{self.count}"),
            ("lifecycles/s", f"{self.rate:,.0f}"),
            ("lifecycle p50 (ms)", f"{1000 * statistics.median(self.latencies):.2f}"),
            ("lifecycle p99 (ms)", f"{1000 * percentile(self.latencies, 0.99):.2f}"),
            ("server CPU (% of one core)", f"{100 * self.cpu / self.wall:.0f}"),
            ("server CPU per lifecycle (ms)", f"{1000 * self.cpu / self.count:.2f}"),
            ("client CPU (% of one core)", f"{100 * self.client_cpu / self.wall:.0f}"),
            ("CPU-bound ceiling here (lifecycles/s)", f"{self.ceiling:,.0f}"),
            *self.process_rows(),
            *self.store_rows(),
        ]

    def process_rows(self) -> list[tuple[str, str]]:
        """Each server process's share and the machine's, round by round (``|`` between
        rounds): they tell a worker starved of connections from cores that are full."""
        if not self.per_process:
            return []
        cpu = " | ".join(
            " ".join(f"{100 * used / wall:.0f}" for used, _ in shares)
            for wall, shares in self.per_process
        )
        held = " | ".join(
            " ".join(f"{count}" for _, count in shares) for _, shares in self.per_process
        )
        machine = " | ".join(
            " ".join(f"{100 * share:.0f}" for share in shares) for shares in self.machine
        )
        return [
            ("CPU per server process (% of one core)", cpu),
            ("client connections per server process", held),
            ("machine idle, iowait, softirq (% of all)", machine),
        ]

    def store_rows(self) -> list[tuple[str, str]]:
        """--store-metrics: where a group's time goes (means over the servers' whole lives)."""
        if not self.store:
            return []

        def mean(name: str, scale: float = 1.0, digits: int = 3) -> str:
            count = self.store.get((name, "count"), 0.0)
            return f"{scale * self.store[name, 'sum'] / count:.{digits}f}" if count else "-"

        return [
            ("workers whose /metrics were read", f"{self.workers_seen}"),
            ("writes per commit (mean)", mean(_GROUP, digits=2)),
            ("write-turn wait per group (ms, mean)", mean(_TURN_WAIT, 1000)),
            ("BEGIN to COMMIT per group (ms, mean)", mean(_COMMIT, 1000)),
            ("WAL fsync after the turn (ms, mean)", mean(_WAL_SYNC, 1000)),
            ("groups per WAL fsync (mean)", self.groups_per_sync()),
        ]

    def groups_per_sync(self) -> str:
        syncs = self.store.get((_WAL_SYNC, "count"), 0.0)
        return f"{self.store[_GROUP, 'count'] / syncs:.2f}" if syncs else "-"

    @property
    def ceiling(self) -> float:
        """Lifecycles/s this machine's cores allow at the CPU measured per lifecycle: the
        server's and the client's together share the cores, and the server's processes can use
        one core each at most. A bound for reading the ratios, not a measurement."""
        server, client = self.cpu / self.count, self.client_cpu / self.count
        return min(self.processes / server, (os.cpu_count() or 1) / (server + client))


def native_lifecycles(binary: Path, base: str, *, seconds: float, concurrency: int) -> ClientRun:
    """The C client's lifecycles, with this bench's create and resume bodies."""
    return run_client(
        binary,
        base,
        seconds=seconds,
        concurrency=concurrency,
        create={"payload": PAYLOAD},
        resume=RESUME,
    )


def drive_native(
    binary: Path, base: str, seconds: float, concurrency: int, pid: int | None
) -> tuple[int, list[float], float, float, float]:
    """``drive`` with the C client (``bench/lifecycle_client.c``): the same figures."""
    cpu_before = cpu_seconds(pid) if pid else 0.0
    run = native_lifecycles(binary, base, seconds=seconds, concurrency=concurrency)
    cpu = (cpu_seconds(pid) - cpu_before) if pid else 0.0
    return run.count, run.latencies, run.wall, cpu, run.cpu


def drive_with(
    args: argparse.Namespace, base: str, seconds: float, pid: int | None
) -> tuple[int, list[float], float, float, float]:
    """``drive`` with the client chosen for the comparison (``args.native``: the C one)."""
    if args.native is None:
        return uvloop.run(drive(base, seconds, args.concurrency, pid))
    return drive_native(args.native, base, seconds, args.concurrency, pid)


def measure(args: argparse.Namespace, server: ServerProcess, totals: Totals) -> None:
    with server:
        drive_with(args, server.base_url, args.warmup, None)
        serving = serving_processes(server.pid)
        before = [process_cpu(pid) for pid in serving]
        # Which process holds which of the client's connections, counted halfway through.
        port = urlsplit(server.base_url).port or 80
        held: dict[int, int] = {}
        counter = threading.Timer(
            args.seconds / 2, lambda: held.update(connections_held(serving, port))
        )
        counter.start()
        ticks = machine_ticks()
        try:
            count, latencies, wall, cpu, client_cpu = drive_with(
                args, server.base_url, args.seconds, server.pid
            )
        finally:
            counter.cancel()
            counter.join()
        totals.machine.append(machine_shares(ticks, machine_ticks()))
        shares = [
            (process_cpu(pid) - then, held.get(pid, 0))
            for pid, then in zip(serving, before, strict=True)
        ]
        totals.per_process.append((wall, shares))
        if args.store_metrics and not isinstance(server, ReferenceServer | FloorServer):
            for found in workers_store_histograms(server.base_url, totals.processes):
                totals.workers_seen += 1
                for key, value in found.items():
                    totals.store[key] = totals.store.get(key, 0.0) + value
    totals.count += count
    totals.latencies += latencies
    totals.wall += wall
    totals.cpu += cpu
    totals.client_cpu += client_cpu


def ours(args: argparse.Namespace, tmp: str, workers: int, round_no: int) -> ServerProcess:
    database = Path(tmp) / f"bench-{workers}-{round_no}.db"
    server_args = ["serve", "--database-path", str(database), "--log-level", args.log_level]
    server_args += ["--workers", str(workers)]
    env = {"PAUSEMESH_SQLITE_SYNC": args.sqlite_sync}
    if args.store_metrics:
        env["PAUSEMESH_METRICS"] = "1"
    return ServerProcess(server_args, ready_path="/readyz", env=env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--workers", default="1", help="comma-separated worker counts, e.g. 1,2")
    parser.add_argument("--dir", type=Path, default=None, help="where the SQLite file goes")
    parser.add_argument(
        "--log-level", default="info", help="the server's log level (info logs each transition)"
    )
    parser.add_argument(
        "--jwt", action="store_true", help="also measure with JWT bearer identity on (ratio)"
    )
    parser.add_argument(
        "--observability", action="store_true", help="tracing and metrics on vs off, same run"
    )
    parser.add_argument(
        "--agent", action="store_true", help="a server with an agent vs one without, same run"
    )
    parser.add_argument(
        "--reference",
        type=Path,
        default=None,
        help="a checkout or git directory of aantenore/pausemesh: measure it in the same run",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="where the native client, Node 24 and the reference's build go",
    )
    parser.add_argument(
        "--client",
        choices=("native", "aiohttp"),
        default=None,
        help="the load client of the --workers/--reference comparison: native (C, built with"
        " the machine's cc; the default when one is found) or aiohttp (Python)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="alternating rounds of every setting (default 1; 2 with --jwt/--observability)",
    )
    parser.add_argument(
        "--store-metrics",
        action="store_true",
        help="--workers: servers export metrics, and the table adds where a SQLite write group's"
        " time goes (writes per commit, write-turn wait, BEGIN to COMMIT, WAL fsync) from"
        " /metrics",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="--workers: also measure the stack alone (bench/stack_floor.py: Litestar on uvicorn"
        " with no PauseMesh in it, and uvicorn alone), served as --workers N serves PauseMesh",
    )
    parser.add_argument(
        "--sqlite-sync",
        choices=("ack", "commit"),
        default="commit",
        help="--workers: the servers' PAUSEMESH_SQLITE_SYNC (commit, the default: synchronous=FULL,"
        " as the reference; ack: WAL fsync after the write turn, before any acknowledgement)",
    )
    args = parser.parse_args()
    args.native = None
    rounds = args.rounds or 1
    args.rounds = args.rounds or 2  # --jwt, --observability, --agent: two rounds by default
    if args.agent:
        compare_agent(args)
        return
    if args.jwt:
        compare_jwt(args)
        return
    if args.observability:
        observability(args)
        return
    compare(args, rounds)


_SYNC_WORDS = {
    "ack": "sqlite_sync=ack (synchronous=NORMAL, the WAL fsynced after the write turn and"
    " before any acknowledgement)",
    "commit": "sqlite_sync=commit (synchronous=FULL)",
}


def compare(args: argparse.Namespace, rounds: int) -> None:
    """Every --workers setting (and the reference, if named) in alternating rounds."""
    counts = [int(n) for n in args.workers.split(",")]
    cache = args.cache_dir or cache_dir()
    client = args.client or ("native" if compiler() else "aiohttp")
    if client == "native":
        args.native = build_client(cache)
    reference = None
    if args.reference is not None:
        node = node_24(cache)
        build, commit = build_reference(args.reference.resolve(), cache, node)
        reference = (build, node, commit)

    # Each round measures every setting in turn (and raw commits once), so background load
    # falls on all of them alike; the figures are summed over the rounds.
    results = [Totals(f"serve -w {n}", n) for n in counts]
    floors = [(app, n) for app in FLOOR_APPS for n in counts] if args.floor else []
    results += [Totals(f"{FLOOR_APPS[app]} -w {n}", n) for app, n in floors]
    if reference is not None:
        results.insert(0, Totals("reference"))
    raws: list[float] = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for round_no in range(1, rounds + 1):
            raws.append(raw_commit_rate(Path(tmp) / f"raw-{round_no}.db", args.seconds / 2))
            servers: list[ServerProcess] = [ours(args, tmp, n, round_no) for n in counts]
            servers += [FloorServer(app, n) for app, n in floors]
            if reference is not None:
                build, node, _ = reference
                database = Path(tmp) / f"reference-{round_no}.db"
                servers.insert(0, ReferenceServer(build, node, database, args.log_level))
            for server, totals in zip(servers, results, strict=True):
                measure(args, server, totals)
    raw = statistics.fmean(raws)

    # Every row any setting has, in order (the reference has no store rows: "-" there).
    tables = [dict(r.rows()) for r in results]
    names = list(dict.fromkeys(name for r in results for name, _ in r.rows()))
    width = max(
        len(name) for name in [*names, "ratio to raw commits / 2", "ceiling here / reference rate"]
    )
    # Columns as wide as the widest cell and a gap ("Litestar -w 2" beside "serve -w 2", a
    # round-by-round split beside the next setting's).
    column = max(13, 2 + max(len(cell) for table in tables for cell in table.values()))
    load = os.getloadavg()
    print(
        f"bench/http.py: pausemesh serve over HTTP, {rounds} round(s) of {args.seconds:.0f}s"
        " per setting,"
    )
    print(
        f"  {args.concurrency} lifecycles in flight from the {client} client,"
        f" SQLite WAL, {_SYNC_WORDS[args.sqlite_sync]},"
    )
    print(f"  server log level {args.log_level}; {os.cpu_count()} cores,")
    print(f"  load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at the end")
    if reference is not None:
        print(
            f"  reference: aantenore/pausemesh {reference[2][:12]} on Node"
            f" {node_version(reference[1])}, one process (SQLite WAL, synchronous FULL, one"
            " commit per request)"
        )
    print(
        f"  raw one-row SQLite commits/s (same disk, same run): {raw:,.0f} (÷ 2 = {raw / 2:,.0f})"
        + (f", per round {', '.join(f'{r:,.0f}' for r in raws)}" if rounds > 1 else "")
    )
    for name in names:
        print(f"  {name:<{width}}  " + "".join(f"{t.get(name, '-'):>{column}}" for t in tables))
    rates = [r.rate for r in results]
    ratios = "".join(f"{rate / (raw / 2):>{column}.2f}" for rate in rates)
    print(f"  {'ratio to raw commits / 2':<{width}}  {ratios}")
    if floors:
        floor_lines(results, counts, raw)
    if reference is not None:
        ratios = "".join(f"{rate / rates[0]:>{column}.2f}" for rate in rates)
        print(f"  {'ratio ours / reference':<{width}}  {ratios}")
        ceilings = "".join(f"{r.ceiling / rates[0]:>{column}.2f}" for r in results)
        print(f"  {'ceiling here / reference rate':<{width}}  {ceilings}")


def floor_lines(
    results: list[Totals], counts: list[int], raw: float, cores: int | None = None
) -> None:
    """What PauseMesh adds to the stack under it, per lifecycle, against what the goal of 0.8
    of raw commits ÷ 2 leaves for a lifecycle on these cores (at the client CPU measured)."""
    by_label = {r.label: r for r in results}
    goal = 0.8 * raw / 2
    print(
        "  --floor: Litestar = a Litestar app of the same two routes, uvicorn = a bare ASGI app;"
        " both with no store, no log line, served as serve -w N is"
    )
    for n in counts:
        serve, stack = by_label[f"serve -w {n}"], by_label[f"Litestar -w {n}"]
        own = serve.cpu / serve.count - stack.cpu / stack.count
        client = serve.client_cpu / serve.count
        # At the goal's rate the server's N processes (one core each at most) and the client
        # share the machine's cores: the server CPU per lifecycle that rate leaves.
        budget = min(n, (cores or os.cpu_count() or 1) - goal * client) / goal
        print(
            f"  -w {n}: server CPU per lifecycle {1000 * serve.cpu / serve.count:.2f} ms, of which"
            f" the stack alone {1000 * stack.cpu / stack.count:.2f} and PauseMesh {1000 * own:.2f};"
            f" 0.8 of raw commits ÷ 2 ({goal:,.0f}/s) leaves {1000 * budget:.2f} ms in all"
        )


async def check_costs(jwks_uri: str, key: SigningKey, count: int = 300) -> tuple[float, float]:
    """In-process: µs per request for a full JWT check (a token seen for the first time) and
    for a remembered one (the same token again, as a client sends it until it expires)."""
    auth = bearer_auth(load_settings(environ=jwt_env(jwks_uri), env_file=None))
    if auth is None:
        msg = "the JWT settings configure no resolver"
        raise RuntimeError(msg)
    tokens = [f"Bearer {key.token(f'user-{n}', lifetime=3600)}" for n in range(count)]
    await auth.identify(tokens[0])  # the JWKS is read once
    started = time.perf_counter()
    for token in tokens:
        await auth.identify(token)
    full = (time.perf_counter() - started) / count
    started = time.perf_counter()
    for _ in range(count):
        await auth.identify(tokens[0])
    remembered = (time.perf_counter() - started) / count
    return 1e6 * full, 1e6 * remembered


def compare_jwt(args: argparse.Namespace) -> None:
    """Auth off against JWT auth on: two servers, measured in alternating rounds."""
    key = SigningKey.rsa("bench")
    token = key.token("bench-client", lifetime=3600)
    totals = {"off": [0, 0.0, 0.0], "jwt": [0, 0.0, 0.0]}  # lifecycles, wall s, server CPU s
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        jwks = Path(tmp) / "jwks.json"
        write_jwks(jwks, key)
        common = ["serve", "--log-level", args.log_level]
        off = ServerProcess([*common, "--database-path", str(Path(tmp) / "off.db")])
        jwt = ServerProcess(
            [*common, "--database-path", str(Path(tmp) / "jwt.db")], env=jwt_env(jwks.as_uri())
        )
        with off, jwt:
            bearers = {"off": None, "jwt": token}
            servers = {"off": off, "jwt": jwt}
            for name, server in servers.items():
                uvloop.run(
                    drive(server.base_url, args.warmup, args.concurrency, None, bearers[name])
                )
            for _ in range(args.rounds):
                for name, server in servers.items():
                    count, _, wall, cpu, _ = uvloop.run(
                        drive(
                            server.base_url,
                            args.seconds,
                            args.concurrency,
                            server.pid,
                            bearers[name],
                        )
                    )
                    totals[name][0] += count
                    totals[name][1] += wall
                    totals[name][2] += cpu
        full_us, remembered_us = asyncio.run(check_costs(jwks.as_uri(), key))
    rates = {name: count / wall for name, (count, wall, _) in totals.items()}
    per_core = {name: count / cpu for name, (count, _, cpu) in totals.items() if cpu}
    load = os.getloadavg()[0]
    print(
        f"bench/http.py --jwt: create+resume over HTTP, {args.rounds} alternating rounds of"
        f" {args.seconds:.0f}s each"
    )
    print(f"  ({os.cpu_count()} cores, load average {load:.1f} at the end)")
    print(f"  lifecycles/s, auth off          {rates['off']:>10,.0f}")
    print(f"  lifecycles/s, JWT (RS256) on    {rates['jwt']:>10,.0f}")
    print(f"  JWT on / auth off               {rates['jwt'] / rates['off']:>10.2f}  (goal >= 0.9)")
    if len(per_core) == 2:
        ratio = per_core["jwt"] / per_core["off"]
        print(f"  per server core, JWT / off      {ratio:>10.2f}")
    print(
        f"  JWT check, first sight (us)     {full_us:>10.0f}  (header, key, RS256 verify, claims)"
    )
    print(f"  JWT check, remembered (us)      {remembered_us:>10.0f}  (same token again)")


if __name__ == "__main__":
    main()
