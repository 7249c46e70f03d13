"""A command that cannot start says why in one line, with the fix, and exits 2: no traceback
(``pausemesh.cli.failures``). Real processes against a real refusal each: an unmigrated
PostgreSQL schema, a database that does not exist, a refused connection, a directory that is
not writable, a database path under a file, a port another socket holds, an upstream that
fails at ``gateway pin``, a gateway config with errors."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from pausemesh.cli.main import main
from tests.support.postgres import DATABASE_URL, fresh_schema, require_postgres
from tests.support.server import REPO_ROOT

pytestmark = pytest.mark.slow

# A directory nobody may write, root included (sysfs): the read-only data directory.
READ_ONLY_DIR = Path("/sys")
SERVER_KEY = "startup-failure-tests-" + "k" * 32


def _writable(directory: Path) -> bool:
    try:
        with tempfile.TemporaryFile(dir=directory):
            return True
    except OSError:
        return False


def pausemesh(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PAUSEMESH_")}
    clean.update({"PAUSEMESH_SECRET_KEY": SERVER_KEY, **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "pausemesh", *args],
        cwd=cwd,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def assert_one_line(done: subprocess.CompletedProcess[str], *fix: str) -> str:
    """Exit 2, no traceback, and stderr one ``pausemesh:`` line naming ``fix``."""
    output = done.stdout + done.stderr
    assert "Traceback" not in output, output
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, output
    assert lines[0].startswith("pausemesh: "), output
    for words in fix:
        assert words in lines[0], output
    assert done.returncode == 2, output
    return lines[0]


@pytest.fixture(name="held_port")
def held_port_fixture() -> Iterator[int]:
    """A port another socket listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.fixture(name="refusing_url")
