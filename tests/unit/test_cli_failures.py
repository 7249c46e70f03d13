"""``pausemesh.cli.failures``: what the operating system refuses, said in the user's words."""

from __future__ import annotations

import errno
import socket
from pathlib import Path

import pytest

from pausemesh.cli.failures import bind_listener, failure_line
from pausemesh.cli.options import CliError
from pausemesh.core.errors import StoreError


def test_a_file_that_cannot_be_written_names_its_directory(tmp_path: Path) -> None:
    error = PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "p.db"))
    assert failure_line(error) == (
        f"cannot write {tmp_path / 'p.db'}: the directory {tmp_path} is not writable"
        " (choose another --database-path or PAUSEMESH_DATA_DIR, or fix its permissions)"
    )


def test_a_missing_directory_and_a_missing_file_are_told_apart(tmp_path: Path) -> None:
    missing_dir = FileNotFoundError(errno.ENOENT, "No such file", str(tmp_path / "no" / "x"))
    missing_file = FileNotFoundError(errno.ENOENT, "No such file", str(tmp_path / "x"))
    assert failure_line(missing_dir) == (
        f"cannot use {tmp_path / 'no' / 'x'}: the directory {tmp_path / 'no'} does not exist"
    )
    assert failure_line(missing_file) == f"{tmp_path / 'x'} does not exist"


def test_an_error_inside_a_task_group_of_one_is_said_as_itself() -> None:
    grouped = ExceptionGroup("task group", [StoreError("run it", code="MIGRATION_REQUIRED")])
    assert failure_line(grouped) == "run it (MIGRATION_REQUIRED)"


def test_an_unexpected_error_is_left_to_its_traceback() -> None:
    assert failure_line(KeyError("bug")) is None
    assert failure_line(OSError(errno.EIO, "I/O error")) is None


def test_a_port_in_use_says_try_port() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(CliError, match=rf"port {port} is in use \(try --port\)"):
            bind_listener("127.0.0.1", port)
