"""``pausemesh purge --older-than DAYS [--dry-run]``: erase conversations idle that long.

Offline against the store of the other commands' store flags; the progress goes to stderr,
the ids (with ``--dry-run``) and the summary to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import timedelta

from pausemesh.cli.options import add_store_arguments, settings_from

__all__ = ("add_purge_arguments", "run_purge")


def add_purge_arguments(parser: argparse.ArgumentParser) -> None:
    add_store_arguments(parser)
    parser.add_argument(
        "--older-than",
        required=True,
        type=_days,
        metavar="DAYS",
        help="erase threads idle for longer than DAYS days",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="list what would be erased; change nothing"
    )


def _days(text: str) -> int:
    try:
        days = int(text)
    except ValueError:
        days = 0
    if days < 1:
        msg = f"DAYS must be a whole number of days, at least 1 (got {text!r})"
        raise argparse.ArgumentTypeError(msg)
    return days


def run_purge(args: argparse.Namespace) -> None:
    from pausemesh.bootstrap import purge_threads  # noqa: PLC0415 - the stores load only when opened

    settings = settings_from(args)

    def progress(count: int) -> None:
        print(f"erased {count} threads...", file=sys.stderr, flush=True)

    report = asyncio.run(
        purge_threads(
            settings,
            older_than=timedelta(days=args.older_than),
            dry_run=args.dry_run,
            progress=progress,
        )
    )
    verb = "would erase" if report.dry_run else "erased"
    for thread_id in report.thread_ids if report.dry_run else ():
        print(thread_id)
    cutoff = report.cutoff.isoformat()
    print(f"{verb} {len(report.thread_ids)} threads idle since before {cutoff}")
