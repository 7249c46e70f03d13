"""Core benchmark: continuation lifecycles on one SQLite file against the raw driver.

Prints, measured in this one run on one file (WAL, synchronous=FULL):
  * the raw ``sqlite3`` commit rate of the same one-row transaction (BEGIN IMMEDIATE,
    INSERT, COMMIT) — a lifecycle needs two such commits, so the baseline is raw/2;
  * sequential create+resume lifecycles/s;
  * lifecycles/s with 64 in flight (group commit shares one COMMIT between appends).

Usage: .venv/bin/python bench/core.py [--seconds 1.5] [--rounds 3] [--dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import uvloop

from pausemesh.core import ContinuationService
from pausemesh.stores import open_sqlite_store

PAYLOAD = {
    "kind": "input",
    "message": "Which flight should I book?",
    "responseSchema": {
        "type": "object",
        "properties": {"flight": {"type": "string", "enum": ["PM101", "PM202"]}},
        "required": ["flight"],
    },
}


def raw_commit_rate(path: Path, seconds: float) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE t (id TEXT PRIMARY KEY, version INTEGER, body TEXT) STRICT")
    body = '{"payload":"' + "x" * 300 + '"}'
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t VALUES (?, 1, ?)", (f"row-{count}", body))
        conn.execute("COMMIT")
        count += 1
    elapsed = time.perf_counter() - start
    conn.close()
    return count / elapsed


async def lifecycle(service: ContinuationService, n: int) -> None:
    created = await service.create(payload=PAYLOAD)
    await service.resume(
        continuation_id=created.continuation.continuation_id,
        resume_token=created.resume_token,
        idempotency_key=f"k{n}",
        payload={"flight": "PM101"},
    )


async def lifecycle_rate(path: Path, seconds: float, in_flight: int) -> float:
    store = await open_sqlite_store(path)
    service = ContinuationService(store=store)
    done = 0
    deadline = time.perf_counter() + seconds

    async def worker(w: int) -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await lifecycle(service, w * 1_000_000 + done)
            done += 1

    for i in range(20):  # warm up statement caches
        await lifecycle(service, -i - 1)
    start = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(in_flight)))
    elapsed = time.perf_counter() - start
    await store.close()
    return done / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.5, help="length of one measurement")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (medians)")
    parser.add_argument("--dir", type=Path, default=None, help="where the SQLite files go")
    args = parser.parse_args()
    raws: list[float] = []
    seqs: list[float] = []
    pars: list[float] = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        base = Path(tmp)
        print(f"{args.rounds} interleaved rounds of {args.seconds}s each on {base} (uvloop)")
        # Interleaving keeps disk and machine noise from favouring one measure.
        for n in range(args.rounds):
            raws.append(raw_commit_rate(base / f"raw{n}.db", args.seconds))
            seqs.append(uvloop.run(lifecycle_rate(base / f"seq{n}.db", args.seconds, 1)))
            pars.append(uvloop.run(lifecycle_rate(base / f"par{n}.db", args.seconds, 64)))
            print(
                f"  round {n + 1}: raw {raws[-1]:,.0f}/s, sequential {seqs[-1]:,.0f}/s,"
                f" 64 in flight {pars[-1]:,.0f}/s",
                flush=True,
            )
    raw, seq, par = (statistics.median(v) for v in (raws, seqs, pars))
    baseline = raw / 2
    rows = [
        ("raw sqlite3 commits/s (1-row txn)", raw, None, None),
        ("baseline: raw / 2 (two commits per lifecycle)", baseline, None, None),
        ("sequential create+resume lifecycles/s", seq, seq / baseline, 0.6),
        ("64 in flight create+resume lifecycles/s", par, par / baseline, 2.0),
    ]
    print()
    print(f"{'measure (medians)':<48} {'rate':>10} {'ratio':>7} {'goal':>6}")
    for name, rate, ratio, goal in rows:
        ratio_text = f"{ratio:.2f}" if ratio is not None else ""
        goal_text = f">={goal}" if goal is not None else ""
        print(f"{name:<48} {rate:>10,.0f} {ratio_text:>7} {goal_text:>6}")


if __name__ == "__main__":
    main()
