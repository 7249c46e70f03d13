# ruff: noqa: E402 - sys.path is fixed before the imports; a benchmark prints its figures
"""The fault run as a benchmark: conversations/s and the longest wait for a busy thread while
replicas are SIGKILLed every 2-4 s (often right after a client saw ``RUN_STARTED``, timed into
the airline call), with how many bookings a kill left unknown were recovered or resent.

Three ``pausemesh demo`` replicas on PostgreSQL (``--database-url``) or two processes on one
SQLite file (default); the demo airline is a shared SQLite file with simulated latency. The
same run without kills gives the ratio. See ``tests/support/faults.py`` for the client.

Usage: .venv/bin/python bench/faults.py [--conversations 150] [--concurrency 8]
       [--database-url postgresql://...] [--latency 0.6] [--lease 2]
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
import secrets
import tempfile
from collections import Counter

import asyncpg
from tests.support.faults import FaultReport, run_faults
from tests.support.postgres import fresh_schema
from tests.support.server import ServerProcess

from pausemesh.demo.reservations import Airline
from pausemesh.stores.postgres import open_postgres_storage
from pausemesh.stores.postgres.migrate import migrate
from pausemesh.stores.sqlite import open_sqlite_storage


async def _drop(url: str, schema: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


def _servers(args: argparse.Namespace, work: Path, airline: Airline) -> list[ServerProcess]:
    env = {
        "PAUSEMESH_SECRET_KEY": secrets.token_urlsafe(48),
        "PAUSEMESH_LOG_LEVEL": "warning",
        "PAUSEMESH_DEMO_AIRLINE_PATH": str(airline.path),
        "PAUSEMESH_DEMO_AIRLINE_LATENCY_SECONDS": str(args.latency),
        "PAUSEMESH_LEASE_SECONDS": str(args.lease),
    }
    if args.database_url:
        env["PAUSEMESH_DATABASE_SCHEMA"] = args.schema
        command = ["demo", "--no-browser", "--database-url", args.database_url]
        return [ServerProcess(command, env=env, startup_timeout=240) for _ in range(3)]
    command = ["demo", "--no-browser", "--database-path", str(work / "demo.db")]
    return [ServerProcess(command, env=env, startup_timeout=240) for _ in range(2)]


async def _recovery_steps(
    args: argparse.Namespace, work: Path, report: FaultReport
) -> Counter[str]:
    """How many RESENT and RECOVERED steps the ledger audited for the run's bookings."""
    if args.database_url:
        storage = await open_postgres_storage(args.database_url, schema=args.schema)
    else:
        storage = await open_sqlite_storage(str(work / "demo.db"))
    try:
        ledger = storage.operations
        if ledger is None:
            return Counter()
        steps: Counter[str] = Counter()
        for operation in report.operations.values():
            for step in await ledger.recoveries(operation):
                # A resend after one a kill cut off is counted apart too.
                steps.update([step.step] if step.number == 1 else [step.step, "RESENT again"])
        return steps
    finally:
        await storage.close()


def _once(args: argparse.Namespace, *, kills: bool) -> tuple[FaultReport, Counter[str]]:
    with tempfile.TemporaryDirectory(prefix="pausemesh-faults-") as tmp:
        work = Path(tmp)
        airline = Airline(work / "airline.db")
        if args.database_url:
            args.schema = fresh_schema("pm_bench_faults")
            asyncio.run(migrate(args.database_url, schema=args.schema))
        servers = _servers(args, work, airline)
        try:
            for server in servers:
                server.start()
            report = run_faults(
                servers,
                airline,
                conversations=args.conversations,
                concurrency=args.concurrency,
                kills=kills,
                latency=args.latency,
            )
            for server in servers:
                server.close()
            return report, asyncio.run(_recovery_steps(args, work, report))
        finally:
            for server in servers:
                server.close()
            if args.database_url:
                asyncio.run(_drop(args.database_url, args.schema))


def _print(label: str, report: FaultReport, steps: Counter[str]) -> None:
    print(
        f"{label}: {report.conversations} conversations in {report.seconds:.1f} s"
        f" = {report.per_second:.2f}/s; kills {report.kills}"
        f" ({report.kills_after_run_started} right after RUN_STARTED);"
        f" RESENT {steps['RESENT']} (after a cut-off resend {steps['RESENT again']}),"
        f" RECOVERED {steps['RECOVERED']};"
        f" airline bookings {len(report.airline_bookings)};"
        f" booked once {report.booked_once},"
        f" waiting for an operator {len(report.awaiting_operator)}, lost {len(report.lost)},"
        f" double-booked {len(report.double_booked)}, pending {len(report.pending)},"
        f" 5xx from a live replica {report.live_5xx}; retries {report.retries},"
        f" THREAD_BUSY answers {report.busy_answers},"
        f" longest wait for a busy thread {report.longest_busy_wait:.2f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=150)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--latency", type=float, default=0.6)
    parser.add_argument("--lease", type=float, default=2.0)
    args = parser.parse_args()
    calm, calm_steps = _once(args, kills=False)
    _print("without kills", calm, calm_steps)
    faults, fault_steps = _once(args, kills=True)
    _print("with kills   ", faults, fault_steps)
    if calm.per_second:
        print(f"throughput under kills / without: {faults.per_second / calm.per_second:.2f}")


if __name__ == "__main__":
    main()
