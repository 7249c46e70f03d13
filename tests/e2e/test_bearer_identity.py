"""Built-in bearer identity against real ``pausemesh serve`` processes.

The server verifies JWTs against a JWKS file the test owns (and rotates) and API keys made by
``pausemesh keys`` run as a subprocess; the agent (``tests.support.identity:whoami``) writes the
principal and ``ctx.roles`` it ran for into the thread's state.
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

from tests.support.agui import post_run, run_body
from tests.support.identity import FORGERIES, SigningKey, jwt_env, write_jwks
from tests.support.rest import PAYLOAD, assert_problem
from tests.support.server import REPO_ROOT, ServerProcess

pytestmark = pytest.mark.slow

IDP_KEY = SigningKey.rsa("idp-1")


@pytest.fixture(name="data", scope="module")
def data_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bearer")


@pytest.fixture(name="server", scope="module")
def server_fixture(data: Path) -> Iterator[ServerProcess]:
    write_jwks(data / "jwks.json", IDP_KEY)
    env = jwt_env(
        (data / "jwks.json").as_uri(),
        PAUSEMESH_AUTH_JWKS_REFRESH_SECONDS="0",
        PAUSEMESH_AUTH_API_KEYS_FILE=str(data / "keys.json"),
        PAUSEMESH_DATA_DIR=str(data),
    )
    args = ["serve", "--database-path", str(data / "pausemesh.db")]
    with ServerProcess([*args, "--agent", "tests.support.identity:whoami"], env=env) as server:
        yield server


def bearer(credential: str) -> dict[str, str]:
    return {"authorization": f"Bearer {credential}"}


def as_user(name: str, roles: list[str] | None = None) -> dict[str, str]:
    return bearer(IDP_KEY.token(name, roles=roles))


def ask(server: ServerProcess, headers: dict[str, str]) -> tuple[str, str]:
    """A run that pauses; returns (thread id, interrupt id)."""
    thread_id = f"thread-{uuid.uuid4()}"
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        result = post_run(client, run_body(thread_id, "run-1"), headers=headers)
    assert result.last["outcome"]["type"] == "interrupt", result.events
    return thread_id, result.interrupts[0]["id"]


def state_of(server: ServerProcess, thread_id: str, headers: dict[str, str]) -> Any:
    reply = httpx.get(server.url(f"/agui/threads/{thread_id}"), headers=headers, timeout=10)
    assert reply.status_code == 200, reply.text
    return reply.json()["state"]


def assert_bearer_401(reply: httpx.Response, *, error: str | None = "invalid_token") -> None:
    assert_problem(reply, 401, "UNAUTHENTICATED")
    challenge = reply.headers["www-authenticate"]
    assert challenge.startswith('Bearer realm="pausemesh"')
    if error is None:
        assert "error=" not in challenge
    else:
        assert f'error="{error}"' in challenge


def test_a_valid_token_runs_the_agent_for_its_subject_with_its_roles(server: ServerProcess) -> None:
    headers = as_user("alice", roles=["approver", "travel"])
    thread_id, _ = ask(server, headers)
    state = state_of(server, thread_id, headers)
    assert state["principal"] == "alice"
    assert state["roles"] == ["approver", "travel"]


@pytest.mark.parametrize("forge", FORGERIES, ids=lambda f: f.__name__.lstrip("_"))
def test_a_token_that_does_not_verify_is_a_401_with_a_bearer_challenge_on_every_route(
    server: ServerProcess, forge: Any
) -> None:
    headers = bearer(forge(IDP_KEY))
    with httpx.Client(base_url=server.base_url, headers=headers, timeout=10) as client:
        assert_bearer_401(client.post("/agui", json=run_body("t-forged", "r-1")))
        assert_bearer_401(client.get("/agui/threads/t-forged"))
        assert_bearer_401(client.get("/agui/threads/t-forged/events"))
        assert_bearer_401(client.post("/v1/continuations", json={"payload": PAYLOAD}))


def test_a_request_without_a_credential_is_a_401_with_the_bare_challenge(
    server: ServerProcess,
) -> None:
    assert_bearer_401(httpx.get(server.url("/agui/threads"), timeout=10), error=None)
    # The probes stay open: an orchestrator has no token.
    assert httpx.get(server.url("/healthz"), timeout=10).status_code == 200


def test_a_key_added_to_the_jwks_works_without_a_restart(server: ServerProcess, data: Path) -> None:
    rotated = SigningKey.ed25519("idp-2")
    headers = bearer(rotated.token("dave"))
    assert_bearer_401(httpx.get(server.url("/agui/threads"), headers=headers, timeout=10))
    write_jwks(data / "jwks.json", IDP_KEY, rotated)
    reply = httpx.get(server.url("/agui/threads"), headers=headers, timeout=10)
    assert reply.status_code == 200, reply.text


def test_bob_cannot_read_answer_or_cancel_alices_thread_or_question(server: ServerProcess) -> None:
    alice, bob = as_user("alice"), as_user("bob")
    thread_id, interrupt_id = ask(server, alice)
    answer = run_body(
        thread_id,
        "run-2",
        resume=[{"interruptId": interrupt_id, "status": "resolved", "payload": {"flight": "X"}}],
    )
    with httpx.Client(base_url=server.base_url, headers=bob, timeout=10) as client:
        assert_problem(client.get(f"/agui/threads/{thread_id}"), 404, "THREAD_NOT_FOUND")
        assert_problem(client.get(f"/agui/threads/{thread_id}/events"), 404, "THREAD_NOT_FOUND")
        assert_problem(client.post("/agui", json=answer), 404, "THREAD_NOT_FOUND")
        assert_problem(client.delete(f"/agui/threads/{thread_id}"), 404, "THREAD_NOT_FOUND")
        continuation = f"/v1/continuations/{interrupt_id}"
        assert_problem(client.get(continuation), 404, "CONTINUATION_NOT_FOUND")
        cancel = client.post(f"{continuation}/cancel", json={"reason": "not mine"})
        assert_problem(cancel, 404, "CONTINUATION_NOT_FOUND")

    with httpx.Client(base_url=server.base_url, headers=alice, timeout=30) as client:
        finished = post_run(client, answer)
    assert finished.last["type"] == "RUN_FINISHED"
    assert state_of(server, thread_id, alice)["answered"] == 1


def test_bob_cannot_tail_a_thread_whose_reads_alices_open_tail_shares(
    server: ServerProcess,
) -> None:
    alice, bob = as_user("alice"), as_user("bob")
    thread_id, interrupt_id = ask(server, alice)
    answer = run_body(
        thread_id,
        "run-shared",
        resume=[{"interruptId": interrupt_id, "status": "resolved", "payload": {"flight": "X"}}],
    )
    events = f"/agui/threads/{thread_id}/events"
    with (
        httpx.Client(base_url=server.base_url, headers=alice, timeout=30) as client,
        client.stream("GET", events) as tail,
    ):
        assert tail.status_code == 200
        with httpx.Client(base_url=server.base_url, headers=bob, timeout=10) as other:
            assert_problem(other.get(events), 404, "THREAD_NOT_FOUND")
        assert post_run(client, answer).last["type"] == "RUN_FINISHED"
        seen = []
        for line in tail.iter_lines():
            if line.startswith("data:"):
                event = json.loads(line[5:])
                seen.append(event)
                if event["type"] == "RUN_FINISHED" and event["runId"] == "run-shared":
                    break
        with httpx.Client(base_url=server.base_url, headers=bob, timeout=10) as other:
            assert_problem(other.get(events), 404, "THREAD_NOT_FOUND")
    assert seen[-1]["runId"] == "run-shared"


def test_a_resume_token_travels_in_pausemesh_token_beside_the_bearer_identity(
    server: ServerProcess,
) -> None:
    alice, bob = as_user("alice"), as_user("bob")
    with httpx.Client(base_url=server.base_url, timeout=10) as client:
        created = client.post("/v1/continuations", json={"payload": PAYLOAD}, headers=alice)
        assert created.status_code == 201, created.text
        continuation_id = created.json()["continuation"]["continuationId"]
        token = created.json()["resumeToken"]
        path = f"/v1/continuations/{continuation_id}/resume"
        body = {"payload": {"flight": "PM101"}}

        def resume(headers: dict[str, str]) -> httpx.Response:
            return client.post(path, json=body, headers={**headers, "idempotency-key": "k1"})

        assert_problem(resume({**bob, "pausemesh-token": token}), 404, "CONTINUATION_NOT_FOUND")
        assert_problem(resume({**alice, "pausemesh-token": "wrong"}), 401, "TOKEN_MISMATCH")
        # The header that carries the bearer identity cannot carry the resume token too.
        assert_bearer_401(resume({"authorization": f"PauseMesh {token}"}), error="invalid_request")
        done = resume({**alice, "pausemesh-token": token})
    assert done.status_code == 200, done.text
    assert done.json()["continuation"]["status"] == "resumed"


def keys_cli(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pausemesh", "keys", *args, "--file", str(data / "keys.json")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )


def test_an_api_key_made_by_the_cli_works_until_the_cli_revokes_it(
    server: ServerProcess, data: Path
) -> None:
    created = keys_cli(data, "create", "--principal", "billing-bot", "--role", "refunds")
    key = created.stdout.strip()
    assert key.startswith("pmk_")
    assert key not in (data / "keys.json").read_text()

    headers = bearer(key)
    thread_id, _ = ask(server, headers)
    # API keys have their own namespace: the key's caller is key:billing-bot.
    assert state_of(server, thread_id, headers) == {
        "principal": "key:billing-bot",
        "roles": ["refunds"],
        "answered": 0,
    }
    listed = keys_cli(data, "list").stdout
    assert "principal=key:billing-bot" in listed
    assert "active" in listed

    keys_cli(data, "revoke", key.split("_")[1])
    assert_bearer_401(httpx.get(server.url(f"/agui/threads/{thread_id}"), headers=headers))
    assert "revoked" in keys_cli(data, "list").stdout


def test_a_resume_token_travels_in_pausemesh_token_beside_an_api_key(
    server: ServerProcess, data: Path
) -> None:
    key = keys_cli(data, "create", "--principal", "refund-bot").stdout.strip()
    headers = bearer(key)
    with httpx.Client(base_url=server.base_url, timeout=10) as client:
        created = client.post("/v1/continuations", json={"payload": PAYLOAD}, headers=headers)
        assert created.status_code == 201, created.text
        continuation_id = created.json()["continuation"]["continuationId"]
        token = created.json()["resumeToken"]
        path = f"/v1/continuations/{continuation_id}/resume"

        def resume(extra: dict[str, str]) -> httpx.Response:
            return client.post(
                path,
                json={"payload": {"flight": "PM101"}},
                headers={**headers, **extra, "idempotency-key": "k1"},
            )

        wrong = resume({"pausemesh-token": token[:-1] + ("A" if token[-1] != "A" else "B")})
        assert_problem(wrong, 401, "TOKEN_MISMATCH")
        # Without PauseMesh-Token the bearer credential is not taken for a resume token.
        assert_problem(resume({}), 401, "TOKEN_MISMATCH")
        done = resume({"pausemesh-token": token})
    assert done.status_code == 200, done.text
    assert done.json()["continuation"]["status"] == "resumed"
