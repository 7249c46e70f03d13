"""Four-eyes approvals against a real ``pausemesh demo`` process (SQLite).

The demo offers a flight above its approval threshold (PM404); choosing it makes the agent ask
a manager (``approvers=[Approver.role("manager")]``). Without an identity provider on loopback
the demo knows two people by the cookie ``pausemesh_demo_user``: the traveller (the default)
and the manager (role ``manager``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.agui_helpers import ask, new_thread, pending_ids, resolved, resume_body, snapshot
from tests.support.agui import RunResult, post_run
from tests.support.rest import assert_problem
from tests.support.server import ServerProcess

COOKIE = "pausemesh_demo_user"


@pytest.fixture(name="server", scope="module")
def server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    database: Path = tmp_path_factory.mktemp("approvals") / "demo.db"
    with ServerProcess(["demo", "--no-browser", "--database-path", str(database)]) as server:
        yield server


def _client(server: ServerProcess, person: str | None) -> httpx.Client:
    cookies = {} if person is None else {COOKIE: person}
    return httpx.Client(base_url=server.base_url, timeout=30, cookies=cookies)


@pytest.fixture(name="traveller")
def traveller_fixture(server: ServerProcess) -> Iterator[httpx.Client]:
    # No cookie at all: the traveller, as a first visit is.
    with _client(server, None) as client:
        yield client


@pytest.fixture(name="manager")
def manager_fixture(server: ServerProcess) -> Iterator[httpx.Client]:
    with _client(server, "manager") as client:
        yield client


def _ask_for_approval(traveller: httpx.Client) -> tuple[str, dict[str, Any], RunResult]:
    """The traveller picks PM404; the agent asks a manager. Returns the thread, the approval
    interrupt and the run."""
    thread_id = new_thread()
    question = ask(traveller, thread_id).interrupts[0]
    run = post_run(traveller, resume_body(thread_id, [resolved(question["id"], "PM404")]))
    assert run.last["type"] == "RUN_FINISHED", run.events
    assert "asked a manager to approve it" in run.text()
    [approval] = run.interrupts
    return thread_id, approval, run


def _decide(client: httpx.Client, interrupt_id: str, decision: str, key: str) -> httpx.Response:
    return client.post(
        f"/v1/approvals/{interrupt_id}",
        json={"payload": {"decision": decision}},
        headers={"idempotency-key": key},
    )


def test_a_dear_flight_waits_for_a_manager_and_shows_the_exact_terms(
    traveller: httpx.Client,
) -> None:
    thread_id, approval, _ = _ask_for_approval(traveller)
    assert approval["reason"] == "approval_required"
    assert approval["metadata"]["pausemesh"]["approvers"] == ["role:manager"]
    for term in ("PM404", "Lisbon", "09:30", "11:35", "business", "640 EUR", "traveller"):
        assert term in approval["message"]
    assert approval["responseSchema"]["properties"]["decision"]["enum"] == ["approve", "reject"]
    assert pending_ids(traveller, thread_id) == [approval["id"]]
    assert snapshot(traveller, thread_id)["state"]["bookings"] == []


def test_the_traveller_cannot_approve_their_own_request(traveller: httpx.Client) -> None:
    thread_id, approval, _ = _ask_for_approval(traveller)
    # Not in the traveller's inbox, and deciding it there is refused: they asked (they know
    # the pause exists, so the refusal says why instead of 404).
    assert traveller.get("/v1/approvals").json()["approvals"] == []
    response = _decide(traveller, approval["id"], "approve", "self-approve")
    assert_problem(response, 403, "NOT_AN_APPROVER")
    # The AG-UI resume of it by its owner is refused, and nothing changes.
    entry = {
        "interruptId": approval["id"],
        "status": "resolved",
        "payload": {"decision": "approve"},
    }
    refused = post_run(traveller, resume_body(thread_id, [entry]))
    assert refused.error_code == "NOT_AN_APPROVER", refused.events
    assert pending_ids(traveller, thread_id) == [approval["id"]]
    assert snapshot(traveller, thread_id)["state"]["bookings"] == []


def test_the_manager_sees_the_request_in_the_inbox_and_decides_it(
    traveller: httpx.Client, manager: httpx.Client
) -> None:
    thread_id, approval, _ = _ask_for_approval(traveller)
    inbox = manager.get("/v1/approvals", params={"limit": 200})
    assert inbox.status_code == 200, inbox.text
    [item] = [a for a in inbox.json()["approvals"] if a["continuationId"] == approval["id"]]
    assert item["threadId"] == thread_id
    assert item["threadTitle"] == "Flight to Lisbon"  # the demo agent names the trip
    assert item["askedBy"] == "traveller"
    assert item["approvers"] == ["role:manager"]
    assert item["message"] == approval["message"]
    assert item["responseSchema"] == approval["responseSchema"]
    assert item["expiresAt"]
    # The payload is checked against the pause's schema first.
    bad = manager.post(
        f"/v1/approvals/{approval['id']}",
        json={"payload": {"decision": "maybe"}},
        headers={"idempotency-key": "bad"},
    )
    assert_problem(bad, 400, "INVALID_PAYLOAD")
    missing_key = manager.post(f"/v1/approvals/{approval['id']}", json={"payload": {}})
    assert missing_key.status_code == 400
    decided = _decide(manager, approval["id"], "approve", f"approve-{uuid.uuid4()}")
    assert decided.status_code == 200, decided.text
    continuation = decided.json()["continuation"]
    assert continuation["status"] == "resumed"
    assert continuation["resolvedBy"] == "manager"
    listed = manager.get("/v1/approvals", params={"limit": 200}).json()["approvals"]
    assert approval["id"] not in [a["continuationId"] for a in listed]


def test_an_unknown_demo_person_is_not_authenticated(server: ServerProcess) -> None:
    with _client(server, "mallory") as stranger:
        assert_problem(stranger.get("/v1/approvals"), 401, "UNAUTHENTICATED")


def test_the_inbox_pages_without_gaps_or_duplicates(
    traveller: httpx.Client, manager: httpx.Client
) -> None:
    asked = {_ask_for_approval(traveller)[1]["id"] for _ in range(3)}
    seen: list[str] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 2}
        if cursor is not None:
            params["cursor"] = cursor
        page = manager.get("/v1/approvals", params=params).json()
        seen += [a["continuationId"] for a in page["approvals"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen))
    assert asked <= set(seen)
