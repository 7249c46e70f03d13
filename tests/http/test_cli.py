"""The ``pausemesh`` command line: version, validation and the loopback-only default."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from pausemesh import __version__
from tests.support.loaded_frameworks import MARKER
from tests.support.server import REPO_ROOT, ServerProcess

pytestmark = pytest.mark.slow


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pausemesh", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
        env=env,
        check=False,
    )


def _run_watched(*args: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """``pausemesh <args>`` and the Litestar and ``pausemesh.web`` modules it loaded."""
    result = subprocess.run(
        [sys.executable, "-m", "tests.support.loaded_frameworks", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
        check=False,
    )
    (report,) = (line for line in result.stderr.splitlines() if line.startswith(MARKER))
    loaded: list[str] = json.loads(report.removeprefix(MARKER))
    return result, loaded


def test_version_and_the_offline_commands_load_no_web_framework(tmp_path: Path) -> None:
    database = ["--database-path", str(tmp_path / "offline.db")]
    keys = ["--file", str(tmp_path / "keys.json")]
    commands = [
        (["--version"], 0, f"pausemesh {__version__}"),
        (["purge", "--older-than", "30", "--dry-run", *database], 0, "would erase 0 threads"),
        (["stats", "--json", *database], 0, "{"),
        (["inspect", "thread", "no-such-thread", *database], 1, ""),
        (["ops", "list", "--domain", "demo.flight-bookings", *database], 0, "[]"),
        (["keys", "create", "--principal", "alice", *keys], 0, "pmk_"),
        (["keys", "list", *keys], 0, "principal=key:alice"),
        (["migrate"], 2, ""),
    ]
    for args, code, printed in commands:
        result, loaded = _run_watched(*args)
        assert (result.returncode, loaded) == (code, []), (args, result.stderr)
        assert printed in result.stdout, (args, result.stdout)
        assert "Traceback" not in result.stderr, args


def test_version_prints_the_package_version() -> None:
    result = _run("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"pausemesh {__version__}"


def test_a_bad_setting_stops_the_server_with_its_name(tmp_path: Path) -> None:
    result = _run("serve", "--port", "99999", "--database-path", str(tmp_path / "x.db"))
    assert result.returncode == 2
    assert "PAUSEMESH_PORT must be an integer between 1 and 65535" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_public_bind_without_auth_is_refused(tmp_path: Path) -> None:
    result = _run("serve", "--host", "0.0.0.0", "--database-path", str(tmp_path / "x.db"))  # noqa: S104 - the refusal is the point
    assert result.returncode == 2
    assert "--insecure-no-auth" in result.stderr
    assert not (tmp_path / "x.db").exists()


def test_a_public_bind_is_allowed_when_declared_insecure(tmp_path: Path) -> None:
    args = ["serve", "--insecure-no-auth", "--database-path", str(tmp_path / "x.db")]
    with ServerProcess(args, host="0.0.0.0") as server:  # noqa: S104 - declared insecure
        response = httpx.get(f"http://127.0.0.1:{server.port}/healthz")
        assert response.json() == {"status": "ok"}


def test_postgres_without_a_key_is_refused_before_binding(tmp_path: Path) -> None:
    result = _run("serve", "--database-url", "postgresql://127.0.0.1/test")
    assert result.returncode == 2
    assert "PAUSEMESH_SECRET_KEY" in result.stderr


def test_settings_come_from_the_environment(tmp_path: Path) -> None:
    env = {"PAUSEMESH_DATABASE_PATH": str(tmp_path / "env.db"), "PAUSEMESH_LOG_LEVEL": "debug"}
    with ServerProcess(["serve"], env=env) as server:
        assert httpx.get(server.url("/readyz")).status_code == 200
    assert (tmp_path / "env.db").exists()
    assert (tmp_path / "secret.key").exists()


def test_a_principal_resolver_from_the_cli_allows_a_public_bind_and_scopes_pauses(
    tmp_path: Path,
) -> None:
    args = [
        "serve",
        "--principal-resolver",
        "tests.support.principals:header_principal",
        "--database-path",
        str(tmp_path / "x.db"),
    ]
    with ServerProcess(args, host="0.0.0.0", ready_path="/healthz") as server:  # noqa: S104
        url = f"http://127.0.0.1:{server.port}/v1/continuations"
        assert httpx.post(url, json={"payload": 1}).status_code == 401
        created = httpx.post(url, json={"payload": 1}, headers={"x-user": "alice"})
        assert created.status_code == 201
        continuation_id = created.json()["continuation"]["continuationId"]
        assert httpx.get(f"{url}/{continuation_id}", headers={"x-user": "bob"}).status_code == 404
        assert httpx.get(f"{url}/{continuation_id}", headers={"x-user": "alice"}).is_success


def test_an_unimportable_resolver_stops_the_server(tmp_path: Path) -> None:
    result = _run(
        "serve", "--principal-resolver", "no.such.module:fn", "--database-path", str(tmp_path / "x")
    )
    assert result.returncode == 2
    assert "PAUSEMESH_PRINCIPAL_RESOLVER: cannot import 'no.such.module:fn'" in result.stderr


def test_identity_cors_and_limits_come_from_flags(tmp_path: Path) -> None:
    keys_file = tmp_path / "keys.json"
    created = _run("keys", "create", "--principal", "billing-bot", "--file", str(keys_file))
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip()
    args = [
        "serve",
        "--database-path",
        str(tmp_path / "x.db"),
        "--auth-api-keys-file",
        str(keys_file),
        "--cors-origins",
        "https://chat.example",
        "--rate-limit",
        "1/hour",
        "--allowed-hosts",
        "api.example.test",
    ]
    # The key file counts as authentication, so a public bind starts without --insecure-no-auth.
    with ServerProcess(args, host="0.0.0.0", ready_path="/healthz") as server:  # noqa: S104
        url = f"http://127.0.0.1:{server.port}/v1/continuations"
        anonymous = httpx.post(url, json={"payload": 1})
        assert anonymous.status_code == 401
        assert anonymous.json()["code"] == "UNAUTHENTICATED"
        bearer = {"authorization": f"Bearer {key}"}
        assert httpx.post(url, json={"payload": 1}, headers=bearer).status_code == 201
        limited = httpx.post(url, json={"payload": 2}, headers=bearer)
        assert limited.status_code == 429
        assert limited.json()["code"] == "RATE_LIMITED"
        preflight = {
            "origin": "https://chat.example",
            "access-control-request-method": "POST",
            "access-control-request-headers": "content-type",
        }
        allowed = httpx.options(url, headers=preflight)
        assert allowed.headers["access-control-allow-origin"] == "https://chat.example"
        other = httpx.options(url, headers={**preflight, "origin": "https://evil.example"})
        assert "access-control-allow-origin" not in other.headers
        # --allowed-hosts: the listed name (and loopback) answered, any other Host refused.
        listed = httpx.get(url + "/nope", headers={**bearer, "host": "api.example.test"})
        assert listed.json()["code"] == "CONTINUATION_NOT_FOUND"
        unlisted = httpx.get(url + "/nope", headers={**bearer, "host": "other.example.test"})
        assert unlisted.json()["code"] == "MISDIRECTED_REQUEST"
        log = server.output()
    assert "PAUSEMESH_ALLOWED_HOSTS is not set" not in log


# Longer than uvicorn's own keep-alive timeout (5 s), which closed such a connection before.
_PAST_UVICORNS_DEFAULT = 6.0


@pytest.mark.parametrize("workers", ["1", "2"])
def test_an_idle_connection_stays_open_as_long_as_the_setting_says(
    tmp_path: Path, workers: str
) -> None:
    args = ["serve", "--workers", workers, "--database-path", str(tmp_path / "idle.db")]
    env = {"PAUSEMESH_IDLE_CONNECTION_SECONDS": "60"}
    with ServerProcess(args, env=env, ready_path="/readyz") as server:
        connection = http.client.HTTPConnection(server.host, server.port, timeout=60)
        try:
            connection.request("GET", "/readyz")
            first = connection.getresponse()
            first_body = first.read()
            opened = connection.sock
            time.sleep(_PAST_UVICORNS_DEFAULT)
            # The same socket: a connection the server had closed fails here (no reconnect).
            connection.request("GET", "/readyz")
            again = connection.getresponse()
            assert connection.sock is opened
            assert (first.status, again.status) == (200, 200)
            assert again.read() == first_body  # with two workers: the same worker answered
        finally:
            connection.close()


def test_a_bad_flag_value_stops_the_server_naming_its_setting(tmp_path: Path) -> None:
    result = _run("serve", "--rate-limit", "often", "--database-path", str(tmp_path / "x.db"))
    assert result.returncode == 2
    assert "PAUSEMESH_RATE_LIMIT" in result.stderr
    assert "Traceback" not in result.stderr


def test_workers_refuse_a_port_in_use_instead_of_sharing_it(tmp_path: Path) -> None:
    """Workers listen with ``SO_REUSEPORT``; a second server must not silently join them."""
    args = ["serve", "--workers", "2", "--database-path", str(tmp_path / "a.db")]
    with ServerProcess(args, ready_path="/readyz") as server:
        second = _run(
            "serve",
            "--workers",
            "2",
            "--port",
            str(server.port),
            "--database-path",
            str(tmp_path / "b.db"),
        )
        assert second.returncode == 2
        assert f"cannot listen on 127.0.0.1:{server.port}" in second.stderr
        assert "Traceback" not in second.stderr
        assert httpx.get(server.url("/healthz")).json() == {"status": "ok"}
