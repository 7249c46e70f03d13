"""No credential reaches the log of a real ``pausemesh demo`` at DEBUG with JSON logs.

The server checks JWTs against a JWKS file the test owns and API keys made by ``pausemesh
keys``; requests carry them (and a resume token, a cookie) over A2A, AG-UI, REST and MCP. At
DEBUG the a2a-sdk logs each task's call context, request headers included
(``a2a.server.agent_execution.active_task``): the line must be there, with the headers
redacted, and no credential anywhere in the output.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.agui import run_body
from tests.support.identity import SigningKey, jwt_env, write_jwks
from tests.support.server import REPO_ROOT, ServerProcess

pytestmark = pytest.mark.slow

IDP_KEY = SigningKey.rsa("idp-logs")
A2A = "a2a.server.agent_execution.active_task"
COOKIE_VALUE = "s3ss10n-c00k1e-of-the-browser"


@pytest.fixture(name="data", scope="module")
def data_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("log-redaction")


@pytest.fixture(name="api_key", scope="module")
def api_key_fixture(data: Path) -> str:
    command = ["keys", "create", "--principal", "log-bot", "--file", str(data / "keys.json")]
    created = subprocess.run(
        [sys.executable, "-m", "pausemesh", *command],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    key = created.stdout.strip()
    assert key.startswith("pmk_")
    return key


@pytest.fixture(name="server", scope="module")
def server_fixture(data: Path, api_key: str) -> Iterator[ServerProcess]:
    del api_key  # made before the server starts
    write_jwks(data / "jwks.json", IDP_KEY)
    env = jwt_env(
        (data / "jwks.json").as_uri(),
        PAUSEMESH_AUTH_API_KEYS_FILE=str(data / "keys.json"),
        PAUSEMESH_DATA_DIR=str(data),
        PAUSEMESH_LOG_LEVEL="debug",
        PAUSEMESH_LOG_FORMAT="json",
    )
    args = ["demo", "--no-browser", "--database-path", str(data / "pausemesh.db")]
    with ServerProcess(args, env=env) as server:
        yield server


def _send_message(text: str) -> dict[str, Any]:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    return {
        "jsonrpc": "2.0",
        "id": "req-1",
        "method": "SendMessage",
        "params": {"message": message},
    }


def _lines(output: str, logger: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    return [line for line in lines if line["logger"] == logger]


def test_debug_logs_of_a_server_hold_no_credential_of_any_request(
    server: ServerProcess, api_key: str
) -> None:
    jwt = IDP_KEY.token("alice")
    extra = {"cookie": f"pm_session={COOKIE_VALUE}", "x-api-key": api_key}
    a2a = {"content-type": "application/json", "a2a-version": "1.0"}
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        for credential in (jwt, api_key):
            headers = {"authorization": f"Bearer {credential}", **extra}
            sent = http.post(
                "/a2a/jsonrpc", json=_send_message("Book me a flight"), headers={**headers, **a2a}
            )
            assert sent.status_code == 200, sent.text
            assert "error" not in sent.json(), sent.text
            run = http.post("/agui", json=run_body(f"t-{uuid.uuid4()}", "r-1"), headers=headers)
            assert run.status_code == 200, run.text
            listed = http.post(
                "/mcp",
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
                headers={**headers, "accept": "application/json, text/event-stream"},
            )
            assert listed.status_code < 500, listed.text
        created = http.post(
            "/v1/continuations",
            json={"payload": {"question": "ok?"}},
            headers={"authorization": f"Bearer {jwt}"},
        )
        assert created.status_code == 201, created.text
        token = created.json()["resumeToken"]
        resumed = http.post(
            f"/v1/continuations/{created.json()['continuation']['continuationId']}/resume",
            json={"payload": {"answer": "yes"}},
            headers={
                "authorization": f"Bearer {jwt}",
                "pausemesh-token": token,
                "idempotency-key": "k1",
            },
        )
        assert resumed.status_code == 200, resumed.text

    output = server.wait_for_output(f'"logger":"{A2A}"')
    secret = api_key.rsplit("_", 1)[1]
    for credential in (jwt, secret, COOKIE_VALUE, token):
        assert credential not in output, credential
    # Every JWT segment too: a partial JWT is no better.
    for segment in jwt.split("."):
        assert segment not in output
    # The a2a-sdk's line with the call context: the headers are there, their values are not.
    contexts = [line for line in _lines(output, A2A) if "call_context" in line["message"]]
    assert len(contexts) >= 2, output[-3000:]
    for line in contexts:
        for name in ("authorization", "x-api-key", "cookie"):
            assert f"'{name}': '[REDACTED]'" in line["message"], line
