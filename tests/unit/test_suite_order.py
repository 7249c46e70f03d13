"""The suite's schedule (``tests/support/test_order.py``): the longest files are collected first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.test_order import LONGEST_FILES

REPO = Path(__file__).resolve().parents[2]


def test_every_file_the_schedule_puts_first_exists() -> None:
    missing = [name for name in LONGEST_FILES if not (REPO / name).is_file()]
    assert missing == [], f"tests/support/test_order.py names files that are gone: {missing}"


def test_listed_files_are_collected_first_in_their_order_and_stay_whole() -> None:
    # Given on the command line last-first, behind a quick file: collection reorders them.
    asked = ["tests/unit/test_suite_order.py", LONGEST_FILES[2], LONGEST_FILES[0]]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *asked],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    runs: list[str] = []
    for line in result.stdout.splitlines():
        name = line.split("::", 1)[0]
        if "::" in line and (not runs or runs[-1] != name):
            runs.append(name)
    assert runs == [LONGEST_FILES[0], LONGEST_FILES[2], "tests/unit/test_suite_order.py"]
