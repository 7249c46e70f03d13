"""The suite's schedule (``tests/support/test_order.py``): the longest files are handed out first."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.support.test_order import LONGEST_FILES, longest_first

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class _Collected:
    """A collected test as the schedule sees it: its file and whether it is marked slow."""

    path: Path
    name: str
    slow: bool = False

    def get_closest_marker(self, name: str) -> object | None:
        return object() if name == "slow" and self.slow else None


def test_every_file_the_schedule_puts_first_exists() -> None:
    missing = [name for name in LONGEST_FILES if not (REPO / name).is_file()]
    assert missing == [], f"tests/support/test_order.py names files that are gone: {missing}"


def test_listed_files_come_first_in_their_order_then_slow_files_and_each_file_stays_whole() -> None:
    def item(relative: str, name: str, *, slow: bool = False) -> _Collected:
        return _Collected(REPO / relative, name, slow)

    items = [
        item("tests/unit/test_quick.py", "a"),
        item("tests/e2e/test_starts_a_server.py", "b", slow=True),
        item(LONGEST_FILES[2], "c", slow=True),
        item("tests/unit/test_quick.py", "d"),
        item(LONGEST_FILES[0], "e", slow=True),
        item(LONGEST_FILES[2], "f", slow=True),
    ]
    longest_first(items, REPO.as_posix())
    assert [i.name for i in items] == ["e", "c", "f", "b", "a", "d"]
