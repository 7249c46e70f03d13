"""Browser safety against a real server: CORS for listed origins, no cross-site state changes.

``pausemesh demo`` runs with ``PAUSEMESH_CORS_ORIGINS=https://app.example.com``. A page on that
origin gets the CORS headers; any other origin gets none and cannot change state; a body that
is not JSON (a form post, ``text/plain`` ``fetch``, which need no preflight) runs nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.agui import run_body
from tests.support.rest import assert_problem
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

ALLOWED = "https://app.example.com"
EVIL = "https://evil.example"


@pytest.fixture(name="server", scope="module")
def server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data: Path = tmp_path_factory.mktemp("browser-safety")
    server = ServerProcess(
        ["demo", "--no-browser", "--database-path", str(data / "pausemesh.db")],
        env={"PAUSEMESH_DATA_DIR": str(data), "PAUSEMESH_CORS_ORIGINS": ALLOWED},
    )
    with server:
        yield server


@pytest.fixture(name="http")
def http_fixture(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        yield client


def _preflight(http: httpx.Client, path: str, origin: str) -> httpx.Response:
    return http.options(
        path,
        headers={
            "origin": origin,
            "access-control-request-method": "POST",
            "access-control-request-headers": "content-type, last-event-id",
        },
    )


@pytest.mark.parametrize("path", ["/agui", "/v1/continuations", "/mcp", "/a2a/jsonrpc"])
def test_a_preflight_from_an_allowed_origin_gets_the_cors_headers(
    http: httpx.Client, path: str
) -> None:
    response = _preflight(http, path, ALLOWED)
    assert response.status_code in {200, 204}, response.text
    assert response.headers["access-control-allow-origin"] == ALLOWED
    assert "POST" in response.headers["access-control-allow-methods"]
    allowed_headers = response.headers["access-control-allow-headers"].lower()
    assert "content-type" in allowed_headers
    assert "last-event-id" in allowed_headers


@pytest.mark.parametrize("path", ["/agui", "/v1/continuations", "/mcp"])
def test_a_preflight_from_another_origin_gets_no_cors_headers(
    http: httpx.Client, path: str
) -> None:
    response = _preflight(http, path, EVIL)
    assert "access-control-allow-origin" not in response.headers


def test_a_response_to_an_allowed_origin_exposes_what_a_client_reads(http: httpx.Client) -> None:
    response = http.get("/agui/threads/nobody/events?after=x", headers={"origin": ALLOWED})
    assert response.headers["access-control-allow-origin"] == ALLOWED
    exposed = response.headers["access-control-expose-headers"].lower()
    assert "retry-after" in exposed
    assert "www-authenticate" in exposed


def _thread_exists(http: httpx.Client, thread_id: str) -> bool:
    return http.get(f"/agui/threads/{thread_id}").status_code == 200


def test_the_cross_origin_text_plain_post_to_agui_is_refused_and_runs_nothing(
    http: httpx.Client,
) -> None:
    thread_id = f"t-{uuid.uuid4()}"
    body = httpx.Request("POST", "/", json=run_body(thread_id, "r-1")).content
    response = http.post(
        "/agui", content=body, headers={"origin": EVIL, "content-type": "text/plain"}
    )
    assert_problem(response, 403, "ORIGIN_NOT_ALLOWED")
    assert not _thread_exists(http, thread_id)


def test_a_same_origin_text_plain_post_to_agui_is_415_and_runs_nothing(
    http: httpx.Client, server: ServerProcess
) -> None:
    thread_id = f"t-{uuid.uuid4()}"
    body = httpx.Request("POST", "/", json=run_body(thread_id, "r-1")).content
    response = http.post(
        "/agui",
        content=body,
        headers={"origin": server.base_url, "content-type": "text/plain"},
    )
    assert_problem(response, 415, "UNSUPPORTED_MEDIA_TYPE")
    assert not _thread_exists(http, thread_id)


def test_a_json_run_from_the_allowed_origin_streams(http: httpx.Client) -> None:
    thread_id = f"t-{uuid.uuid4()}"
    with http.stream(
        "POST",
        "/agui",
        json=run_body(
            thread_id, "r-1", messages=[{"id": "m1", "role": "user", "content": "hello"}]
        ),
        headers={"origin": ALLOWED},
    ) as response:
        assert response.status_code == 200
        assert response.headers["access-control-allow-origin"] == ALLOWED
        response.read()
    assert _thread_exists(http, thread_id)


@pytest.mark.parametrize(
    ("path", "content_type"),
    [
        ("/v1/continuations", "text/plain"),
        ("/v1/continuations", "application/x-www-form-urlencoded"),
        ("/mcp", "text/plain"),
        ("/a2a/jsonrpc", "text/plain"),
        ("/a2a/rest/message:send", "multipart/form-data; boundary=x"),
    ],
)
def test_a_non_json_body_is_415_on_every_json_endpoint(
    http: httpx.Client, path: str, content_type: str
) -> None:
    response = http.post(path, content=b'{"payload": 1}', headers={"content-type": content_type})
    assert_problem(response, 415, "UNSUPPORTED_MEDIA_TYPE")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/continuations"),
        ("POST", "/mcp"),
        ("POST", "/a2a/jsonrpc"),
        ("DELETE", "/mcp"),
    ],
)
def test_a_foreign_origin_cannot_change_state_anywhere(
    http: httpx.Client, method: str, path: str
) -> None:
    response = http.request(method, path, json={"payload": 1}, headers={"origin": EVIL})
    assert_problem(response, 403, "ORIGIN_NOT_ALLOWED")


def test_a_foreign_origin_may_still_read_nothing_cross_site(http: httpx.Client) -> None:
    # Reads are not refused (a browser withholds the answer without CORS headers).
    response = http.get("/healthz", headers={"origin": EVIL})
    assert response.status_code == 200
    assert "access-control-allow-origin" not in response.headers


def test_a_client_without_origin_is_unaffected(http: httpx.Client) -> None:
    response = http.post("/v1/continuations", json={"payload": 1})
    assert response.status_code == 201
