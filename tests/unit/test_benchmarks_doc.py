"""``docs/benchmarks.md`` holds the current figures, not a diary, and names benches that exist."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "benchmarks.md"


def test_the_benchmarks_page_stays_a_page_of_current_figures() -> None:
    lines = PAGE.read_text().count("\n")
    assert lines < 400, (
        f"docs/benchmarks.md has {lines} lines: replace old figures, keep git the diary"
    )


def test_every_bench_the_page_names_is_in_the_repository() -> None:
    named = set(re.findall(r"bench/[a-z_]+\.(?:py|c)", PAGE.read_text()))
    assert named, "the page names the benches it ran"
    missing = sorted(name for name in named if not (REPO / name).is_file())
    assert missing == []
