"""The Host allow-list and the Origin comparison, in-process: which names a policy admits,
what each bind and ``PAUSEMESH_ALLOWED_HOSTS`` make of it, and the same answer from the
Litestar app and the native Starlette AG-UI routes. (The same against real servers:
``tests/http/test_host_allow_list.py`` and ``tests/http/test_browser_safety.py``.)"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager
from starlette.applications import Starlette

from pausemesh.core.errors import OriginNotAllowedError, UnsupportedMediaTypeError
from pausemesh.demo.agent import travel_agent
from pausemesh.settings import Settings
from pausemesh.web.agui_starlette import StarletteAgui
from pausemesh.web.app import create_app
from pausemesh.web.browser import browser_refusal
from pausemesh.web.host_guard import host_policy
from tests.support.agui import run_body
from tests.support.asgi import asgi
from tests.support.rest import assert_problem

REBIND = "rebind.attacker.example"


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "127.0.0.1:8787", "localhost:1", "LOCALHOST", "localhost.", "[::1]:80"]
)
def test_a_loopback_bind_admits_the_loopback_names_with_any_port(host: str) -> None:
    policy = host_policy(Settings())
    assert policy is not None
    assert policy.admits(host.encode())


@pytest.mark.parametrize(
    "host",
    [
        f"{REBIND}:8787",
        REBIND,
        "127.0.0.1.nip.io:8787",
        "evil.localhost",
        "127.0.0.2:8787",
        "[::2]:8787",
        "127.0.0.1:x",
        "127.0.0.1:8787:1",
        "[::1",
        "",
    ],
)
def test_a_loopback_bind_refuses_every_other_host(host: str) -> None:
    policy = host_policy(Settings())
    assert policy is not None
    assert not policy.admits(host.encode())


def test_a_request_without_host_is_refused_where_the_list_applies() -> None:
    policy = host_policy(Settings())
    assert policy is not None
    assert not policy.admits(None)


def test_the_bound_loopback_address_itself_is_admitted() -> None:
    for bind, host in [("127.0.0.2", b"127.0.0.2:9"), ("::1", b"[::1]:9")]:
        policy = host_policy(Settings(host=bind))
        assert policy is not None
        assert policy.admits(host)


def test_the_listed_names_and_subdomains_of_a_wildcard_are_admitted_besides_loopback() -> None:
    policy = host_policy(
        Settings(host="0.0.0.0", allowed_hosts="api.example.test,*.apps.example.test")  # noqa: S104
    )
    assert policy is not None
    for host in ["api.example.test", "api.example.test:443", "a.apps.example.test", "localhost"]:
        assert policy.admits(host.encode()), host
    # A wildcard covers subdomains, not the name itself, nor a name that merely ends alike.
    for host in ["apps.example.test", "evilapps.example.test", "example.test", REBIND]:
        assert not policy.admits(host.encode()), host


def test_a_star_or_a_non_loopback_bind_without_a_list_answers_any_host() -> None:
    assert host_policy(Settings(allowed_hosts="*")) is None
    assert host_policy(Settings(host="0.0.0.0")) is None  # noqa: S104
    assert host_policy(Settings(host="10.0.0.5")) is None


def _scope(origin: str, host: str, scheme: str = "http") -> dict[str, Any]:
    return {
        "type": "http",
        "method": "POST",
        "scheme": scheme,
        "headers": [
            (b"host", host.encode()),
            (b"origin", origin.encode()),
            (b"content-type", b"application/json"),
            (b"content-length", b"2"),
        ],
    }


@pytest.mark.parametrize(
    ("origin", "host", "scheme"),
    [
        ("http://127.0.0.1:8787", "127.0.0.1:8787", "http"),
        ("http://localhost:80", "localhost", "http"),
        ("http://localhost", "localhost:80", "http"),
        ("https://api.example.test", "api.example.test", "https"),
        ("https://api.example.test:443", "api.example.test", "https"),
        ("HTTP://LocalHost:8787", "localhost:8787", "http"),
    ],
)
def test_the_own_origin_is_the_same_scheme_host_and_port(
    origin: str, host: str, scheme: str
) -> None:
    assert browser_refusal(_scope(origin, host, scheme), ()) is None


@pytest.mark.parametrize(
    ("origin", "host", "scheme"),
    [
        ("https://127.0.0.1:8787", "127.0.0.1:8787", "http"),
        ("http://127.0.0.1:8788", "127.0.0.1:8787", "http"),
        ("http://127.0.0.1", "127.0.0.1:8787", "http"),
        ("http://api.example.test", "api.example.test", "https"),
        ("http://localhost:443", "localhost", "https"),
        ("null", "localhost:8787", "http"),
    ],
)
def test_an_origin_differing_in_scheme_host_or_port_is_foreign(
    origin: str, host: str, scheme: str
) -> None:
    assert isinstance(browser_refusal(_scope(origin, host, scheme), ()), OriginNotAllowedError)


def test_a_body_without_content_type_is_refused_and_an_empty_one_is_not() -> None:
    unlabeled = {"type": "http", "method": "POST", "headers": [(b"content-length", b"2")]}
    chunked = {"type": "http", "method": "PATCH", "headers": [(b"transfer-encoding", b"chunked")]}
    empty = {"type": "http", "method": "POST", "headers": [(b"content-length", b"0")]}
    assert isinstance(browser_refusal(unlabeled, ()), UnsupportedMediaTypeError)
    assert isinstance(browser_refusal(chunked, ()), UnsupportedMediaTypeError)
    assert browser_refusal(empty, ()) is None


@pytest.fixture(name="starlette")
async def starlette_fixture(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    pausemesh = StarletteAgui(Settings(database_path=str(tmp_path / "s.db")), agent=travel_agent)
    app = Starlette(routes=pausemesh.routes(), lifespan=pausemesh.lifespan)
    async with (
        LifespanManager(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost"
        ) as client,
    ):
        yield client


async def test_the_starlette_routes_answer_a_rebinding_host_421_and_run_nothing(
    starlette: httpx.AsyncClient,
) -> None:
    hostile = {"host": f"{REBIND}:8787", "origin": f"http://{REBIND}:8787"}
    body = run_body("t-rebind", "r-1", messages=[{"id": "m", "role": "user", "content": "hi"}])
    assert_problem(
        await starlette.post("/agui", json=body, headers=hostile), 421, "MISDIRECTED_REQUEST"
    )
    assert_problem(
        await starlette.get("/agui/threads", headers=hostile), 421, "MISDIRECTED_REQUEST"
    )
    assert (await starlette.get("/agui/threads/t-rebind")).status_code == 404
    assert (await starlette.get("/agui/threads", headers={"host": "[::1]:8787"})).status_code == 200


async def test_a_non_loopback_bind_with_a_list_answers_only_the_listed_names(
    tmp_path: Path,
) -> None:
    settings = Settings(
        host="0.0.0.0",  # noqa: S104
        allowed_hosts="api.example.test",
        database_path=str(tmp_path / "app.db"),
        insecure_no_auth=True,
    )
    app = create_app(settings)
    async with (
        LifespanManager(asgi(app)),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(asgi(app)), base_url="http://api.example.test"
        ) as client,
    ):
        created = await client.post("/v1/continuations", json={"payload": 1})
        assert created.status_code == 201, created.text
        refused = await client.post(
            "/v1/continuations", json={"payload": 1}, headers={"host": "10.0.0.5:8787"}
        )
        assert_problem(refused, 421, "MISDIRECTED_REQUEST")
        # The probes answer an orchestrator's probe, which names the pod's address.
        probe = await client.get("/healthz", headers={"host": "10.0.0.5:8787"})
        assert probe.status_code == 200
