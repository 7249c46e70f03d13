"""The SQLite files of a real ``pausemesh serve``: private to their owner, and an erased
conversation leaves no readable byte in them.

A server creates its data directory and database: the database, its ``-wal`` and ``-shm``
files and the lock files are 0600 (under the usual umask 022). A database left 0644 by an
earlier version is made private when a server opens it, and the log says so once. After
``DELETE /agui/threads/{id}`` and after a retention purge batch, no byte of the erased text is
in any file of the data directory (``secure_delete`` zeroes the rows, a truncating checkpoint
empties the write-ahead log).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import msgspec
import pytest

from pausemesh.stores.sqlite import SqliteDatabase, SqliteThreadStore
from tests.support.agui import post_run, run_body
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

TIGHTENED = "made database files readable by their owner only"


@contextmanager
def usual_umask() -> Iterator[None]:
    """The umask most systems give a service (022): group and others could read a file."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def modes(directory: Path) -> dict[str, int]:
    return {p.name: stat.S_IMODE(p.stat().st_mode) for p in directory.iterdir() if p.is_file()}


def serve(data: Path, **env: str) -> ServerProcess:
    args = ["serve", "--database-path", str(data / "pm.db")]
    agent = ["--agent", "tests.support.identity:whoami"]
    return ServerProcess([*args, *agent], env={"PAUSEMESH_DATA_DIR": str(data), **env})


def test_a_server_creates_its_database_and_lock_files_readable_by_their_owner_only(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"  # the server creates it
    with usual_umask(), serve(data) as server:
        created = httpx.post(server.url("/v1/continuations"), json={"payload": 1}, timeout=30)
        assert created.status_code == 201, created.text
        files = modes(data)
        assert TIGHTENED not in server.output()
    assert {"pm.db", "pm.db-wal", "pm.db-shm"} <= files.keys(), files
    assert any(name.endswith(".lock") for name in files), files
    assert files == dict.fromkeys(files, 0o600)


def test_a_database_readable_by_others_is_made_private_when_a_server_opens_it(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    # As an earlier version left it: a WAL database, 0644, with its -wal and -shm.
    keeper = sqlite3.connect(data / "pm.db")
    keeper.execute("PRAGMA journal_mode = WAL")
    keeper.execute("CREATE TABLE earlier (x)")
    keeper.execute("INSERT INTO earlier VALUES (1)")
    keeper.commit()  # kept open: the -wal and -shm files stay
    for name in ("pm.db", "pm.db-wal", "pm.db-shm"):
        (data / name).chmod(0o644)
    with closing(keeper), usual_umask(), serve(data) as server:
        files = modes(data)
        assert {name: files[name] for name in ("pm.db", "pm.db-wal", "pm.db-shm")} == {
            "pm.db": 0o600,
            "pm.db-wal": 0o600,
            "pm.db-shm": 0o600,
        }
        server.restart()  # finds them private: says nothing more
        assert server.output().count(TIGHTENED) == 1, server.output()[-3000:]


def _files_holding(data: Path, text: str) -> list[str]:
    """The files of the data directory holding ``text``'s bytes (or their distinctive half)."""
    needles = (text.encode(), text[-16:].encode())
    return [
        p.name for p in data.iterdir() if p.is_file() and any(n in p.read_bytes() for n in needles)
    ]


def _message(secret: str) -> dict[str, str]:
    # Long enough to spill into overflow pages, which a delete frees whole.
    return {"id": f"m-{uuid.uuid4()}", "role": "user", "content": f"{secret} " * 600}


async def _seed_old_thread(path: Path, thread_id: str, secret: str) -> None:
    """A thread last written 40 days ago, as the retention purge finds it."""
    old = datetime.now(UTC) - timedelta(days=40)
    store = SqliteThreadStore(await SqliteDatabase(path).open(), owns_database=True)
    try:
        record = await store.create_or_load(thread_id, owner=None, now=old)
        for turn in range(3):  # each save rewrites the record: old copies to leave nowhere
            messages = [*record.messages, _message(f"{secret}-{turn}")]
            record = await store.save(msgspec.structs.replace(record, messages=messages), now=old)
    finally:
        await store.close()


def test_an_erased_thread_leaves_no_byte_of_its_text_in_any_sqlite_file(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    deleted, purged = f"delete-me-{uuid.uuid4().hex}", f"purge-me-{uuid.uuid4().hex}"
    asyncio.run(_seed_old_thread(data / "pm.db", "t-old", purged))
    assert _files_holding(data, purged)  # the check can see it
    env = {"PAUSEMESH_RETENTION_DAYS": "30", "PAUSEMESH_RETENTION_INTERVAL_SECONDS": "1"}
    with serve(data, **env) as server, httpx.Client(base_url=server.base_url, timeout=30) as http:
        # A conversation that pauses and is answered with the distinctive text: the thread's
        # record (rewritten at each run), its event log and the continuation log hold it.
        asked = post_run(http, run_body("t-1", "r-1", messages=[_message(deleted)]))
        interrupt = asked.interrupts[0]["id"]
        resume = [{"interruptId": interrupt, "status": "resolved", "payload": {"flight": deleted}}]
        post_run(http, run_body("t-1", "r-2", messages=[_message(deleted)], resume=resume))
        assert _files_holding(data, deleted)
        erased = http.delete("/agui/threads/t-1")
        assert erased.status_code == 204, erased.text
        assert http.get("/agui/threads/t-1").status_code == 404
        assert _files_holding(data, deleted) == []
        # The retention purge erases the old thread in a batch of its own.
        server.wait_for_output("retention purged 1 threads")
        assert _files_holding(data, purged) == []
