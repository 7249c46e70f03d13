# ruff: noqa: E402 - sys.path is fixed before the imports (see below)
"""Where tracing and metrics cost CPU: the real app in one process, tracing on against off.

Each measurement runs in a fresh child process (the OpenTelemetry tracer provider is global and
set once per process): ``create_app`` on a SQLite file, served through ``httpx.ASGITransport``
(no sockets, no uvicorn), logging as ``pausemesh serve`` configures it (level ``info``, the text
format, the access line on) written to ``/dev/null``, and ``--lifecycles`` create+resume
lifecycles, ``--concurrency`` in flight. "on" is the server of ``bench/http.py --observability``:
the SDK's ``TracerProvider`` with a ``BatchSpanProcessor`` whose exporter drops every span, and
``PAUSEMESH_METRICS=1``; "off" has neither (``--modes`` also takes ``tracing`` and ``metrics``,
each alone). The collector is tuned as ``pausemesh serve`` tunes it once the app is built
(``pausemesh.serving.process_tuning``) unless ``--default-gc``. Rounds alternate the modes; the figures are
process CPU time per lifecycle (client included: it is the same in both, so on minus off is
tracing's and the metrics' cost) and the part of it spent in the garbage collector (timed
through ``gc.callbacks``).

``--profile on`` (or ``off``) instead runs one child under cProfile and prints the functions with
the most own time and the telemetry code's own-time share by package.

Usage: .venv/bin/python bench/profile_observability.py [--rounds 3] [--lifecycles 2000]
       [--default-gc] [--modes off,on]
       .venv/bin/python bench/profile_observability.py --profile on [--top 30]
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
import gc
import io
import logging
import os
import pstats
import statistics
import subprocess
import tempfile
import time
from typing import Any

import httpx
import uvloop
from asgi_lifespan import LifespanManager

PAYLOAD = {
    "kind": "input",
    "message": "Which flight should I book?",
    "responseSchema": {
        "type": "object",
        "properties": {"flight": {"type": "string", "enum": ["PM101", "PM202"]}},
        "required": ["flight"],
    },
}


def _install_sdk() -> None:
    """The "on" child's tracer provider: what ``bench/http.py --observability`` installs,
    with the SDK settings ``pausemesh.observability.otel.configure_tracing`` uses."""
    from opentelemetry import trace  # noqa: PLC0415
    from opentelemetry.sdk.trace.export import (  # noqa: PLC0415
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    from pausemesh.observability.otel import tracer_provider  # noqa: PLC0415

    class Discard(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:  # noqa: ARG002 - drops them
            return SpanExportResult.SUCCESS

    provider = tracer_provider()
    provider.add_span_processor(BatchSpanProcessor(Discard()))
    trace.set_tracer_provider(provider)


async def _lifecycle(client: httpx.AsyncClient, n: int) -> None:
    created = await client.post("/v1/continuations", json={"payload": PAYLOAD})
    if created.status_code != 201:
        msg = f"create: {created.status_code} {created.text}"
        raise RuntimeError(msg)
    body = created.json()
    resumed = await client.post(
        f"/v1/continuations/{body['continuation']['continuationId']}/resume",
        json={"payload": {"flight": "PM101"}},
        headers={
            "idempotency-key": f"bench-{n}",
            "authorization": f"PauseMesh {body['resumeToken']}",
        },
    )
    if resumed.status_code != 200:
        msg = f"resume: {resumed.status_code} {resumed.text}"
        raise RuntimeError(msg)


class _CollectorTime:
    """CPU time spent in the cyclic garbage collector (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0

    def callback(self, phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.process_time()
        else:
            self.seconds += time.process_time() - self._started


async def _drive(
    mode: str, lifecycles: int, concurrency: int, profile: Path | None, *, gc_tuning: bool
) -> tuple[float, float]:
    from pausemesh.observability.log_format import configure_logging  # noqa: PLC0415
    from pausemesh.serving.process_tuning import tune_for_serving  # noqa: PLC0415
    from pausemesh.settings import Settings  # noqa: PLC0415
    from pausemesh.web.app import create_app  # noqa: PLC0415

    if mode in ("on", "tracing"):
        _install_sdk()
    configure_logging("info")
    sink = open(os.devnull, "w")  # noqa: SIM115 - held for the process's life
    for handler in logging.getLogger().handlers:
        handler.setStream(sink)  # type: ignore[attr-defined]
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            database_path=str(Path(tmp) / "bench.db"),
            insecure_no_auth=True,
            metrics=mode in ("on", "metrics"),
        )
        # Litestar types its ASGI callable more narrowly than asgi-lifespan and httpx take.
        app: Any = create_app(settings)
        if gc_tuning:
            tune_for_serving()  # as pausemesh serve does once its app is built
        async with (
            LifespanManager(app),
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app), base_url="http://localhost"
            ) as client,
        ):
            for n in range(200):  # warm-up: imports, caches, the first SQLite pages
                await _lifecycle(client, -n - 1)
            numbers = iter(range(lifecycles))
            collector = _CollectorTime()
            gc.callbacks.append(collector.callback)

            async def worker() -> None:
                for n in numbers:
                    await _lifecycle(client, n)

            profiler = cProfile.Profile(time.process_time) if profile else None
            started = time.process_time()
            if profiler:
                profiler.enable()
            await asyncio.gather(*(worker() for _ in range(concurrency)))
            if profiler:
                profiler.disable()
                profiler.dump_stats(str(profile))
            gc.callbacks.remove(collector.callback)
            per = (time.process_time() - started) / lifecycles
            return per, collector.seconds / lifecycles


