"""A/B: this tree against another commit, measured side by side in short alternating slices.

On a shared or virtual machine the same server can run 30 % faster or slower from one minute
to the next (a sibling hyperthread, the host's disk), so two ``bench/http.py`` runs taken one
after the other cannot show a change of a few percent. This script exports ``--base`` (a
commit) with ``git archive`` into a temporary directory and compares it with the working tree:

- ``--mode http`` (default): both servers (``pausemesh serve --workers N`` on SQLite) run at
  once, and the C client (``bench/lifecycle_client.c``, 16 lifecycles in flight) drives one
  and then the other for ``--seconds`` each, ``--pairs`` times, in alternating order. An idle
  server costs nothing, so each slice has the machine as the other had it a moment before.
- ``--mode in-process``: ``bench/profile_http.py --in-process`` of each tree in turn (its CPU
  per lifecycle, the app without uvicorn and the socket), ``--pairs`` times.

``--after-env NAME=VALUE`` (repeatable, ``--mode http``) sets a variable for the "after"
servers only: with ``--base HEAD`` it compares a setting with the default on the same code,
e.g. ``--after-env PAUSEMESH_SQLITE_SYNC=ack``. ``--env NAME=VALUE`` sets one for both sides
(a change measured under a setting; ``--after-env`` wins for the after side). A side's
``PAUSEMESH_LOG_LEVEL`` or ``PAUSEMESH_WORKERS`` replaces ``--log-level`` or ``--workers`` for
that side's servers (the command line would win over the variable otherwise), e.g.
``--after-env PAUSEMESH_LOG_LEVEL=warning`` measures the log lines' share.

Prints each pair and the medians, the ratio after/base and in how many pairs "after" did
better. Figures, never assertions.

Usage: .venv/bin/python bench/ab.py --base COMMIT [--mode http|in-process] [--workers 2]
       [--pairs 10] [--seconds 4] [--env NAME=VALUE ...] [--after-env NAME=VALUE ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.http import drive_native, native_lifecycles
from bench.native_client import build_client
from bench.reference import export_commit
from tests.support.server import ServerProcess

REPO_ROOT = Path(__file__).resolve().parent.parent
CONCURRENCY = 16


@dataclass
class Side:
    """One tree: where it is, and what each slice measured."""

    name: str
    root: Path
    rates: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)
    extra_env: dict[str, str] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        """The environment that makes ``python -m pausemesh`` import this tree (and the side's
        own variables)."""
        if self.root == REPO_ROOT:
            return dict(self.extra_env)
        return {"PYTHONPATH": f"{self.root / 'backend'}{os.pathsep}{self.root}", **self.extra_env}


@contextmanager
def exported(commit: str) -> Iterator[Path]:
    """``commit`` of this repository as files in a temporary directory."""
    with tempfile.TemporaryDirectory(prefix="pausemesh-ab-") as tmp:
        export_commit(["git", "-C", str(REPO_ROOT)], commit, Path(tmp))
        yield Path(tmp)


def http(args: argparse.Namespace, sides: list[Side]) -> None:
    binary = build_client(Path(tempfile.gettempdir()) / "pausemesh-bench-cache")
    with tempfile.TemporaryDirectory(prefix="pausemesh-ab-db-") as tmp, ExitStack() as stack:
        servers = []
        for side in sides:
            command = ["serve", "--database-path", f"{tmp}/{side.name}.db"]
            # A side's own variable wins: ``serve``'s options would override it.
            if "PAUSEMESH_LOG_LEVEL" not in side.extra_env:
                command += ["--log-level", args.log_level]
            if "PAUSEMESH_WORKERS" not in side.extra_env:
                command += ["--workers", str(args.workers)]
            server = ServerProcess(command, ready_path="/readyz", env=side.env(), cwd=side.root)
            servers.append(stack.enter_context(server))
        for server in servers:  # warm-up: imports, caches, the first pages of the file
            native_lifecycles(binary, server.base_url, seconds=1.0, concurrency=CONCURRENCY)
        for pair in range(args.pairs):
            order = list(zip(sides, servers, strict=True))
            for side, server in order if pair % 2 == 0 else order[::-1]:
                count, _, wall, cpu, _ = drive_native(
                    binary, server.base_url, args.seconds, CONCURRENCY, server.pid
                )
                side.rates.append(count / wall)
                side.cpu_ms.append(cpu / count * 1000)
            report_pair(pair, sides)


def in_process(args: argparse.Namespace, sides: list[Side]) -> None:
    for pair in range(args.pairs):
        for side in sides if pair % 2 == 0 else sides[::-1]:
            done = subprocess.run(
                [
                    *(sys.executable, "bench/profile_http.py", "--in-process"),
                    *("--lifecycles", "3000", "--rounds", "2", "--log-level", args.log_level),
                ],
                cwd=side.root,
                env={**os.environ, **side.env()},
                capture_output=True,
                text=True,
                check=True,
            )
            median = next(line for line in done.stdout.splitlines() if "median" in line)
            side.cpu_ms.append(float(median.split()[1]))
        report_pair(pair, sides)


def report_pair(pair: int, sides: list[Side]) -> None:
    cells = []
    for side in sides:
        rate = f"{side.rates[-1]:7,.0f}/s " if side.rates else ""
        cells.append(f"{side.name} {rate}{side.cpu_ms[-1]:.3f} ms")
    print(f"  pair {pair + 1:2}: " + "   ".join(cells), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the commit to compare with")
    parser.add_argument("--mode", choices=("http", "in-process"), default="http")
    parser.add_argument("--workers", type=int, default=2, help="--mode http: workers per server")
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=4.0, help="--mode http: per slice")
    parser.add_argument("--log-level", default="info")
    parser.add_argument(
        "--after-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="--mode http: a variable for the after side's servers only (repeatable)",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="--mode http: a variable for both sides' servers (repeatable)",
    )
    args = parser.parse_args()
    if args.pairs < 1 or args.seconds <= 0 or args.workers < 1:
        parser.error("--pairs and --workers must be at least 1, --seconds above 0")
    for option, items in (("--after-env", args.after_env), ("--env", args.env)):
        if items and args.mode != "http":
            parser.error(f"{option} is for --mode http")
        if any("=" not in item or item.startswith("=") for item in items):
            parser.error(f"{option} takes NAME=VALUE")
    both = dict(item.split("=", 1) for item in args.env)
    extra = dict(item.split("=", 1) for item in args.after_env)
    with exported(args.base) as base_root:
        sides = [
            Side("base", base_root, extra_env=both),
            Side("after", REPO_ROOT, extra_env={**both, **extra}),
        ]
        what = f"{args.workers} worker(s), " if args.mode == "http" else ""
        what += "".join(f"both with {name}={value}, " for name, value in both.items())
        what += "".join(f"after with {name}={value}, " for name, value in extra.items())
        print(
            f"bench/ab.py --mode {args.mode}: base {args.base} against the working tree,"
            f" {what}{args.pairs} alternating pairs, load average {os.getloadavg()[0]:.1f}"
        )
        (http if args.mode == "http" else in_process)(args, sides)
    base, after = sides
    cpu_base, cpu_after = statistics.median(base.cpu_ms), statistics.median(after.cpu_ms)
    lines = [f"  CPU per lifecycle (ms), median: base {cpu_base:.3f}, after {cpu_after:.3f}"]
    lines[0] += f" (after/base {cpu_after / cpu_base:.3f})"
    cheaper = sum(a < b for a, b in zip(after.cpu_ms, base.cpu_ms, strict=True))
    lines.append(f"  after cost less CPU in {cheaper} of {args.pairs} pairs")
    if base.rates:
        rate_base, rate_after = statistics.median(base.rates), statistics.median(after.rates)
        faster = sum(a > b for a, b in zip(after.rates, base.rates, strict=True))
        lines.append(
            f"  lifecycles/s, median: base {rate_base:,.0f}, after {rate_after:,.0f}"
            f" (after/base {rate_after / rate_base:.3f}); after faster in {faster} of"
            f" {args.pairs} pairs"
        )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
