"""The order the suite's files are handed to the parallel workers: the longest first.

``pytest-xdist --dist loadfile`` gives each worker whole files in collection order. Alphabetical
order puts the process-heavy files (``reliability/``, a fuzz run of a minute) late, so one
worker is still running a long file after the others have run dry. Handing out the longest
first (a greedy longest-processing-time schedule) keeps the tail short. The list holds the files
that took longest in a measured run (``--durations``); its order only schedules, so a stale
entry costs time, never a result.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final, Protocol, TypeVar

__all__ = ("LONGEST_FILES", "Scheduled", "longest_first", "rank")

LONGEST_FILES: Final = (
    "tests/http/test_protocol_fuzz.py",
    "tests/reliability/test_postgres_mcp_tasks.py",
    "tests/gateway/test_gateway_recovery.py",
    "tests/reliability/test_postgres_agents.py",
    "tests/http/test_openapi_fuzz.py",
    "tests/e2e/test_demo_bundle.py",
    "tests/reliability/test_run_recovery.py",
    "tests/gateway/test_gateway_ops.py",
    "tests/gateway/test_gateway_bad_replies.py",
    "tests/reliability/test_workers_shutdown.py",
    "tests/reliability/test_faults.py",
    "tests/e2e/test_browser_conversations.py",
    "tests/gateway/test_gateway_two_processes.py",
    "tests/protocols/test_mcp_conformance.py",
    "tests/e2e/test_copilotkit.py",
    "tests/e2e/test_bench_ab.py",
    "tests/e2e/test_framework_agents.py",
    "tests/http/test_cli.py",
    "tests/e2e/test_bench_floor.py",
    "tests/reliability/test_workers.py",
)


class Scheduled(Protocol):
    """What the order looks at of a collected test (a ``pytest.Item``)."""

    @property
    def path(self) -> Path: ...

    def get_closest_marker(self, name: str) -> Any: ...


ItemT = TypeVar("ItemT", bound=Scheduled)


def rank(item: Scheduled, root: str) -> tuple[int, int]:
    """Where ``item``'s file goes: the listed files in their order, then the other files that
    start processes (marked ``slow``), then the rest (in-process, quick)."""
    path = item.path.as_posix().removeprefix(root + "/")
    if path in LONGEST_FILES:
        return (0, LONGEST_FILES.index(path))
    return (1, 0) if item.get_closest_marker("slow") else (2, 0)


def longest_first(items: list[ItemT], root: str) -> None:
    """Sorts ``items`` in place by file rank; stable, so a file's own tests keep their order
    (and every worker, collecting alike, computes the same order)."""
    first_rank: dict[str, tuple[int, int]] = {}
    for item in items:
        first_rank.setdefault(item.path.as_posix(), rank(item, root))
    items.sort(key=lambda item: first_rank[item.path.as_posix()])
