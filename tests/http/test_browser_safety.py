"""Browser safety against a real server: CORS for listed origins, no cross-site state changes.

``pausemesh demo`` runs with ``PAUSEMESH_CORS_ORIGINS=https://app.example.com``. A page on that
origin gets the CORS headers; any other origin gets none and cannot change state; a body that
is not JSON (a form post, ``text/plain`` ``fetch``, which need no preflight) or is not labeled
at all runs nothing. A DNS-rebinding page (its own name resolved to 127.0.0.1, so its Origin
matches its Host) gets 421 on every route; the demo page cannot be framed.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.agui import run_body
from tests.support.rest import PAYLOAD, assert_problem
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

ALLOWED = "https://app.example.com"
EVIL = "https://evil.example"
REBIND = "rebind.attacker.example"


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


# -- DNS rebinding: the Host allow-list -------------------------------------------------


def _rebinding(server: ServerProcess, *, origin: bool) -> dict[str, str]:
    """What a page on ``http://rebind.attacker.example:P`` sends once its name points here."""
    host = f"{REBIND}:{server.port}"
    return {"host": host, "origin": f"http://{host}"} if origin else {"host": host}


def _a2a_message() -> dict[str, Any]:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "Hi"}]}
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}


_REBIND_ROUTES: list[tuple[str, str, Any]] = [
    ("POST", "/v1/continuations", {"payload": 1}),
    ("GET", "/agui/threads", None),
    ("POST", "/agui", run_body("t-rebind", "r-1")),
    ("POST", "/a2a/jsonrpc", _a2a_message()),
    ("GET", "/a2a/.well-known/agent-card.json", None),
    ("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    ("GET", "/demo/people", None),
    ("GET", "/", None),
    ("GET", "/schema/openapi.json", None),
]


@pytest.mark.parametrize("origin", [True, False], ids=["with-origin", "without-origin"])
@pytest.mark.parametrize(("method", "path", "body"), _REBIND_ROUTES)
def test_a_rebinding_host_gets_421_on_every_route(
    http: httpx.Client, server: ServerProcess, method: str, path: str, body: Any, origin: bool
) -> None:
    headers = _rebinding(server, origin=origin)
    # The demo's manager cookie, which a rebinding page could set on its own origin.
    headers["cookie"] = "pausemesh_demo_user=manager"
    response = http.request(method, path, json=body, headers=headers)
    assert_problem(response, 421, "MISDIRECTED_REQUEST")


def test_the_rebinding_post_of_the_report_creates_nothing(
    http: httpx.Client, server: ServerProcess
) -> None:
    continuation_id = str(uuid.uuid4())
    body = {"payload": PAYLOAD, "continuationId": continuation_id}
    response = http.post("/v1/continuations", json=body, headers=_rebinding(server, origin=True))
    assert_problem(response, 421, "MISDIRECTED_REQUEST")
    assert http.get(f"/v1/continuations/{continuation_id}").status_code == 404
    thread_id = f"t-{uuid.uuid4()}"
    run = http.post(
        "/agui", json=run_body(thread_id, "r-1"), headers=_rebinding(server, origin=True)
    )
    assert_problem(run, 421, "MISDIRECTED_REQUEST")
    assert not _thread_exists(http, thread_id)


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost", "[::1]"])
def test_the_loopback_names_are_answered_with_any_port(
    http: httpx.Client, server: ServerProcess, name: str
) -> None:
    for host in (f"{name}:{server.port}", f"{name}:1", name):
        own = {"host": host, "origin": f"http://{host}"}
        created = http.post("/v1/continuations", json={"payload": 1}, headers=own)
        assert created.status_code == 201, created.text
        assert http.get("/agui/threads", headers=own).status_code == 200
        assert http.get("/", headers=own).status_code == 200


def test_the_probes_answer_the_address_an_orchestrator_names(http: httpx.Client) -> None:
    for path in ("/healthz", "/readyz"):
        assert http.get(path, headers={"host": "10.42.0.7:8787"}).status_code == 200


# -- the Origin is a scheme, a host and a port -----------------------------------------


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/continuations", {"payload": 1}),
        ("/agui", run_body("t-origin", "r-1")),
        ("/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        ("/a2a/jsonrpc", _a2a_message()),
    ],
)
def test_an_origin_with_another_scheme_or_port_is_foreign(
    http: httpx.Client, server: ServerProcess, path: str, body: Any
) -> None:
    for origin in (
        f"https://127.0.0.1:{server.port}",
        f"http://127.0.0.1:{server.port + 1}",
        "http://127.0.0.1",
    ):
        response = http.post(path, json=body, headers={"origin": origin})
        assert_problem(response, 403, "ORIGIN_NOT_ALLOWED")


