"""``/metrics`` (opt-in, a registry per app), request ids and the access line, in-process."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from asgi_lifespan import LifespanManager
from litestar import Litestar
from opentelemetry import trace
from prometheus_client.parser import text_string_to_metric_families

from pausemesh.observability.log_format import JsonFormatter
from pausemesh.settings import Settings
from pausemesh.web.app import create_app
from tests.support.agui import header_principal
from tests.support.asgi import asgi


def _app(path: Path, **settings: object) -> Litestar:
    return create_app(
        Settings(database_path=str(path / "pausemesh.db"), **settings),  # type: ignore[arg-type]
        principal_resolver=header_principal,
    )


@pytest.fixture(name="apps")
async def apps_fixture(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, ...]]:
    """Two apps with metrics in one process, and one without."""
    apps = [
        _app(tmp_path / "a", metrics=True),
        _app(tmp_path / "b", metrics=True),
        _app(tmp_path / "c"),
    ]
    async with (
        LifespanManager(asgi(apps[0])),
        LifespanManager(asgi(apps[1])),
        LifespanManager(asgi(apps[2])),
    ):
        clients = [
            httpx.AsyncClient(transport=httpx.ASGITransport(asgi(app)), base_url="http://localhost")
            for app in apps
        ]
        try:
            yield tuple(clients)
        finally:
            for client in clients:
                await client.aclose()


async def _created(client: httpx.AsyncClient) -> float:
    response = await client.get("/metrics")
    assert response.status_code == 200
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name == "pausemesh_continuations_created_total":
                return sample.value
    raise AssertionError("pausemesh_continuations_created_total is missing")


async def _create(client: httpx.AsyncClient, principal: str = "alice") -> httpx.Response:
    return await client.post(
        "/v1/continuations",
        json={"payload": {"kind": "input", "message": "Which seat?"}},
        headers={"x-principal": principal},
    )


async def test_each_app_counts_into_its_own_registry(
    apps: tuple[httpx.AsyncClient, ...],
) -> None:
    first, second, _ = apps
    assert (await _create(first)).status_code == 201
    assert (await _create(first)).status_code == 201
    assert (await _create(second)).status_code == 201

    assert await _created(first) == 2
    assert await _created(second) == 1


async def test_metrics_are_off_unless_asked_for(apps: tuple[httpx.AsyncClient, ...]) -> None:
    _, _, plain = apps
    response = await plain.get("/metrics")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"


async def test_metrics_need_no_principal_like_the_probes(
    apps: tuple[httpx.AsyncClient, ...],
) -> None:
    first, _, _ = apps
    assert (await first.get("/readyz")).status_code == 200
    assert (await first.get("/metrics")).status_code == 200
    assert (await first.get("/v1/continuations/x")).status_code == 401


async def test_every_answer_names_its_request_id_and_a_plain_incoming_one_is_kept(
    apps: tuple[httpx.AsyncClient, ...],
) -> None:
    first, _, _ = apps
    fresh = await first.get("/healthz")
    assert len(fresh.headers["x-request-id"]) == 16
    kept = await first.get("/healthz", headers={"x-request-id": "lb-1234.abc"})
    assert kept.headers["x-request-id"] == "lb-1234.abc"
    odd = await first.get("/healthz", headers={"x-request-id": "x" * 65})
    assert odd.headers["x-request-id"] != "x" * 65
    injected = await first.get("/healthz", headers={"x-request-id": 'a"\n{}'})
    assert injected.headers["x-request-id"] != 'a"\n{}'


async def test_the_access_line_has_the_route_template_and_a_hash_of_the_principal(
    apps: tuple[httpx.AsyncClient, ...], caplog: pytest.LogCaptureFixture
) -> None:
    first, _, _ = apps
    created = await _create(first, principal="carol@example.com")
    cid = created.json()["continuation"]["continuationId"]
    token = created.json()["resumeToken"]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="pausemesh.access"):
        response = await first.get(
            f"/v1/continuations/{cid}",
            params={"token": token},
            headers={"x-principal": "carol@example.com", "authorization": f"PauseMesh {token}"},
        )
    assert response.status_code == 200
    [record] = [r for r in caplog.records if r.name == "pausemesh.access"]
    line = json.loads(JsonFormatter().format(record))
    assert line["route"] == "/v1/continuations/{continuation_id}"
    assert line["method"] == "GET"
    assert line["status"] == 200
    assert line["bytes"] == len(response.content)
    assert line["durationMs"] >= 0
    assert line["principalHash"] == hashlib.sha256(b"carol@example.com").hexdigest()[:16]
    text = json.dumps(line)
    for secret in (token, cid, "carol@example.com", "Which seat?"):
        assert secret not in text


async def test_an_unauthenticated_request_is_logged_without_a_principal_hash(
    apps: tuple[httpx.AsyncClient, ...], caplog: pytest.LogCaptureFixture
) -> None:
    first, _, _ = apps
    with caplog.at_level(logging.INFO, logger="pausemesh.access"):
        response = await first.get("/v1/continuations/x")
    assert response.status_code == 401
    [record] = [r for r in caplog.records if r.name == "pausemesh.access"]
    line = json.loads(JsonFormatter().format(record))
    assert line["status"] == 401
    assert "principalHash" not in line


class _FormatAtOnce(logging.Handler):
    """Formats each line while it is logged, inside the request (as the CLI's handler does),
    so the request and trace ids of that moment are in it."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[dict[str, object]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(JsonFormatter().format(record)))


async def test_without_a_tracing_sdk_an_incoming_trace_reaches_the_lines_and_none_is_made_up(
    apps: tuple[httpx.AsyncClient, ...],
) -> None:
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider), "no SDK here"
    first, _, _ = apps
    handler = _FormatAtOnce()
    logger = logging.getLogger("pausemesh.observer")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        traced = await first.post(
            "/v1/continuations",
            json={"payload": {"kind": "input", "message": "Which seat?"}},
            headers={"x-principal": "alice", "traceparent": _TRACEPARENT},
        )
        traced_lines = list(handler.lines)
        handler.lines.clear()
        plain = await _create(first)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert (traced.status_code, plain.status_code) == (201, 201)
    assert traced_lines, "the create logged no observation"
    for line in traced_lines:
        assert line["traceId"] == "4bf92f3577b34da6a3ce929d0e0e4736"
        assert line["requestId"] == traced.headers["x-request-id"]
    assert handler.lines, "the create logged no observation"
    for line in handler.lines:
        assert "traceId" not in line
        assert "spanId" not in line
        assert line["requestId"] == plain.headers["x-request-id"]


_TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