def refusing_url_fixture() -> Iterator[str]:
    """A PostgreSQL URL whose port refuses connections (bound here, never listening)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"postgresql://postgres:secret@127.0.0.1:{sock.getsockname()[1]}/test"


def _missing_database_url() -> str:
    parts = urllib.parse.urlsplit(DATABASE_URL)
    return urllib.parse.urlunsplit(parts._replace(path="/pausemesh_no_such_database"))


# -- the store -------------------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.parametrize("command", ["serve", "gateway"])
async def test_an_unmigrated_schema_says_run_migrate(tmp_path: Path, command: str) -> None:
    await require_postgres()
    if command == "serve":
        # With several workers the supervisor opens the store once before starting any.
        args = ["serve", "--env-file", os.devnull, "--workers", "2"]
    else:
        config = _gateway_config(tmp_path, REPO_ROOT / "tests" / "support" / "upstream_mcp.py")
        args = ["gateway", "retire", "--worker", "w-1", "--config", str(config)]
    done = pausemesh(
        tmp_path,
        *args,
        "--database-url",
        DATABASE_URL,
        "--database-schema",
        fresh_schema("pm_unmigrated"),
    )
    assert_one_line(done, "PauseMesh tables are missing; run `pausemesh migrate`")


@pytest.mark.postgres
@pytest.mark.parametrize(
    "command", [["serve", "--env-file", os.devnull], ["migrate"]], ids=["serve", "migrate"]
)
async def test_a_database_that_does_not_exist_says_create_it(
    tmp_path: Path, command: list[str]
) -> None:
    await require_postgres()
    done = pausemesh(tmp_path, *command, "--database-url", _missing_database_url())
    line = assert_one_line(
        done, "pausemesh_no_such_database", "create the database or check PAUSEMESH_DATABASE_URL"
    )
    assert "postgres@" not in line


def test_a_refused_connection_says_check_the_url_and_never_shows_the_password(
    tmp_path: Path, refusing_url: str
) -> None:
    done = pausemesh(tmp_path, "purge", "--older-than", "30", "--database-url", refusing_url)
    line = assert_one_line(done, "the server cannot be reached", "check PAUSEMESH_DATABASE_URL")
    assert "secret" not in line


@pytest.mark.skipif(_writable(READ_ONLY_DIR), reason="/sys is writable here")
@pytest.mark.parametrize(
    "command",
    [
        ["serve", "--agent", "pausemesh.demo.agent:travel_agent", "--env-file", os.devnull],
        ["demo", "--no-browser", "--env-file", os.devnull],
    ],
    ids=["serve-agent", "demo"],
)
def test_a_data_directory_that_is_not_writable_is_named(tmp_path: Path, command: list[str]) -> None:
    # No server key in the environment: serve creates its key file in the data directory.
    done = pausemesh(
        tmp_path,
        *command,
        "--database-path",
        str(READ_ONLY_DIR / "pausemesh.db"),
        env={"PAUSEMESH_SECRET_KEY": ""},
    )
    assert_one_line(done, f"the directory {READ_ONLY_DIR} is not writable")


def test_a_database_path_under_a_file_names_the_file(tmp_path: Path) -> None:
    blocker = tmp_path / "notes.txt"
    blocker.write_text("a file, not a directory\n")
    done = pausemesh(
        tmp_path, "serve", "--env-file", os.devnull, "--database-path", str(blocker / "p.db")
    )
    assert_one_line(done, f"{blocker} is a file, not a directory")


def test_debug_log_level_shows_the_traceback_with_the_line(tmp_path: Path) -> None:
    blocker = tmp_path / "notes.txt"
    blocker.write_text("")
    done = pausemesh(
        tmp_path,
        "purge",
        "--older-than",
        "30",
        "--database-path",
        str(blocker / "pausemesh.db"),
        env={"PAUSEMESH_LOG_LEVEL": "debug"},
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" in done.stderr
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .endswith(
            f"{blocker} is a file, not a directory (choose another --database-path or"
            " PAUSEMESH_DATA_DIR)"
        )
    )


# -- the port --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command", [["serve"], ["demo", "--no-browser", "--workers", "2"]], ids=["serve", "workers"]
)
def test_a_port_in_use_says_try_port(tmp_path: Path, held_port: int, command: list[str]) -> None:
    done = pausemesh(
        tmp_path,
        *command,
        "--env-file",
        os.devnull,
        "--port",
        str(held_port),
        "--database-path",
        str(tmp_path / "pausemesh.db"),
    )
    assert_one_line(done, f"port {held_port} is in use (try --port)")


# -- the gateway -----------------------------------------------------------------------------


def _gateway_config(root: Path, upstream: Path) -> Path:
    config = root / "gateway.toml"
    config.write_text(
        'domain = "billing.example"\n'
        "[[upstreams]]\n"
        'id = "invoices"\n'
        f"command = {str(Path(sys.executable))!r}\n"
        f"args = [{str(upstream)!r}]\n"
        "[[jobs]]\n"
        'name = "create_invoice"\n'
        'upstream = "invoices"\n'
        'tool = "create_invoice"\n'
        'business_key = "invoice:{order_id}"\n'
    )
    return config


def test_gateway_pin_quotes_the_stderr_of_an_upstream_that_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    upstream = tmp_path / "upstream.py"
    upstream.write_text(
        "import sys\n"
        "print('starting the invoicing server', file=sys.stderr)\n"
        "print('INVOICES_DB is not set', file=sys.stderr)\n"
        "sys.exit(3)\n"
    )
    config = _gateway_config(tmp_path, upstream)
    with pytest.raises(SystemExit) as exited:
        main(["gateway", "pin", "--config", str(config)])
    assert exited.value.code == 1
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("pausemesh: UPSTREAM_UNAVAILABLE: upstream 'invoices' is unavailable")
    assert line.endswith(
        "its stderr ended with: starting the invoicing server | INVOICES_DB is not set"
    )


def test_each_gateway_config_error_is_printed_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _gateway_config(tmp_path, REPO_ROOT / "tests" / "support" / "upstream_mcp.py")
    config.write_text(config.read_text().replace("invoice:{order_id}", "invoice:{order_id:>3}"))
    with pytest.raises(SystemExit) as exited:
        main(["gateway", "pin", "--config", str(config)])
    assert exited.value.code == 2
    stderr = capsys.readouterr().err
    assert stderr.count("placeholder {order_id} takes no format or conversion") == 1
    assert stderr.splitlines()[0] == (
        f"pausemesh: GATEWAY_CONFIG_INVALID: the gateway config {config} is invalid:"
    )


# -- ops -------------------------------------------------------------------------------------


@pytest.mark.parametrize("action", [["list"], ["status", "op-1"], ["why", "op-1"]])
def test_ops_refuses_a_database_that_does_not_exist_and_creates_none(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    action: list[str],
) -> None:
    for name in [n for n in os.environ if n.startswith("PAUSEMESH_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    config = _gateway_config(tmp_path, REPO_ROOT / "tests" / "support" / "upstream_mcp.py")
    assert main(["ops", *action, "--config", str(config), "--env-file", os.devnull]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("pausemesh: error: no PauseMesh database at ./data/pausemesh.db")
    assert "pass the --database-path (or --database-url) the gateway was served with" in line
    assert not (tmp_path / "data").exists()
