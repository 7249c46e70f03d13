"""``/mcp`` and ``/a2a`` behind JWT bearer identity, on a real ``pausemesh demo`` process whose
JWKS the test serves over loopback HTTP.

Without a valid token both mounts answer 401 with a ``Bearer`` challenge; ``/mcp`` publishes
its OAuth 2.0 Protected Resource Metadata (RFC 9728, as the MCP authorization spec asks) and
names it in the challenge. With a token, the official MCP and A2A clients work as before.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from a2a.client import Client as A2AClient
from a2a.client import ClientConfig, create_client
from a2a.types import GetTaskRequest, TaskState
from a2a.utils.errors import A2AError
from mcp.client.streamable_http import streamable_http_client
from mcp_types import InputRequiredResult

from tests.support.identity import FORGERIES, ISSUER, JwksServer, SigningKey, jwt_env
from tests.support.protocol_clients import send_for_task, tool_round, user_message
from tests.support.rest import assert_problem
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

IDP_KEY = SigningKey.ec("idp-ec")
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}


@pytest.fixture(name="server", scope="module")
def server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data: Path = tmp_path_factory.mktemp("bearer-protocols")
    with JwksServer(IDP_KEY).running() as idp:
        args = ["demo", "--no-browser", "--database-path", str(data / "pausemesh.db")]
        env = jwt_env(idp.url, PAUSEMESH_DATA_DIR=str(data))
        with ServerProcess(args, env=env) as server:
            yield server


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def challenge_of(reply: httpx.Response) -> str:
    assert_problem(reply, 401, "UNAUTHENTICATED")
    challenge: str = reply.headers["www-authenticate"]
    assert challenge.startswith('Bearer realm="pausemesh"')
    return challenge


def test_an_mcp_request_without_a_token_is_told_where_the_resource_metadata_is(
    server: ServerProcess,
) -> None:
    reply = httpx.post(server.url("/mcp"), json=INITIALIZE, timeout=10)
    challenge = challenge_of(reply)
    found = re.search(r'resource_metadata="([^"]+)"', challenge)
    assert found is not None, challenge
    assert found.group(1) == server.url("/.well-known/oauth-protected-resource/mcp")

    document = httpx.get(found.group(1), timeout=10)
    assert document.status_code == 200
    assert document.json() == {
        "resource": server.url("/mcp"),
        "authorization_servers": [ISSUER],
        "bearer_methods_supported": ["header"],
        "resource_name": "PauseMesh",
    }
    root = httpx.get(server.url("/.well-known/oauth-protected-resource"), timeout=10).json()
    assert root["resource"] == server.base_url
    assert root["authorization_servers"] == [ISSUER]


@pytest.mark.parametrize("forge", FORGERIES, ids=lambda f: f.__name__.lstrip("_"))
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/mcp"),
        ("POST", "/a2a/jsonrpc"),
        ("POST", "/a2a/rest/message:send"),
        ("GET", "/a2a/rest/tasks/some-task"),
    ],
)
def test_a_forged_or_stale_token_is_a_401_invalid_token_on_the_protocol_mounts(
    server: ServerProcess, forge: Any, method: str, path: str
) -> None:
    body = INITIALIZE if method == "POST" else None
    reply = httpx.request(
        method, server.url(path), json=body, headers=bearer(forge(IDP_KEY)), timeout=10
    )
    challenge = challenge_of(reply)
    assert 'error="invalid_token"' in challenge
    assert ("resource_metadata=" in challenge) == (path == "/mcp")


async def test_the_official_mcp_client_with_a_token_reaches_the_tools(
    server: ServerProcess,
) -> None:
    http = httpx2.AsyncClient(headers=bearer(IDP_KEY.token("alice")), timeout=30)
    try:
        result = await tool_round(
            streamable_http_client(server.url("/mcp"), http_client=http),
            "book_flight",
            {"destination": "Paris"},
        )
    finally:
        await http.aclose()
    assert isinstance(result, InputRequiredResult)


@asynccontextmanager
async def a2a_as(server: ServerProcess, principal: str) -> AsyncIterator[A2AClient]:
    headers = bearer(IDP_KEY.token(principal))
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        config = ClientConfig(httpx_client=http, streaming=False)
        client = await create_client(server.url("/a2a"), client_config=config)
        try:
            yield client
        finally:
            await client.close()


async def test_the_official_a2a_client_with_a_token_owns_its_task(server: ServerProcess) -> None:
    async with a2a_as(server, "alice") as alice:
        task = await send_for_task(alice, user_message(text="Paris"))
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    async with a2a_as(server, "bob") as bob:
        with pytest.raises(A2AError):
            await bob.get_task(GetTaskRequest(id=task.id))


def test_a2a_discovery_is_public_so_a_webhook_can_verify_a_push_without_a_token(
    server: ServerProcess,
) -> None:
    card = httpx.get(server.url("/a2a/.well-known/agent-card.json"), timeout=10)
    assert card.status_code == 200
    assert card.json()["name"]
    keys = httpx.get(server.url("/a2a/.well-known/jwks.json"), timeout=10)
    assert keys.status_code == 200
    assert [key["kty"] for key in keys.json()["keys"]] == ["EC"]
    # Only the discovery documents: the same mount's work still needs a caller.
    challenge_of(httpx.get(server.url("/a2a/rest/tasks/some-task"), timeout=10))
