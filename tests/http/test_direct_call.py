"""The hot write routes (create, resume) answered by ``DirectCall``: the same answers as
Litestar's own handler path, byte for byte, for good and bad input alike."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager
from litestar import Litestar, Request
from litestar.connection import ASGIConnection
from litestar.exceptions import PermissionDeniedException
from litestar.handlers import BaseRouteHandler
from litestar.routes.http import HTTPRoute

from pausemesh.settings import Settings
from pausemesh.web import PauseMeshConfig, PauseMeshPlugin
from tests.support.asgi import asgi
from tests.support.rest import PAYLOAD

_LIMIT = 4096


def _no_op_hook(_: Request[Any, Any, Any]) -> None:
    """A ``before_request`` hook that changes nothing: with it, DirectCall hands every request
    to Litestar's own handler path (a hook is something only that path runs)."""


@asynccontextmanager
async def _client(
    tmp_path: Path, name: str, **app_options: Any
) -> AsyncIterator[httpx.AsyncClient]:
    config = PauseMeshConfig(
        settings=Settings(database_path=str(tmp_path / f"{name}.db"), max_payload_bytes=_LIMIT),
        problem_details_for_app=True,
    )
    app = Litestar(plugins=[PauseMeshPlugin(config)], **app_options)
    async with LifespanManager(asgi(app), startup_timeout=60, shutdown_timeout=60):
        transport = httpx.ASGITransport(asgi(app))
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            yield client


