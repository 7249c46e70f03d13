"""``PAUSEMESH_ALLOWED_HOSTS``, the non-loopback default and ``PAUSEMESH_METRICS_TOKEN``, against
real servers.

* A ``pausemesh demo`` on a loopback bind behind a (pretend) proxy lists the names the proxy
  forwards: those are answered on every route, ``/mcp`` included (the SDK's own Host check is
  off, so the two lists cannot disagree); any other name gets 421. It serves ``/metrics``
  only to its token.
* A ``pausemesh serve --insecure-no-auth`` on ``0.0.0.0`` without the list answers any Host and
  says at start what that means (two WARNING lines).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.rest import assert_problem
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

PROXIED = "pausemesh.example.test"
METRICS_TOKEN = "scrape-" + "k" * 32
_MCP_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "proxy-test", "version": "1"},
    },
}
_MCP_HEADERS = {"accept": "application/json, text/event-stream"}


@pytest.fixture(name="proxied", scope="module")
def proxied_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data: Path = tmp_path_factory.mktemp("proxied")
    server = ServerProcess(
        ["demo", "--no-browser", "--database-path", str(data / "pausemesh.db")],
        env={
            "PAUSEMESH_DATA_DIR": str(data),
            "PAUSEMESH_ALLOWED_HOSTS": f"{PROXIED},*.apps.example.test",
            "PAUSEMESH_METRICS": "1",
            "PAUSEMESH_METRICS_TOKEN": METRICS_TOKEN,
        },
    )
    with server:
        yield server


@pytest.fixture(name="http")
def http_fixture(proxied: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=proxied.base_url, timeout=30) as client:
        yield client


@pytest.mark.parametrize(
    "host", [PROXIED, f"{PROXIED}:443", "eu.apps.example.test", "localhost", "127.0.0.1:1"]
)
def test_the_listed_names_and_the_loopback_ones_are_answered(http: httpx.Client, host: str) -> None:
    headers = {"host": host}
    created = http.post("/v1/continuations", json={"payload": 1}, headers=headers)
    assert created.status_code == 201, created.text
    assert http.get("/agui/threads", headers=headers).status_code == 200
    assert http.get("/a2a/.well-known/agent-card.json", headers=headers).status_code == 200
    assert http.get("/", headers=headers).status_code == 200
    mcp = http.post("/mcp", json=_MCP_INIT, headers={**headers, **_MCP_HEADERS})
    assert mcp.status_code == 200, mcp.text


@pytest.mark.parametrize(
    "host", ["rebind.attacker.example", "apps.example.test", f"x{PROXIED}", "10.0.0.5:8787"]
)
def test_a_name_the_list_does_not_hold_gets_421_mcp_included(http: httpx.Client, host: str) -> None:
    for response in (
        http.post("/v1/continuations", json={"payload": 1}, headers={"host": host}),
        http.post("/mcp", json=_MCP_INIT, headers={"host": host, **_MCP_HEADERS}),
        http.get("/demo/people", headers={"host": host}),
    ):
        # The same problem body from the mount as from the REST routes, not the SDK's text.
        assert_problem(response, 421, "MISDIRECTED_REQUEST")


def test_behind_a_tls_proxy_the_page_origin_is_its_own_when_the_proxy_says_https(
    http: httpx.Client,
) -> None:
    # The test client connects from 127.0.0.1, the address uvicorn trusts forwarded headers
    # from by default (FORWARDED_ALLOW_IPS): here it plays the proxy.
    page = {"host": PROXIED, "origin": f"https://{PROXIED}"}
    continuation_id = str(uuid.uuid4())
    body = {"payload": 1, "continuationId": continuation_id}
    refused = http.post("/v1/continuations", json=body, headers=page)
    assert_problem(refused, 403, "ORIGIN_NOT_ALLOWED")
    forwarded = {**page, "x-forwarded-proto": "https"}
    created = http.post("/v1/continuations", json=body, headers=forwarded)
    assert created.status_code == 201, created.text


def test_metrics_answer_only_the_metrics_token(http: httpx.Client) -> None:
    for authorization in (
        None,
        "Bearer wrong-token-of-some-length",
        f"Bearer {METRICS_TOKEN}x",
        f"Basic {METRICS_TOKEN}",
        METRICS_TOKEN,
    ):
        headers = {} if authorization is None else {"authorization": authorization}
        refused = http.get("/metrics", headers=headers)
        assert_problem(refused, 401, "UNAUTHENTICATED")
        assert refused.headers["www-authenticate"] == 'Bearer realm="metrics"'
        assert "pausemesh_" not in refused.text
    scraped = http.get("/metrics", headers={"authorization": f"Bearer {METRICS_TOKEN}"})
    assert scraped.status_code == 200
    assert "pausemesh_continuations_created_total" in scraped.text
    # The probes stay open to the orchestrator.
    assert http.get("/healthz").status_code == 200


def test_a_listed_or_loopback_server_starts_without_a_bind_warning(
    proxied: ServerProcess, server: ServerProcess
) -> None:
    for started in (proxied, server):
        log = started.output()
        assert "PAUSEMESH_ALLOWED_HOSTS is not set" not in log, log[-3000:]
        assert "--insecure-no-auth" not in log, log[-3000:]


def test_an_open_bind_without_the_list_answers_any_host_and_warns_at_start(
    tmp_path: Path,
) -> None:
    server = ServerProcess(
        ["serve", "--insecure-no-auth", "--database-path", str(tmp_path / "open.db")],
        host="0.0.0.0",  # noqa: S104 - the bind under test
    )
    with server, httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=30) as http:
        for host in ("10.1.2.3:8787", "pausemesh.internal", "localhost"):
            created = http.post("/v1/continuations", json={"payload": 1}, headers={"host": host})
            assert created.status_code == 201, created.text
        log = server.output()
    warnings = [line for line in log.splitlines() if "WARNING" in line]
    assert any("--insecure-no-auth on 0.0.0.0" in line for line in warnings), log[-3000:]
    assert any("PAUSEMESH_ALLOWED_HOSTS is not set" in line for line in warnings), log[-3000:]
