"""Tests needing a build wait for ``make test``'s builds, then skip locally or fail in CI."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import builds
from tests.support.builds import check_builds, needs_build, wait_for_builds


class _Item:
    def __init__(self, *names: str) -> None:
        self.marks = [needs_build(name).mark for name in names]

    def iter_markers(self, name: str | None = None) -> Iterator[pytest.Mark]:
        return iter([mark for mark in self.marks if name is None or mark.name == name])


@pytest.fixture(name="missing_build")
def missing_build_fixture(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The CopilotKit build points at files that are not there."""
    what, _ = builds.BUILDS["copilotkit"]
    monkeypatch.setitem(builds.BUILDS, "copilotkit", (what, (tmp_path / "absent.js",)))
    monkeypatch.setattr("tests.support.builds.shutil.which", lambda _name: "/usr/bin/node")


def test_no_builds_under_way_returns_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PAUSEMESH_TEST_BUILDS", raising=False)
    wait_for_builds()


def test_a_test_waits_until_make_writes_the_status_then_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    status = tmp_path / "status"
    monkeypatch.setenv("PAUSEMESH_TEST_BUILDS", str(status))
    waited = threading.Event()

    def wait() -> None:
        wait_for_builds()
        waited.set()

    waiter = threading.Thread(target=wait)
    waiter.start()
    assert not waited.wait(0.6)  # still waiting: the builds have not ended
    status.write_text("0\n")
    waiter.join(timeout=30)
    assert waited.is_set()


def test_failed_builds_fail_the_tests_that_need_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    status = tmp_path / "status"
    status.write_text("2\n")
    monkeypatch.setenv("PAUSEMESH_TEST_BUILDS", str(status))
    with pytest.raises(pytest.fail.Exception, match="builds failed"):
        check_builds(_Item("ag-ui-client"))
    check_builds(_Item())  # a test needing nothing is not held back


@pytest.mark.usefixtures("missing_build")
def test_a_missing_build_skips_outside_ci_and_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PAUSEMESH_TEST_BUILDS", raising=False)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("PAUSEMESH_REQUIRE_POSTGRES", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"absent\.js"):
        check_builds(_Item("copilotkit"))
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"absent\.js"):
        check_builds(_Item("copilotkit"))


def test_an_unknown_build_name_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown build"):
        needs_build("nothing-by-that-name")
