"""A PostgreSQL server of one test's own, for tests that stop and start the server.

Stopping the machine's shared server would cut every other test's connections, so such a test
had to run alone, after the rest. A throwaway server (``initdb`` into a temporary directory,
its own port and socket directory) can be stopped and started while the suite goes on beside
it: about 2 s to create and start. As root, the server runs as the ``postgres`` user (it
refuses to run as root). Where the PostgreSQL server binaries are missing the test skips with
the reason, or fails under ``PAUSEMESH_REQUIRE_POSTGRES=1`` (CI).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

import pytest

__all__ = ("PrivatePostgres",)

# Only a stuck server gets near it (never a timing assertion).
_STUCK = 60.0


def _bin_dir() -> Path | None:
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    # Debian keeps the server binaries out of PATH, one folder per major version.
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(candidates[-1]).parent if candidates else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class PrivatePostgres:
    """``with PrivatePostgres() as server:`` a running server at ``server.url`` (database
    ``postgres``, user ``postgres``, trust auth) until the block ends; ``stop`` and ``start``
    restart it in between."""

    def __init__(self) -> None:
        bin_dir = _bin_dir()
        if bin_dir is None:
            reason = "needs the PostgreSQL server binaries (initdb, pg_ctl) for a private server"
            if os.environ.get("PAUSEMESH_REQUIRE_POSTGRES") == "1":
                pytest.fail(reason + " and PAUSEMESH_REQUIRE_POSTGRES=1")
            pytest.skip(reason)
        self._bin = bin_dir
        self._directory = Path(tempfile.mkdtemp(prefix="pausemesh-pg-"))
        self._data = self._directory / "data"
        self.port = _free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        # PostgreSQL refuses to run as root: as root, its own user runs it.
        self._as: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self._directory, user="postgres")
            self._as = ["runuser", "-u", "postgres", "--"]

    def _run(self, *args: str) -> None:
        completed = subprocess.run(
            [*self._as, *args], capture_output=True, text=True, timeout=_STUCK, check=False
        )
        if completed.returncode != 0:
            log = self._directory / "log"
            tail = log.read_text()[-3000:] if log.exists() else ""
            msg = f"{args[0]} failed ({completed.returncode}): {completed.stderr}{tail}"
            raise RuntimeError(msg)

    def start(self) -> None:
        # fsync off: what the test checks is the apps riding out a restart, not durability.
        options = f"-p {self.port} -k {self._directory} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            str(self._bin / "pg_ctl"),
            *("-D", str(self._data), "-l", str(self._directory / "log")),
            *("-o", options, "-w", "start"),
        )

    def stop(self) -> None:
        self._run(str(self._bin / "pg_ctl"), "-D", str(self._data), "-m", "fast", "-w", "stop")

    def __enter__(self) -> PrivatePostgres:
        try:
            self._run(
                str(self._bin / "initdb"),
                *("-D", str(self._data), "-A", "trust", "-U", "postgres", "--no-sync"),
            )
            self.start()
        except BaseException:
            shutil.rmtree(self._directory, ignore_errors=True)
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            if (self._data / "postmaster.pid").exists():
                self.stop()
        finally:
            shutil.rmtree(self._directory, ignore_errors=True)
