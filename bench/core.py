"""Core benchmark: continuation lifecycles on one SQLite file against the raw driver.

Prints, measured in this one run on one file (WAL, synchronous=FULL):
  * the raw ``sqlite3`` commit rate of the same one-row transaction (BEGIN IMMEDIATE,
    INSERT of a 500-byte row under a UUIDv7 key like ours, COMMIT) — a lifecycle needs two such commits, so the baseline is raw/2;
  * raw ``sqlite3`` running exactly a lifecycle's statements on our schema (stream head
    CAS, event insert, the read between), the ceiling for one lifecycle at a time;
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
from pausemesh.core.ids import uuid7
from pausemesh.core.resume import Resume, TokenHolder
from pausemesh.stores.sqlite import SQLITE_MIGRATIONS, open_sqlite_store

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
    body = '{"payload":"' + "x" * 500 + '"}'
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t VALUES (?, 1, ?)", (uuid7(), body))
        conn.execute("COMMIT")
        count += 1
    elapsed = time.perf_counter() - start
    conn.close()
    return count / elapsed


def raw_lifecycle_rate(path: Path, seconds: float) -> float:
    """Raw sqlite3 running exactly our lifecycle's statements on our schema, no PauseMesh."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    for statement in SQLITE_MIGRATIONS[0].statements:
        conn.execute(statement)
    body = '{"payload":"' + "x" * 500 + '"}'
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        cid = uuid7()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO continuation_streams VALUES (?, 1, 0) ON CONFLICT DO NOTHING", (cid,)
        )
        conn.execute("INSERT INTO continuation_events VALUES (?, 1, ?)", (cid, body))
        conn.execute("COMMIT")
        conn.execute("SELECT event_json FROM continuation_events WHERE continuation_id = ?", (cid,))
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "UPDATE continuation_streams SET version = 2, pending_expires_at_us = NULL"
            " WHERE continuation_id = ? AND version = 1",
            (cid,),
        )
        conn.execute("INSERT INTO continuation_events VALUES (?, 2, ?)", (cid, body))
        conn.execute("COMMIT")
        count += 1
    elapsed = time.perf_counter() - start
    conn.close()
    return count / elapsed


async def lifecycle(service: ContinuationService, n: int) -> None:
    created = await service.create(payload=PAYLOAD)
    await service.resume(
        Resume(
            continuation_id=created.continuation.continuation_id,
            idempotency_key=f"k{n}",
            payload={"flight": "PM101"},
            by=TokenHolder(created.resume_token),
        )
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
    shapes: list[float] = []
    seqs: list[float] = []
    pars: list[float] = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        base = Path(tmp)
        print(f"{args.rounds} interleaved rounds of {args.seconds}s each on {base} (uvloop)")
        # Interleaving keeps disk and machine noise from favouring one measure.
        for n in range(args.rounds):
            raws.append(raw_commit_rate(base / f"raw{n}.db", args.seconds))
            shapes.append(raw_lifecycle_rate(base / f"shape{n}.db", args.seconds))
            seqs.append(uvloop.run(lifecycle_rate(base / f"seq{n}.db", args.seconds, 1)))
            pars.append(uvloop.run(lifecycle_rate(base / f"par{n}.db", args.seconds, 64)))
            print(
                f"  round {n + 1}: raw {raws[-1]:,.0f}/s, raw lifecycles {shapes[-1]:,.0f}/s,"
                f" sequential {seqs[-1]:,.0f}/s,"
                f" 64 in flight {pars[-1]:,.0f}/s",
                flush=True,
            )
    raw, shape, seq, par = (statistics.median(v) for v in (raws, shapes, seqs, pars))
    baseline = raw / 2
    rows = [
        ("raw sqlite3 commits/s (1-row txn)", raw, None, None, None),
        ("baseline: raw / 2 (two commits per lifecycle)", baseline, None, None, None),
        ("raw sqlite3, our lifecycle's statements", shape, shape / baseline, None, None),
        ("sequential create+resume lifecycles/s", seq, seq / baseline, 0.6, seq / shape),
        ("64 in flight create+resume lifecycles/s", par, par / baseline, 2.0, par / shape),
    ]
    print()
    print(
        f"{'measure (medians)':<46} {'rate':>8} {'vs raw/2':>9} {'goal':>6} {'vs raw lifecycle':>17}"
    )
    for name, rate, ratio, goal, vs_shape in rows:
        ratio_text = f"{ratio:.2f}" if ratio is not None else ""
        goal_text = f">={goal}" if goal is not None else ""
        shape_text = f"{vs_shape:.2f}" if vs_shape is not None else ""
        print(f"{name:<46} {rate:>8,.0f} {ratio_text:>9} {goal_text:>6} {shape_text:>17}")


if __name__ == "__main__":
    main()
