"""Who may decide a four-eyes pause, over HTTP against a real ``pausemesh demo`` process on
SQLite with a principal resolver that gives roles (``X-Principal``, ``X-Roles``).

The demo asks ``role:manager`` to approve a flight above its threshold (PM404). Alice (the
owner), a manager and Mallory (neither owner nor approver) try to decide it: only the manager
can; the others are refused as ``docs/http-api.md`` ("Approvals") says, and nothing changes.
"""

from __future__ import annotations

import hashlib
import secrets
import sqlite3
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from pausemesh.core.tokens import KeyedTokenIssuer
from tests.e2e.agui_helpers import ask, new_thread, pending_ids, resolved, resume_body, snapshot
from tests.support.agui import post_run
from tests.support.rest import assert_problem
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

_RESOLVER = "tests.support.agui:header_identity"


@dataclass
class Demo:
    server: ServerProcess
    secret: str
    database: Path

    def client(self, principal: str, roles: str = "") -> httpx.Client:
        headers = {"X-Principal": principal, "X-Roles": roles}
        return httpx.Client(base_url=self.server.base_url, timeout=30, headers=headers)

    def token(self, continuation_id: str) -> str:
        """The pause's resume token, derived from the server key as its issuer does (what an
        e-mail link to the owner would hold)."""
        with sqlite3.connect(self.database) as conn:
            [text] = conn.execute(
                "SELECT event_json FROM continuation_events"
                " WHERE continuation_id = ? AND version = 1",
                (continuation_id,),
            ).fetchone()
        created: dict[str, Any] = msgspec.json.decode(text)
        material = self.secret.encode()
        key_id = "k" + hashlib.sha256(material).hexdigest()[:12]
        issuer = KeyedTokenIssuer({key_id: material}, key_id)
        return issuer.derive(continuation_id, key_id, created["tokenNonce"])


@pytest.fixture(name="demo", scope="module")
def demo_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    folder = tmp_path_factory.mktemp("approvals-http")
    secret = secrets.token_urlsafe(48)
    database = folder / "demo.db"
    args = ["demo", "--no-browser", "--database-path", str(database)]
    env = {
        "PAUSEMESH_SECRET_KEY": secret,
        "PAUSEMESH_DEMO_AIRLINE_PATH": str(folder / "airline.db"),
        "PAUSEMESH_LOG_LEVEL": "warning",
    }
    with ServerProcess([*args, "--principal-resolver", _RESOLVER], env=env) as server:
        yield Demo(server=server, secret=secret, database=database)


@pytest.fixture(name="alice")
def alice_fixture(demo: Demo) -> Iterator[httpx.Client]:
    with demo.client("alice") as client:
        yield client


@pytest.fixture(name="manager")
def manager_fixture(demo: Demo) -> Iterator[httpx.Client]:
    with demo.client("boss", "manager") as client:
        yield client


@pytest.fixture(name="mallory")
def mallory_fixture(demo: Demo) -> Iterator[httpx.Client]:
    with demo.client("mallory", "clerk") as client:
        yield client


def _approval_asked(alice: httpx.Client) -> tuple[str, dict[str, Any]]:
    """Alice picks PM404; the demo asks a manager. Returns the thread and the interrupt."""
    thread_id = new_thread()
    question = ask(alice, thread_id).interrupts[0]
    run = post_run(alice, resume_body(thread_id, [resolved(question["id"], "PM404")]))
    assert run.last["type"] == "RUN_FINISHED", run.events
    [approval] = run.interrupts
    assert approval["metadata"]["pausemesh"]["approvers"] == ["role:manager"]
    return thread_id, approval


def _decide(client: httpx.Client, continuation_id: str, key: str) -> httpx.Response:
    return client.post(
        f"/v1/approvals/{continuation_id}",
        json={"payload": {"decision": "approve"}},
        headers={"idempotency-key": key},
    )


def _nothing_happened(alice: httpx.Client, thread_id: str, approval: dict[str, Any]) -> None:
    assert pending_ids(alice, thread_id) == [approval["id"]]
    assert snapshot(alice, thread_id)["state"]["bookings"] == []


def test_a_third_party_cannot_see_or_decide_the_approval(
    demo: Demo, alice: httpx.Client, manager: httpx.Client, mallory: httpx.Client
) -> None:
    thread_id, approval = _approval_asked(alice)

    listed = mallory.get("/v1/approvals", params={"limit": 200})
    assert listed.status_code == 200, listed.text
    assert approval["id"] not in [a["continuationId"] for a in listed.json()["approvals"]]
    assert_problem(_decide(mallory, approval["id"], "mallory-1"), 404, "CONTINUATION_NOT_FOUND")
    # The pause's own token does not help someone else either: not their continuation.
    with_token = mallory.post(
        f"/v1/continuations/{approval['id']}/resume",
        json={"payload": {"decision": "approve"}},
        headers={
            "PauseMesh-Token": demo.token(approval["id"]),
            "idempotency-key": "mallory-2",
        },
    )
    assert_problem(with_token, 404, "CONTINUATION_NOT_FOUND")
    # Nor does the thread: it does not exist for Mallory.
    assert_problem(mallory.get(f"/agui/threads/{thread_id}"), 404, "THREAD_NOT_FOUND")
    _nothing_happened(alice, thread_id, approval)

    # The same request from the approver is decided: the refusals were about who asked.
    decided = _decide(manager, approval["id"], f"boss-{uuid.uuid4()}")
    assert decided.status_code == 200, decided.text
    assert decided.json()["continuation"]["resolvedBy"] == "boss"


def test_the_owners_token_cannot_resume_an_approval_pause_but_may_withdraw_it(
    demo: Demo, alice: httpx.Client, manager: httpx.Client
) -> None:
    thread_id, approval = _approval_asked(alice)
    token = demo.token(approval["id"])

    resumed = alice.post(
        f"/v1/continuations/{approval['id']}/resume",
        json={"payload": {"decision": "approve"}},
        headers={"PauseMesh-Token": token, "idempotency-key": f"alice-{uuid.uuid4()}"},
    )

    assert_problem(resumed, 403, "NOT_AN_APPROVER")
    _nothing_happened(alice, thread_id, approval)
    envelope = alice.get(f"/v1/continuations/{approval['id']}")
    assert envelope.status_code == 200, envelope.text
    assert envelope.json()["continuation"]["status"] == "pending"
    # Still in the manager's inbox: the refused resume consumed nothing.
    inbox = manager.get("/v1/approvals", params={"limit": 200}).json()["approvals"]
    assert approval["id"] in [a["continuationId"] for a in inbox]

    # The owner may withdraw the request; then nobody can decide it.
    withdrawn = alice.post(
        f"/v1/continuations/{approval['id']}/cancel",
        json={"reason": "changed my mind"},
        headers={"PauseMesh-Token": token},
    )
    assert withdrawn.status_code == 200, withdrawn.text
    assert withdrawn.json()["continuation"]["status"] == "cancelled"
    inbox = manager.get("/v1/approvals", params={"limit": 200}).json()["approvals"]
    assert approval["id"] not in [a["continuationId"] for a in inbox]
    late = _decide(manager, approval["id"], f"boss-{uuid.uuid4()}")
    assert_problem(late, 409, "CONTINUATION_CANCELLED")
