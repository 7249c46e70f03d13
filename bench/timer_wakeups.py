"""What an idle process pays for waking up on a timer, on this machine.

The SQLite change watcher used to look every 20 ms while any tail waited. This measures, in
one process on uvloop (as ``pausemesh serve`` runs), the CPU of a loop that does nothing but
wake on a timer at the given rates, with and without the watcher's ``PRAGMA data_version``
read, against the same loop with no timer at all; and the same loop woken by the kernel's word
that a SQLite file's log was written (``wal_watch``) while nothing is written.

Usage: .venv/bin/python bench/timer_wakeups.py [--seconds 10] [--rates 50,10]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import uvloop

from pausemesh.stores.sqlite.wal_watch import watch_wal

Arm = Callable[[asyncio.AbstractEventLoop], Callable[[], None]]


async def _cpu_of(seconds: float, arm: Arm) -> float:
    """Percent of a core the loop used over ``seconds`` with ``arm``'s wake-ups."""
    disarm = arm(asyncio.get_running_loop())
    started = time.process_time()
    await asyncio.sleep(seconds)
    used = time.process_time() - started
    disarm()
    return used / seconds * 100


def _nothing(_loop: asyncio.AbstractEventLoop) -> Callable[[], None]:
    return lambda: None


def _timer(rate: float, work: Callable[[], object]) -> Arm:
    def arm(loop: asyncio.AbstractEventLoop) -> Callable[[], None]:
        def tick() -> None:
            work()
            handles[0] = loop.call_later(1 / rate, tick)

        handles = [loop.call_later(1 / rate, tick)]
        return lambda: handles[0].cancel()  # noqa: PLW0108 - the handle changes each tick

    return arm


def _wal_watch(path: str, work: Callable[[], object]) -> Arm | None:
    watch = watch_wal(path)
    if watch is None:
        return None

    def arm(loop: asyncio.AbstractEventLoop) -> Callable[[], None]:
        loop.add_reader(watch.fd, lambda: watch.drain() and work())

        def disarm() -> None:
            loop.remove_reader(watch.fd)
            watch.close()

        return disarm

    return arm


async def _run(seconds: float, rates: list[float]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = str(Path(directory) / "idle.db")
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE t (x INTEGER)")  # the log exists while conn is open

        def look() -> object:
            return conn.execute("PRAGMA data_version").fetchall()

        settings: list[tuple[str, Arm | None]] = [("no timer", _nothing)]
        for rate in rates:
            settings.append((f"{rate:g} Hz timer, empty", _timer(rate, lambda: None)))
            settings.append((f"{rate:g} Hz timer, PRAGMA data_version", _timer(rate, look)))
        settings.append(("WAL watch, nothing written", _wal_watch(path, look)))
        print(f"bench/timer_wakeups.py: {seconds:g} s per setting, one process on uvloop")
        for label, arm in settings:
            if arm is None:
                print(f"  {label:<40} n/a (no inotify here)")
                continue
            print(f"  {label:<40} {await _cpu_of(seconds, arm):6.2f} % of a core")
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rates", default="50,10", help="timer rates in Hz, comma-separated")
    args = parser.parse_args()
    uvloop.run(_run(args.seconds, [float(rate) for rate in args.rates.split(",")]))


if __name__ == "__main__":
    main()