def _normalized(value: Any) -> Any:
    """A body with what differs between two stores by design (the token, the clock) blanked."""
    if isinstance(value, dict):
        return {
            k: "<varies>" if k == "resumeToken" or k.endswith("At") else _normalized(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    return value


def _answer(response: httpx.Response) -> tuple[int, dict[str, str], Any]:
    headers = dict(response.headers)
    # Present on every answer (the telemetry middleware saw it), different every time.
    assert len(headers.pop("x-request-id")) == 16
    assert int(headers.pop("content-length")) == len(response.content)
    body = response.json() if response.content else None
    return response.status_code, headers, _normalized(body)


Request_ = Callable[[httpx.AsyncClient, str], Awaitable[httpx.Response]]


def _resume(continuation_id: str, *headers: tuple[str, str], body: bytes | None = None) -> Request_:
    async def send(client: httpx.AsyncClient, token: str) -> httpx.Response:
        resolved = [(name, value.replace("{token}", token)) for name, value in headers]
        resolved.append(("content-type", "application/json"))
        content = b'{"payload": {"flight": "PM101"}}' if body is None else body
        return await client.post(
            f"/v1/continuations/{continuation_id}/resume", content=content, headers=resolved
        )

    return send


def _create(content: bytes, content_type: str | None = "application/json") -> Request_:
    async def send(client: httpx.AsyncClient, _: str) -> httpx.Response:
        headers = {} if content_type is None else {"content-type": content_type}
        return await client.post("/v1/continuations", content=content, headers=headers)

    return send


async def _unlabeled_resume(client: httpx.AsyncClient, token: str) -> httpx.Response:
    """A resume whose body says nothing of its type: refused (415), the token left unspent."""
    return await client.post(
        "/v1/continuations/direct-1/resume",
        content=b'{"payload": {"flight": "PM101"}}',
        headers={"pausemesh-token": token, "idempotency-key": "k1"},
    )


_CREATE = (
    b'{"payload": {"kind": "input", "message": "Book?"}, "continuationId": "direct-1",'
    b' "correlationId": "thread-1"}'
)
_STEPS: list[tuple[str, Request_]] = [
    ("created", _create(_CREATE)),
    ("duplicate id", _create(_CREATE)),
    ("malformed JSON", _create(b'{"payload":')),
    ("empty body", _create(b"")),
    ("unlabeled body", _create(_CREATE.replace(b"direct-1", b"direct-2"), content_type=None)),
    ("not UTF-8", _create(b'{"payload": "\xff"}')),
    ("unknown field", _create(b'{"payload": 1, "extra": true}')),
    ("JSON null", _create(b"null")),
    ("too large", _create(b'{"payload": "' + b"x" * _LIMIT + b'"}')),
    ("bad id in body", _create(b'{"payload": 1, "continuationId": " edge"}')),
    (
        "wrong token",
        _resume("direct-1", ("authorization", "PauseMesh nope"), ("idempotency-key", "k1")),
    ),
    ("no token", _resume("direct-1", ("idempotency-key", "k1"))),
    ("no key", _resume("direct-1", ("pausemesh-token", "{token}"))),
    ("id too long", _resume("x" * 201, ("pausemesh-token", "{token}"), ("idempotency-key", "k1"))),
    ("unknown id", _resume("nope", ("pausemesh-token", "{token}"), ("idempotency-key", "k1"))),
    (
        "id ending in a newline",
        _resume("direct-1%0A", ("pausemesh-token", "{token}"), ("idempotency-key", "k1")),
    ),
    (
        "first of two tokens wrong",
        _resume(
            "direct-1",
            ("pausemesh-token", "nope"),
            ("pausemesh-token", "{token}"),
            ("idempotency-key", "k1"),
        ),
    ),
    (
        "payload off the schema",
        _resume("direct-1", ("pausemesh-token", "{token}"), ("idempotency-key", "k1"), body=b"{}"),
    ),
    ("unlabeled resume", _unlabeled_resume),
    ("resumed", _resume("direct-1", ("pausemesh-token", "{token}"), ("idempotency-key", "k1"))),
    ("exact retry", _resume("direct-1", ("pausemesh-token", "{token}"), ("idempotency-key", "k1"))),
    (
        "second resume",
        _resume("direct-1", ("authorization", "PauseMesh {token}"), ("idempotency-key", "k2")),
    ),
]


async def _run_steps(
    client: httpx.AsyncClient,
) -> list[tuple[str, tuple[int, dict[str, str], Any]]]:
    answers = []
    token = ""
    for name, step in _STEPS:
        response = await step(client, token)
        if name == "created":
            assert response.status_code == 201, response.text
            token = response.json()["resumeToken"]
        answers.append((name, _answer(response)))
    return answers


@pytest.mark.slow
async def test_create_and_resume_answer_as_litestars_own_handler_path_would(
    tmp_path: Path,
) -> None:
    async with _client(tmp_path, "direct") as direct:
        answered_directly = await _run_steps(direct)
    async with _client(tmp_path, "generic", before_request=_no_op_hook) as generic:
        answered_by_litestar = await _run_steps(generic)
    for (name, mine), (_, theirs) in zip(answered_directly, answered_by_litestar, strict=True):
        assert mine == theirs, name
    # The steps cover what they name (not every answer the same one).
    statuses = {name: status for name, (status, _, _) in answered_directly}
    assert statuses["created"] == 201
    assert statuses["resumed"] == statuses["exact retry"] == 200
    assert {statuses[n] for n in ("malformed JSON", "empty body", "id too long")} == {400}
    assert statuses["too large"] == 413
    assert statuses["unlabeled body"] == statuses["unlabeled resume"] == 415
    assert statuses["wrong token"] == statuses["first of two tokens wrong"] == 401
    assert statuses["unknown id"] == 404
    assert statuses["second resume"] == 409


@pytest.mark.slow
async def test_create_and_resume_do_not_go_through_litestars_generic_handler_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    generic_calls: list[str] = []
    original = HTTPRoute._call_handler_function

    async def counted(self: HTTPRoute, *args: Any, **kwargs: Any) -> Any:
        generic_calls.append(self.path)
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(HTTPRoute, "_call_handler_function", counted)
    async with _client(tmp_path, "counted") as client:
        created = await client.post("/v1/continuations", json={"payload": PAYLOAD})
        assert created.status_code == 201
        continuation_id = created.json()["continuation"]["continuationId"]
        resumed = await client.post(
            f"/v1/continuations/{continuation_id}/resume",
            json={"payload": {"flight": "PM101"}},
            headers={
                "pausemesh-token": created.json()["resumeToken"],
                "idempotency-key": "k1",
            },
        )
        assert resumed.status_code == 200, resumed.text
        assert generic_calls == []
        inspected = await client.get(f"/v1/continuations/{continuation_id}")
        assert inspected.json()["continuation"]["status"] == "resumed"
        assert generic_calls == ["/v1/continuations/{continuation_id:str}"]


def _deny_marked(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    if connection.headers.get("x-deny"):
        raise PermissionDeniedException("denied by the host")


async def _stamp(response: Any) -> Any:
    response.headers["x-host"] = "stamped"
    return response


@pytest.mark.slow
async def test_a_hosts_guard_and_after_request_hook_still_apply_to_create(
    tmp_path: Path,
) -> None:
    async with _client(tmp_path, "host", guards=[_deny_marked], after_request=_stamp) as client:
        denied = await client.post(
            "/v1/continuations", json={"payload": 1}, headers={"x-deny": "1"}
        )
        assert denied.status_code == 403
        created = await client.post("/v1/continuations", json={"payload": 1})
        assert created.status_code == 201
        assert created.headers["x-host"] == "stamped"
        listed = await client.get(
            f"/v1/continuations/{created.json()['continuation']['continuationId']}"
        )
        assert listed.headers["x-host"] == "stamped"
