"""``bench/ab.py``: the base side really runs the commit it names, and a short run reports both
sides measured against real servers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from bench.ab import REPO_ROOT, Side, exported
from bench.native_client import compiler

pytestmark = pytest.mark.slow


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    return done.stdout


def test_the_base_side_imports_pausemesh_from_the_exported_commit_not_the_working_tree() -> None:
    commit = _git("rev-list", "-n", "1", "HEAD", "--", "backend/pausemesh/core/ids.py").strip()
    with exported(commit) as root:
        committed = _git("show", f"{commit}:backend/pausemesh/core/ids.py")
        assert (root / "backend/pausemesh/core/ids.py").read_text() == committed
        base = Side("base", root)
        imported = subprocess.run(
            [sys.executable, "-c", "import pausemesh; print(pausemesh.__file__)"],
            cwd=root,
            env={**os.environ, **base.env()},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert Path(imported) == root / "backend/pausemesh/__init__.py"
    assert Side("after", REPO_ROOT).env() == {}


def _short_run(*extra: str) -> subprocess.CompletedProcess[str]:
    """One pair of half-second slices, one worker per server, on this tree against HEAD."""
    return subprocess.run(
        [
            *(sys.executable, "bench/ab.py", "--base", "HEAD", "--workers", "1"),
            *("--pairs", "1", "--seconds", "0.5", *extra),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=110,
    )


@pytest.mark.skipif(compiler() is None, reason="no C compiler on this machine")
def test_a_short_http_run_measures_both_servers_and_prints_the_medians() -> None:
    done = _short_run()
    assert done.returncode == 0, done.stderr
    pair = next(line for line in done.stdout.splitlines() if "pair  1:" in line)
    rates = dict(re.findall(r"(base|after)\s+([\d,]+)/s", pair))
    assert set(rates) == {"base", "after"}
    assert all(int(rate.replace(",", "")) > 0 for rate in rates.values())
    assert "lifecycles/s, median: base" in done.stdout
    assert "after cost less CPU in" in done.stdout


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--pairs", "0"], "--pairs and --workers must be at least 1"),
        (["--after-env", "PAUSEMESH_SQLITE_SYNC"], "--after-env takes NAME=VALUE"),
        (["--after-env", "A=1", "--mode", "in-process"], "--after-env is for --mode http"),
        (["--env", "=1"], "--env takes NAME=VALUE"),
        (["--env", "A=1", "--mode", "in-process"], "--env is for --mode http"),
    ],
)
def test_bad_arguments_are_refused_before_anything_starts(
    arguments: list[str], message: str
) -> None:
    done = subprocess.run(
        [sys.executable, "bench/ab.py", "--base", "HEAD", *arguments],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert message in done.stderr


@pytest.mark.skipif(compiler() is None, reason="no C compiler on this machine")
def test_an_after_env_setting_reaches_the_after_server() -> None:
    """A value the settings refuse stops the after server (the base one started first)."""
    done = _short_run("--after-env", "PAUSEMESH_SQLITE_SYNC=sometimes")
    assert done.returncode != 0
    assert "PAUSEMESH_SQLITE_SYNC must be one of" in done.stdout + done.stderr
    assert Side("after", REPO_ROOT, extra_env={"A": "1"}).env() == {"A": "1"}


@pytest.mark.skipif(compiler() is None, reason="no C compiler on this machine")
def test_an_env_setting_reaches_the_base_server_and_after_env_wins_on_the_after_side() -> None:
    """Only the base side keeps the value the settings refuse: its server fails to start."""
    done = _short_run(
        *("--env", "PAUSEMESH_SQLITE_SYNC=sometimes"),
        *("--after-env", "PAUSEMESH_SQLITE_SYNC=ack"),
    )
    assert done.returncode != 0
    assert "PAUSEMESH_SQLITE_SYNC must be one of" in done.stdout + done.stderr
