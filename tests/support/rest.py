"""Assertions and small helpers for the continuation REST API, shared by HTTP tests."""

from __future__ import annotations

from typing import Any

import httpx

__all__ = ("PAYLOAD", "assert_problem", "create", "resume")

PAYLOAD: dict[str, Any] = {
    "kind": "input",
    "message": "Which flight should I book?",
    "responseSchema": {"type": "object", "properties": {"flight": {"type": "string"}}},
}


def assert_problem(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """An RFC 9457 problem body with the given status and stable ``code``."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json"), response.text
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    assert body["code"] == code, body
    assert isinstance(body["type"], str)
    assert isinstance(body["title"], str)
    assert isinstance(body["detail"], str)
    return body


async def create(client: httpx.AsyncClient, **fields: Any) -> tuple[str, str]:
    """Create a continuation; return ``(continuation_id, resume_token)``."""
    body = {"payload": PAYLOAD, **fields}
    response = await client.post("/v1/continuations", json=body)
    assert response.status_code == 201, response.text
    created = response.json()
    return created["continuation"]["continuationId"], created["resumeToken"]


async def resume(
    client: httpx.AsyncClient,
    continuation_id: str,
    token: str,
    key: str = "key-1",
    payload: Any = None,
) -> httpx.Response:
    return await client.post(
        f"/v1/continuations/{continuation_id}/resume",
        json={"payload": {"flight": "PM101"} if payload is None else payload},
        headers={"authorization": f"PauseMesh {token}", "idempotency-key": key},
    )
