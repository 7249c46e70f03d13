"""Four-eyes approvals that cannot be impersonated, against real server processes (issue 40).

A ``pausemesh demo`` process with the built-in bearer identity: JWTs verified against a JWKS
this test serves over loopback HTTP, and API keys made by ``pausemesh keys`` run as a
subprocess. The traveller picks PM404, above the approval threshold, and the demo asks
``Approver.role("manager")``. Before typed approvers, a token whose subject was
``role:manager`` (no roles) listed and approved it; the requester approved their own request
when they held the role; a token with ``sub=billing-bot`` read the API key ``billing-bot``'s
continuation. A ``pausemesh serve`` process with ``tests.support.four_eyes:ask_a_manager``
shows ``allow_requester=True`` letting a manager decide their own request.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.agui_helpers import ask, new_thread, pending_ids, resolved, resume_body, snapshot
from tests.support.agui import post_run, run_body
from tests.support.four_eyes import ALLOW_REQUESTER
from tests.support.identity import JwksServer, SigningKey, jwt_env
from tests.support.rest import PAYLOAD, assert_problem
from tests.support.server import REPO_ROOT, ServerProcess

pytestmark = pytest.mark.slow

IDP_KEY = SigningKey.rsa("idp-four-eyes")


@dataclass
class Server:
    process: ServerProcess
    keys_file: Path

    def client(self, headers: dict[str, str]) -> httpx.Client:
        return httpx.Client(base_url=self.process.base_url, headers=headers, timeout=30)


def as_user(subject: str, roles: list[str] | None = None) -> dict[str, str]:
    return {"authorization": f"Bearer {IDP_KEY.token(subject, roles=roles)}"}


def as_key(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def keys_cli(keys_file: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pausemesh", "keys", *args, "--file", str(keys_file)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def new_key(keys_file: Path, *args: str) -> str:
    created = keys_cli(keys_file, "create", *args)
    assert created.returncode == 0, created.stderr
    return created.stdout.strip()


@pytest.fixture(name="jwks", scope="module")
def jwks_fixture() -> Iterator[JwksServer]:
    with JwksServer(IDP_KEY).running() as jwks:
        yield jwks


def _env(jwks: JwksServer, folder: Path) -> dict[str, str]:
    return jwt_env(
        jwks.url,
        PAUSEMESH_AUTH_API_KEYS_FILE=str(folder / "keys.json"),
        PAUSEMESH_DATA_DIR=str(folder),
        PAUSEMESH_DEMO_AIRLINE_PATH=str(folder / "airline.db"),
        PAUSEMESH_LOG_LEVEL="warning",
    )


@pytest.fixture(name="demo", scope="module")
def demo_fixture(tmp_path_factory: pytest.TempPathFactory, jwks: JwksServer) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("four-eyes-demo")
    args = ["demo", "--no-browser", "--database-path", str(folder / "demo.db")]
    with ServerProcess(args, env=_env(jwks, folder)) as process:
        yield Server(process, folder / "keys.json")


def _approval_asked(client: httpx.Client) -> tuple[str, dict[str, Any]]:
    """The caller picks PM404; the demo asks a manager. Returns the thread and the interrupt."""
    thread_id = new_thread()
    question = ask(client, thread_id).interrupts[0]
    run = post_run(client, resume_body(thread_id, [resolved(question["id"], "PM404")]))
    assert run.last["type"] == "RUN_FINISHED", run.events
    [approval] = run.interrupts
    assert approval["metadata"]["pausemesh"]["approvers"] == ["role:manager"]
    return thread_id, approval


def _decide(client: httpx.Client, continuation_id: str) -> httpx.Response:
    return client.post(
        f"/v1/approvals/{continuation_id}",
        json={"payload": {"decision": "approve"}},
        headers={"idempotency-key": f"k-{uuid.uuid4()}"},
    )


def _inbox(client: httpx.Client) -> list[str]:
    listed = client.get("/v1/approvals", params={"limit": 200})
    assert listed.status_code == 200, listed.text
    return [a["continuationId"] for a in listed.json()["approvals"]]


def _nothing_happened(client: httpx.Client, thread_id: str, approval: dict[str, Any]) -> None:
    assert pending_ids(client, thread_id) == [approval["id"]]
    assert snapshot(client, thread_id)["state"]["bookings"] == []


def assert_bearer_401(reply: httpx.Response) -> None:
    assert_problem(reply, 401, "UNAUTHENTICATED")
    assert 'error="invalid_token"' in reply.headers["www-authenticate"]


@pytest.mark.parametrize("subject", ["role:manager", "Role:manager", "operation:op-1"])
def test_a_token_whose_subject_spells_an_approver_entry_cannot_list_or_decide(
    demo: Server, subject: str
) -> None:
    with demo.client(as_user("traveller")) as traveller:
        thread_id, approval = _approval_asked(traveller)
        with demo.client(as_user(subject)) as impostor:
            assert_bearer_401(impostor.get("/v1/approvals"))
            assert_bearer_401(_decide(impostor, approval["id"]))
            assert_bearer_401(impostor.get("/agui/threads"))
        _nothing_happened(traveller, thread_id, approval)
        # A real manager still sees and decides it: the refusals were about the impostor.
        with demo.client(as_user("boss", roles=["manager"])) as manager:
            assert approval["id"] in _inbox(manager)
            decided = _decide(manager, approval["id"])
            assert decided.status_code == 200, decided.text
            assert decided.json()["continuation"]["resolvedBy"] == "boss"


def test_an_api_key_for_a_reserved_principal_is_refused_by_the_cli(demo: Server) -> None:
    for principal in ("role:manager", "operation:op-1", "key:billing-bot"):
        for extra in ((), ("--exact-principal",)):
            created = keys_cli(demo.keys_file, "create", "--principal", principal, *extra)
            assert created.returncode != 0
            assert created.stdout == ""
            [line] = created.stderr.strip().splitlines()
            assert line.startswith("pausemesh: error: --principal")
            assert "reserved" in line
    assert "role:manager" not in keys_cli(demo.keys_file, "list").stdout


def test_a_hand_written_api_key_for_role_manager_is_refused_at_use(demo: Server) -> None:
    with demo.client(as_user("traveller")) as traveller:
        thread_id, approval = _approval_asked(traveller)
    keys = [new_key(demo.keys_file, "--principal", f"placeholder-{i}") for i in range(2)]
    # An operator edits the file by hand: one key named role:manager in the key namespace,
    # one mapped to it exactly, neither holding the role.
    document = json.loads(demo.keys_file.read_text())
    for record in document["keys"]:
        if record["principal"] == "placeholder-0":
            record["principal"] = "role:manager"
        if record["principal"] == "placeholder-1":
            record.update(principal="role:manager", exact_principal=True)
    temp = demo.keys_file.with_suffix(".edit")
    temp.write_text(json.dumps(document))
    temp.replace(demo.keys_file)

    for key in keys:
        with demo.client(as_key(key)) as impostor:
            assert_bearer_401(impostor.get("/v1/approvals"))
            assert_bearer_401(_decide(impostor, approval["id"]))
    with demo.client(as_user("traveller")) as traveller:
        _nothing_happened(traveller, thread_id, approval)


def test_the_requester_holding_the_role_cannot_approve_their_own_request(demo: Server) -> None:
    with demo.client(as_user("manager-mia", roles=["manager"])) as mia:
        thread_id, approval = _approval_asked(mia)
        # Not in her inbox, and deciding it is refused: she asked.
        assert approval["id"] not in _inbox(mia)
        assert_problem(_decide(mia, approval["id"]), 403, "NOT_AN_APPROVER")
        entry = {
            "interruptId": approval["id"],
            "status": "resolved",
            "payload": {"decision": "approve"},
        }
        refused = post_run(mia, resume_body(thread_id, [entry]))
        assert refused.error_code == "NOT_AN_APPROVER", refused.events
        _nothing_happened(mia, thread_id, approval)
    # A second manager is the second pair of eyes.
    with demo.client(as_user("manager-max", roles=["manager"])) as max_:
        assert approval["id"] in _inbox(max_)
        decided = _decide(max_, approval["id"])
        assert decided.status_code == 200, decided.text
        assert decided.json()["continuation"]["resolvedBy"] == "manager-max"


def test_a_token_subject_cannot_read_the_api_key_principal_of_the_same_name(
    demo: Server,
) -> None:
    key = new_key(demo.keys_file, "--principal", "billing-bot")
    with demo.client(as_key(key)) as bot:
        created = bot.post("/v1/continuations", json={"payload": PAYLOAD})
        assert created.status_code == 201, created.text
        continuation = created.json()["continuation"]
        assert continuation["owner"] == "key:billing-bot"
        path = f"/v1/continuations/{continuation['continuationId']}"
        assert bot.get(path).status_code == 200
    with demo.client(as_user("billing-bot")) as namesake:
        assert_problem(namesake.get(path), 404, "CONTINUATION_NOT_FOUND")
        assert_problem(namesake.get(f"{path}/events"), 404, "CONTINUATION_NOT_FOUND")
    # A token naming the key's namespace is refused outright.
    with demo.client(as_user("key:billing-bot")) as forged:
        assert_bearer_401(forged.get(path))


def test_an_exact_principal_key_shares_the_principal_an_operator_mapped_it_to(
    demo: Server,
) -> None:
    key = new_key(demo.keys_file, "--principal", "alice", "--exact-principal")
    assert "principal=alice " in keys_cli(demo.keys_file, "list").stdout
    with demo.client(as_user("alice")) as alice:
        created = alice.post("/v1/continuations", json={"payload": PAYLOAD})
        assert created.status_code == 201, created.text
    path = f"/v1/continuations/{created.json()['continuation']['continuationId']}"
    with demo.client(as_key(key)) as alices_key:
        assert alices_key.get(path).status_code == 200


@pytest.fixture(name="asker", scope="module")
def asker_fixture(tmp_path_factory: pytest.TempPathFactory, jwks: JwksServer) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("four-eyes-serve")
    args = ["serve", "--database-path", str(folder / "pm.db")]
    agent = ["--agent", "tests.support.four_eyes:ask_a_manager"]
    with ServerProcess([*args, *agent], env=_env(jwks, folder)) as process:
        yield Server(process, folder / "keys.json")


def _ask_manager(client: httpx.Client, text: str) -> tuple[str, str]:
    thread_id = new_thread()
    message = {"id": f"u-{uuid.uuid4()}", "role": "user", "content": text}
    run = post_run(client, run_body(thread_id, f"r-{uuid.uuid4()}", messages=[message]))
    assert run.last["type"] == "RUN_FINISHED", run.events
    [interrupt] = run.interrupts
    return thread_id, interrupt["id"]


def test_allow_requester_lets_a_manager_decide_their_own_request(asker: Server) -> None:
    with asker.client(as_user("mia", roles=["manager"])) as mia:
        _, waived_id = _ask_manager(mia, f"{ALLOW_REQUESTER}: order 3 laptops")
        strict, strict_id = _ask_manager(mia, "order 30 laptops")
        inbox = _inbox(mia)
        assert waived_id in inbox
        assert strict_id not in inbox
        assert_problem(_decide(mia, strict_id), 403, "NOT_AN_APPROVER")
        decided = _decide(mia, waived_id)
        assert decided.status_code == 200, decided.text
        continuation = decided.json()["continuation"]
        assert continuation["resolvedBy"] == "mia"
        assert continuation["allowRequester"] is True
        assert pending_ids(mia, strict) == [strict_id]
    # Allowed or not, the owner without the role is no approver.
    with asker.client(as_user("tom")) as tom:
        _, own_id = _ask_manager(tom, f"{ALLOW_REQUESTER}: order a chair")
        assert_problem(_decide(tom, own_id), 403, "NOT_AN_APPROVER")
