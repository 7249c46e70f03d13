"""Retention on a real SQLite file: ``pausemesh purge`` (dry run, then for real, with progress)
and ``PAUSEMESH_RETENTION_DAYS`` in a running server."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec
import pytest

from pausemesh.stores.sqlite import SqliteDatabase, SqliteThreadStore
from tests.support.server import REPO_ROOT, ServerProcess

pytestmark = pytest.mark.slow

OLD = datetime.now(UTC) - timedelta(days=40)


async def _seed(path: Path, threads: dict[str, datetime]) -> None:
    store = SqliteThreadStore(await SqliteDatabase(path).open(), owns_database=True)
    try:
        for thread_id, at in threads.items():
            record = await store.create_or_load(thread_id, owner=None, now=at)
            messages = [{"id": "m1", "role": "user", "content": "hi"}]
            await store.save(msgspec.structs.replace(record, messages=messages), now=at)
    finally:
        await store.close()


def _ids(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {r[0] for r in conn.execute("SELECT thread_id FROM agui_threads")}


def _purge(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pausemesh", "purge", "--database-path", str(path), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
        check=False,
    )


def test_purge_dry_run_lists_then_purge_erases_only_idle_threads(tmp_path: Path) -> None:
    path = tmp_path / "p.db"
    asyncio.run(_seed(path, {"old-a": OLD, "old-b": OLD, "fresh": datetime.now(UTC)}))

    dry = _purge(path, "--older-than", "30", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    assert sorted(lines[:-1]) == ["old-a", "old-b"]
    assert lines[-1].startswith("would erase 2 threads idle since before ")
    assert _ids(path) == {"old-a", "old-b", "fresh"}

    done = _purge(path, "--older-than", "30")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("erased 2 threads")
    assert "erased 2 threads..." in done.stderr  # progress
    assert _ids(path) == {"fresh"}
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM agui_thread_events").fetchone()[0] == 0
        erased = {r[0] for r in conn.execute("SELECT thread_id FROM agui_thread_erasures")}
    assert erased == {"old-a", "old-b"}


@pytest.mark.parametrize("days", ["0", "-3", "two"])
def test_purge_refuses_a_bad_day_count(tmp_path: Path, days: str) -> None:
    result = _purge(tmp_path / "p.db", "--older-than", days)
    assert result.returncode == 2
    assert "DAYS must be a whole number of days" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_server_with_retention_days_erases_idle_threads_in_the_background(
    tmp_path: Path,
) -> None:
    path = tmp_path / "r.db"
    asyncio.run(_seed(path, {"idle": OLD, "active": datetime.now(UTC)}))
    env = {"PAUSEMESH_RETENTION_DAYS": "30", "PAUSEMESH_RETENTION_INTERVAL_SECONDS": "1"}
    with ServerProcess(["serve", "--database-path", str(path)], env=env):
        # Bounded wait for the background purge; no timing is asserted.
        for _ in range(300):
            if "idle" not in _ids(path):
                break
            time.sleep(0.1)
        assert _ids(path) == {"active"}
