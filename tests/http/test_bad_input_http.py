"""Every client mistake is a 4xx problem body with a stable code, never a 500."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from litestar import Litestar

from tests.support.asgi import asgi
from tests.support.rest import assert_problem, create

pytestmark = pytest.mark.slow

_MAX = 65_536  # the server's default PAUSEMESH_MAX_PAYLOAD_BYTES


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{not json", "MALFORMED_JSON"),
        (b'{"payload": 1', "MALFORMED_JSON"),
        (b"", "EMPTY_BODY"),
        (b"[]", "INVALID_REQUEST"),
        (b"{}", "INVALID_REQUEST"),
        (b'{"payload": 1, "extra": true}', "INVALID_REQUEST"),
        (b'{"payload": 1, "continuationId": ""}', "INVALID_REQUEST"),
        (b'{"payload": 1, "continuationId": " padded "}', "INVALID_REQUEST"),
        (b'{"payload": 1, "continuationId": 7}', "INVALID_REQUEST"),
        (b'{"payload": 1, "metadata": []}', "INVALID_REQUEST"),
        (b'{"payload": 1, "expiresAt": "2020-01-01T00:00:00Z"}', "INVALID_EXPIRY"),
        (b'{"payload": 1, "expiresAt": "2999-01-01T00:00:00"}', "INVALID_REQUEST"),
        (b'{"payload": 1, "expiresAt": "tomorrow"}', "INVALID_REQUEST"),
        (b'{"payload": "\xff\xfe"}', "MALFORMED_JSON"),
        (b'{"payload": "\\ud800"}', "MALFORMED_JSON"),
        (b'{"payload": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "PAYLOAD_TOO_LARGE"),
        (b'{"payload": ' + b"[" * 30_000 + b"]" * 30_000 + b"}", "MALFORMED_JSON"),
        (b'{"payload": ' + b"[" * 300 + b"]" * 300 + b"}", "INVALID_PAYLOAD"),
        (b'{"payload": 1e400}', "INVALID_REQUEST"),
    ],
    ids=[
        "malformed",
        "truncated",
        "empty",
        "array",
        "missing-payload",
        "unknown-field",
        "empty-id",
        "padded-id",
        "numeric-id",
        "metadata-array",
        "past-expiry",
        "naive-expiry",
        "word-expiry",
        "invalid-utf8",
        "lone-surrogate",
        "deep-and-large",
        "deep-nesting",
        "nested-too-deep-for-the-core",
        "number-out-of-range",
    ],
)
async def test_bad_create_bodies_are_400_problems(
    client: httpx.AsyncClient, body: bytes, code: str
) -> None:
    response = await client.post(
        "/v1/continuations", content=body, headers={"content-type": "application/json"}
    )
    assert_problem(response, 413 if code == "PAYLOAD_TOO_LARGE" else 400, code)


async def test_bad_resume_and_cancel_bodies_are_400_problems(client: httpx.AsyncClient) -> None:
    continuation_id, token = await create(client)
    headers = {"authorization": f"PauseMesh {token}", "idempotency-key": "k"}
    resume_url = f"/v1/continuations/{continuation_id}/resume"
    cancel_url = f"/v1/continuations/{continuation_id}/cancel"
    cases = [
        (resume_url, b"", "EMPTY_BODY"),
        (resume_url, b"{}", "INVALID_REQUEST"),
        (resume_url, b"{oops", "MALFORMED_JSON"),
        (resume_url, b'{"payload": 1, "token": "x"}', "INVALID_REQUEST"),
        (cancel_url, b"", "EMPTY_BODY"),
        (cancel_url, b"{oops", "MALFORMED_JSON"),
        (cancel_url, b'{"expectedVersion": 0}', "INVALID_REQUEST"),
        (cancel_url, b'{"expectedVersion": "1"}', "INVALID_REQUEST"),
        (cancel_url, b'{"reason": "' + b"r" * 501 + b'"}', "INVALID_REQUEST"),
        (cancel_url, b'{"why": "no"}', "INVALID_REQUEST"),
    ]
    for url, body, code in cases:
        response = await client.post(
            url, content=body, headers={**headers, "content-type": "application/json"}
        )
        assert_problem(response, 400, code)
    # None of it touched the continuation.
    state = (await client.get(f"/v1/continuations/{continuation_id}")).json()["continuation"]
    assert state["status"] == "pending"


async def test_an_unknown_route_is_a_404_problem(client: httpx.AsyncClient) -> None:
    assert_problem(await client.get("/nope"), 404, "NOT_FOUND")
    assert_problem(await client.get("/v1/continuations/a/b/c/d"), 404, "NOT_FOUND")
    assert_problem(await client.delete("/v1/continuations/x"), 405, "METHOD_NOT_ALLOWED")


async def test_an_unsupported_protocol_is_404(client: httpx.AsyncClient) -> None:
    continuation_id, _ = await create(client)
    response = await client.post(f"/v1/continuations/{continuation_id}/projections/smtp", json={})
    body = assert_problem(response, 404, "UNSUPPORTED_PROTOCOL")
    assert "mcp, a2a, ag-ui" in body["detail"]


async def test_an_oversized_body_with_content_length_is_413_before_parsing(
    client: httpx.AsyncClient,
) -> None:
    # Not even JSON: the limit answers before any parser could complain.
    response = await client.post(
        "/v1/continuations",
        content=b"x" * (_MAX + 1),
        headers={"content-type": "application/json"},
    )
    assert_problem(response, 413, "PAYLOAD_TOO_LARGE")


async def test_an_oversized_chunked_body_is_413_while_streaming(
    client: httpx.AsyncClient,
) -> None:
    sent = 0

    async def chunks() -> AsyncIterator[bytes]:
        nonlocal sent
        yield b'{"payload": "'
        for _ in range(200):
            sent += 1
            yield b"x" * 1024

    response = await client.post(
        "/v1/continuations", content=chunks(), headers={"content-type": "application/json"}
    )
    assert "content-length" not in response.request.headers
    assert response.request.headers["transfer-encoding"] == "chunked"
    assert_problem(response, 413, "PAYLOAD_TOO_LARGE")


async def test_a_body_at_the_limit_is_accepted(client: httpx.AsyncClient) -> None:
    prefix, suffix = b'{"payload": "', b'"}'
    body = prefix + b"x" * (_MAX - len(prefix) - len(suffix)) + suffix
    assert len(body) == _MAX
    response = await client.post(
        "/v1/continuations", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 201


async def test_the_body_limit_stops_reading_the_stream_before_the_end(host_app: Litestar) -> None:
    # Driven at the ASGI level to count what the app pulled: a 200 KiB chunked body
    # against the 64 KiB limit is refused after about 64 chunks, long before the end.
    chunks = [b'{"payload": "'] + [b"x" * 1024] * 200
    pulled = 0

    async def receive() -> dict[str, Any]:
        nonlocal pulled
        pulled += 1
        body = chunks[pulled - 1] if pulled <= len(chunks) else b""
        return {"type": "http.request", "body": body, "more_body": pulled < len(chunks)}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/continuations",
        "raw_path": b"/v1/continuations",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"content-type", b"application/json"),
            (b"transfer-encoding", b"chunked"),
        ],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
        "state": {},
    }
    await asgi(host_app)(scope, receive, send)
    assert sent[0]["status"] == 413
    assert b'"code":"PAYLOAD_TOO_LARGE"' in sent[1]["body"]
    assert pulled < 80
