"""A pause's timers against a real ``pausemesh serve`` on SQLite and on PostgreSQL: its default outcome at the
deadline, its reminder and its escalation.

``tests.support.approval_agent`` asks ``role:manager`` with ``on_expiry="deny"`` and a short
deadline. Nobody answers: at the deadline the sweeper decides the pause with the schema's
denying choice, recorded as decided by ``expiry``, and the owner's thread continues with it
(the agent says the booking was not made), visible to a tab that reads the thread; the
webhook says ``pause.expired`` with the decision; the manager's late decision and the pause's
decision link are refused as too late.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from standardwebhooks.webhooks import Webhook

from pausemesh.stores.postgres.migrate import migrate
from tests.e2e.agui_helpers import new_thread, snapshot
from tests.support.agui import post_run, run_body
from tests.support.postgres import DATABASE_URL, drop_schema, fresh_schema, require_postgres
from tests.support.push_receiver import Delivery, Receiver
from tests.support.rest import assert_problem
from tests.support.server import REPO_ROOT, ServerProcess

pytestmark = pytest.mark.slow

SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
DENIAL = "The manager did not answer in time; the booking was not made."


@pytest.fixture(
    name="server",
    scope="module",
    params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
)
async def server_fixture(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Served]:
    folder = tmp_path_factory.mktemp("default-outcomes")
    store = ["--database-path", str(folder / "d.db")]
    schema_env: dict[str, str] = {}
    if request.param == "postgres":
        await require_postgres()
        schema = fresh_schema("pm_timers")
        await migrate(DATABASE_URL, schema=schema)
        store = ["--database-url", DATABASE_URL]
        schema_env = {"PAUSEMESH_DATABASE_SCHEMA": schema}
    try:
        with served(folder, store, schema_env) as running:
            yield running
    finally:
        if schema_env:
            await drop_schema(schema_env["PAUSEMESH_DATABASE_SCHEMA"])


@contextlib.contextmanager
def served(folder: Path, store: list[str], schema_env: dict[str, str]) -> Iterator[Served]:
    with Receiver() as receiver:
        hook = {
            "id": "ops",
            "url": receiver.url,
            "events": [
                "pause.created",
                "pause.expired",
                "pause.decided",
                "pause.reminder",
                "pause.escalated",
            ],
            "secrets": [SECRET],
            "filters": {"tags": ["travel"]},
        }
        (folder / "webhooks.json").write_text(json.dumps({"webhooks": [hook]}))
        env = {
            "PAUSEMESH_SECRET_KEY": secrets.token_urlsafe(48),
            "PAUSEMESH_SWEEP_INTERVAL_SECONDS": "0.1",
            "PAUSEMESH_WEBHOOKS_FILE": str(folder / "webhooks.json"),
            "PAUSEMESH_DECISION_LINKS": "1",
            "PAUSEMESH_A2A_PUSH_ALLOW": "loopback",
            "PAUSEMESH_A2A_PUSH_POLL_SECONDS": "0.1",
            "PAUSEMESH_LOG_LEVEL": "warning",
            **schema_env,
        }
        args = [
            "serve",
            "--agent",
            "tests.support.approval_agent:agent",
            "--principal-resolver",
            "tests.support.agui:header_identity",
            *store,
        ]
        with ServerProcess(args, env=env) as server:
            yield server, receiver, store, schema_env


# The server, its webhook receiver, and the store flags and environment `pausemesh inspect` needs.
Served = tuple[ServerProcess, Receiver, list[str], dict[str, str]]


def client(server: ServerProcess, principal: str, roles: str = "") -> httpx.Client:
    headers = {"X-Principal": principal, "X-Roles": roles}
    return httpx.Client(base_url=server.base_url, timeout=30, headers=headers)


def texts(state: dict[str, Any]) -> list[str]:
    return [m.get("content") for m in state["messages"] if m.get("role") == "assistant"]


def of_pause(pause_id: str, kind: str) -> Any:
    def match(delivery: Delivery) -> bool:
        body = json.loads(delivery.body)
        return bool(body["type"] == kind and body["data"]["pauseId"] == pause_id)

    return match


def test_an_unanswered_approval_is_denied_at_its_deadline_and_the_thread_continues(
    server: Served,
) -> None:
    process, receiver, _, _ = server
    thread_id = new_thread()
    message = {"id": f"user-{uuid.uuid4()}", "role": "user", "content": "book, expires 2"}
    with client(process, "alice") as alice, client(process, "boss", "manager") as boss:
        run = post_run(alice, run_body(thread_id, f"run-{uuid.uuid4()}", messages=[message]))
        [pause] = run.interrupts
        [created] = receiver.wait_for(1, where=of_pause(pause["id"], "pause.created"))
        link = json.loads(created.body)["data"]["links"][0]["url"]

        # Nobody decides. The thread continues by itself once the deadline has passed.
        deadline = time.monotonic() + 60
        while DENIAL not in texts(snapshot(alice, thread_id)):
            assert time.monotonic() < deadline, snapshot(alice, thread_id)
            time.sleep(0.05)

        [expired] = receiver.wait_for(1, where=of_pause(pause["id"], "pause.expired"))
        data = Webhook(SECRET).verify(expired.body, expired.headers)["data"]
        assert data["decision"]["resolvedBy"] == "expiry"
        assert data["decision"]["answer"] == {"decision": "reject"}
        envelope = alice.get(f"/v1/continuations/{pause['id']}").json()["continuation"]
        assert (envelope["status"], envelope["resolvedBy"]) == ("resumed", "expiry")
        # Too late for the manager, by the inbox or by the link.
        late = boss.post(
            f"/v1/approvals/{pause['id']}",
            json={"payload": {"decision": "approve"}},
            headers={"idempotency-key": "late"},
        )
        assert_problem(late, 410, "CONTINUATION_EXPIRED")
        assert httpx.get(link, timeout=30).status_code == 410
        assert not receiver.requests or all(
            json.loads(d.body)["type"] != "pause.decided" for d in receiver.requests
        )


def test_a_reminder_and_an_escalation_fire_once_and_the_escalated_approver_decides(
    server: Served,
) -> None:
    process, receiver, store, schema_env = server
    thread_id = new_thread()
    text = "book, expires 600 remind 0.5 escalate 1"
    message = {"id": f"user-{uuid.uuid4()}", "role": "user", "content": text}
    with client(process, "alice") as alice, client(process, "carol") as carol:
        run = post_run(alice, run_body(thread_id, f"run-{uuid.uuid4()}", messages=[message]))
        [pause] = run.interrupts
        [escalated] = receiver.wait_for(1, where=of_pause(pause["id"], "pause.escalated"))
        body = Webhook(SECRET).verify(escalated.body, escalated.headers)["data"]
        assert body["approvers"] == ["role:manager", "carol"]
        # Carol was given her own link with the escalation.
        assert [link["approver"] for link in body["links"]] == ["role:manager", "carol"]
        reminders = receiver.wait_for(1, where=of_pause(pause["id"], "pause.reminder"))
        assert len({d.headers["webhook-id"] for d in reminders}) == 1

        # The history says so, and `pausemesh inspect` shows both timers as fired.
        history = alice.get(f"/v1/continuations/{pause['id']}/events").json()["events"]
        kinds = [e["type"] for e in history]
        assert kinds == ["continuation.created", "continuation.reminded", "continuation.escalated"]
        command = [
            "inspect",
            "continuation",
            pause["id"],
            "--json",
            *store,
        ]
        inspected = subprocess.run(
            [sys.executable, "-m", "pausemesh", *command],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
            cwd=REPO_ROOT,
            env={**os.environ, **schema_env},
        )
        timers = json.loads(inspected.stdout)["timers"]
        assert timers["reminder"]["firedAt"]
        assert timers["escalation"]["firedAt"]
        assert timers["escalation"]["to"] == ["carol"]

        # Carol, escalated to, finds it in her inbox and decides; the thread continues.
        inbox = carol.get("/v1/approvals").json()["approvals"]
        assert pause["id"] in [a["continuationId"] for a in inbox]
        decided = carol.post(
            f"/v1/approvals/{pause['id']}",
            json={"payload": {"decision": "approve"}},
            headers={"idempotency-key": "carol-1"},
        )
        assert decided.status_code == 200, decided.text
        deadline = time.monotonic() + 60
        while "carol said approve." not in texts(snapshot(alice, thread_id)):
            assert time.monotonic() < deadline, snapshot(alice, thread_id)
            time.sleep(0.05)