def test_the_https_origin_of_the_report_creates_nothing(
    http: httpx.Client, server: ServerProcess
) -> None:
    continuation_id = str(uuid.uuid4())
    response = http.post(
        "/v1/continuations",
        json={"payload": 1, "continuationId": continuation_id},
        headers={"origin": f"https://127.0.0.1:{server.port}"},
    )
    assert_problem(response, 403, "ORIGIN_NOT_ALLOWED")
    assert http.get(f"/v1/continuations/{continuation_id}").status_code == 404


# -- a body must say it is JSON ----------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/v1/continuations", "/agui", "/agui/connect", "/mcp", "/a2a/jsonrpc"]
)
def test_a_body_without_content_type_is_415_on_every_json_endpoint(
    http: httpx.Client, path: str
) -> None:
    response = http.post(path, content=b'{"payload": 1}')
    assert "content-type" not in response.request.headers
    assert_problem(response, 415, "UNSUPPORTED_MEDIA_TYPE")


def test_an_unlabeled_create_or_resume_changes_nothing(http: httpx.Client) -> None:
    continuation_id = str(uuid.uuid4())
    unlabeled = httpx.Request(
        "POST", "/", json={"payload": PAYLOAD, "continuationId": continuation_id}
    ).content
    assert_problem(http.post("/v1/continuations", content=unlabeled), 415, "UNSUPPORTED_MEDIA_TYPE")
    assert http.get(f"/v1/continuations/{continuation_id}").status_code == 404

    created = http.post("/v1/continuations", json={"payload": PAYLOAD})
    assert created.status_code == 201, created.text
    continuation_id = created.json()["continuation"]["continuationId"]
    headers = {"pausemesh-token": created.json()["resumeToken"], "idempotency-key": "k-1"}
    answer = httpx.Request("POST", "/", json={"payload": {"flight": "PM101"}}).content
    refused = http.post(
        f"/v1/continuations/{continuation_id}/resume", content=answer, headers=headers
    )
    assert_problem(refused, 415, "UNSUPPORTED_MEDIA_TYPE")
    assert http.get(f"/v1/continuations/{continuation_id}").json()["continuation"]["status"] == (
        "pending"
    )
    resumed = http.post(
        f"/v1/continuations/{continuation_id}/resume",
        json={"payload": {"flight": "PM101"}},
        headers=headers,
    )
    assert resumed.status_code == 200, resumed.text


def test_an_unlabeled_run_starts_nothing(http: httpx.Client) -> None:
    thread_id = f"t-{uuid.uuid4()}"
    body = httpx.Request("POST", "/", json=run_body(thread_id, "r-1")).content
    assert_problem(http.post("/agui", content=body), 415, "UNSUPPORTED_MEDIA_TYPE")
    assert not _thread_exists(http, thread_id)


# -- the demo page -------------------------------------------------------------------------


def test_the_demo_page_and_its_assets_cannot_be_framed_or_sniffed(http: httpx.Client) -> None:
    page = http.get("/")
    assert page.status_code == 200
    asset = re.search(r'src="\./(assets/[^"]+\.js)"', page.text)
    assert asset is not None, page.text[:500]
    for response in (page, http.get(f"/{asset[1]}"), http.get("/demo/people")):
        assert response.status_code == 200, response.url
        headers = response.headers
        assert "frame-ancestors 'none'" in headers["content-security-policy"]
        assert headers["x-frame-options"] == "DENY"
        assert headers["x-content-type-options"] == "nosniff"
        # Not no-referrer: a browser would then send Origin: null on the page's own POSTs.
        assert headers["referrer-policy"] == "same-origin"
        assert headers["cross-origin-opener-policy"] == "same-origin"