def _child(args: argparse.Namespace) -> None:
    profile = Path(args.profile_to) if args.profile_to else None
    per, collecting = uvloop.run(
        _drive(
            args.child,
            args.lifecycles,
            args.concurrency,
            profile,
            gc_tuning=not args.default_gc,
        )
    )
    print(per, collecting)


def _run_child(
    mode: str, args: argparse.Namespace, profile_to: Path | None = None
) -> tuple[float, float]:
    command = [
        sys.executable,
        __file__,
        "--child",
        mode,
        "--lifecycles",
        str(args.lifecycles),
        "--concurrency",
        str(args.concurrency),
    ]
    if profile_to is not None:
        command += ["--profile-to", str(profile_to)]
    if args.default_gc:
        command.append("--default-gc")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAUSEMESH_", "OTEL_"))}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(done.stderr)
    per, collecting = done.stdout.split()[-2:]
    return float(per), float(collecting)


def _compare(args: argparse.Namespace) -> None:
    costs: dict[str, list[float]] = {"off": [], "on": []}
    print(
        f"bench/profile_observability.py: {args.lifecycles} create+resume lifecycles in one"
        f" process (ASGITransport), {args.concurrency} in flight,"
        f" {'default' if args.default_gc else 'pausemesh serve'} collector settings"
    )
    for round_no in range(1, args.rounds + 1):
        for mode in args.modes.split(","):
            per, collecting = _run_child(mode, args)
            costs.setdefault(mode, []).append(per)
            print(
                f"  round {round_no} {mode:>3}: {1e6 * per:7.0f} µs CPU per lifecycle,"
                f" {1e6 * collecting:5.0f} µs of it in the garbage collector"
                f"  (load average {os.getloadavg()[0]:.1f})"
            )
    off = statistics.median(costs["off"])
    on = statistics.median(costs["on"])
    print(f"  median off {1e6 * off:.0f} µs, on {1e6 * on:.0f} µs per lifecycle")
    print(f"  tracing + metrics: {1e6 * (on - off):.0f} µs per lifecycle, on/off {on / off:.2f}")


def _profile(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "child.prof"
        _run_child(args.profile, args, path)
        stats = pstats.Stats(str(path))
    total = stats.total_tt  # type: ignore[attr-defined]
    print(
        f"bench/profile_observability.py --profile {args.profile}: {args.lifecycles} lifecycles,"
        f" {1e6 * total / args.lifecycles:.0f} µs CPU per lifecycle under cProfile (inflated)"
    )
    raw = stats.stats  # type: ignore[attr-defined]
    needles = ("opentelemetry", "telemetry.py", "observability.py", "log_format.py", "prometheus")
    print("  own time by package (% of all CPU):")
    for needle in needles:
        own = sum(entry[2] for (file, _, _), entry in raw.items() if needle in file)
        print(f"    {needle:<24} {100 * own / total:5.1f} %")
    out = io.StringIO()
    stats.stream = out  # type: ignore[attr-defined]
    stats.sort_stats("tottime").print_stats(args.top)
    lines = out.getvalue().splitlines()
    start = next(i for i, line in enumerate(lines) if "ncalls" in line)
    root = str(_HERE.parent) + "/"
    for line in lines[start : start + args.top + 1]:
        print("   ", line.replace(root, "")[:160])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--lifecycles", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument(
        "--modes", default="off,on", help="comma-separated: off, on, tracing, metrics"
    )
    parser.add_argument(
        "--default-gc",
        action="store_true",
        help="CPython's collector settings instead of pausemesh serve's (process_tuning)",
    )
    parser.add_argument("--profile", choices=("on", "off"), default=None)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument(
        "--child", choices=("on", "off", "tracing", "metrics"), default=None, help=argparse.SUPPRESS
    )
    parser.add_argument("--profile-to", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
    elif args.profile:
        _profile(args)
    else:
        _compare(args)


if __name__ == "__main__":
    main()
