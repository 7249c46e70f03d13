"""``pausemesh inspect`` and ``pausemesh stats`` offline against a real SQLite file and a real
PostgreSQL schema that hold a real conversation: an AG-UI run of the demo agent paused on a
question by a real server process, a REST continuation resumed through it, and a ledger
operation. The server is stopped before anything is inspected."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from pausemesh.bootstrap import open_storage
from pausemesh.core.model import ContinuationCreated
from pausemesh.settings import Settings, load_settings
from tests.support.agui import post_run, run_body
from tests.support.postgres import DATABASE_URL, drop_schema, fresh_schema, require_postgres
from tests.support.server import REPO_ROOT, ServerProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

_KEY = "inspect-tests-" + "k" * 32


@dataclass
class Deployment:
    store_args: list[str]
    thread_id: str = ""
    waiting_id: str = ""
    resumed_id: str = ""
    resume_token: str = ""
    operation_id: str = ""
    secrets: tuple[str, ...] = ()

    def cli(self, *args: str, store: list[str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "pausemesh",
                *args,
                *(self.store_args if store is None else store),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO_ROOT,
            env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"},
            check=False,
        )

    def json(self, *args: str) -> dict[str, Any]:
        done = self.cli(*args, "--json")
        assert done.returncode == 0, done.stderr
        self.assert_no_secret(done.stdout + done.stderr)
        loaded: dict[str, Any] = json.loads(done.stdout)
        return loaded

    def assert_no_secret(self, output: str) -> None:
        for secret in self.secrets:
            assert secret not in output


def _settings(store_args: list[str]) -> Settings:
    flags = dict(zip(store_args[::2], store_args[1::2], strict=True))
    return load_settings(
        environ={},
        env_file=None,
        require_key=False,
        overrides={
            "database_path": flags.get("--database-path"),
            "database_url": flags.get("--database-url"),
            "database_schema": flags.get("--database-schema"),
        },
    )


async def _seed_and_read_secrets(deployment: Deployment) -> None:
    """A ledger operation (begun and completed), and the token hashes the store holds."""
    storage = await open_storage(_settings(deployment.store_args))
    try:
        assert storage.operations is not None
        now = datetime.now(UTC)
        begun = await storage.operations.begin(
            "billing", "invoice:A-1", tool="create_invoice", arguments={"order": "A-1"}, now=now
        )
        # Its first attempt's outcome was lost, and it was sent once more.
        await storage.operations.claim_resend(
            begun.record.operation_id, attempt_id=begun.record.attempt_id, number=1, now=now
        )
        await storage.operations.complete(
            begun.record.operation_id,
            attempt_id=begun.record.attempt_id,
            result={"secretBody": "do-not-print-me"},
            now=now,
        )
        deployment.operation_id = begun.record.operation_id
        hashes = []
        for continuation_id in (deployment.waiting_id, deployment.resumed_id):
            first = (await storage.events.load(continuation_id))[0]
            assert isinstance(first, ContinuationCreated)
            hashes.append(first.resume_token_hash)
        deployment.secrets = (*hashes, deployment.resume_token, "do-not-print-me")
    finally:
        await storage.close()


def _converse(deployment: Deployment) -> None:
    agent = ["--agent", "pausemesh.demo.agent:travel_agent"]
    env = {"PAUSEMESH_SECRET_KEY": _KEY}
    with (
        ServerProcess(["serve", *agent, *deployment.store_args], env=env) as server,
        httpx.Client(base_url=server.base_url, timeout=60) as client,
    ):
        deployment.thread_id = f"t-{uuid.uuid4()}"
        message = {"id": "u1", "role": "user", "content": "Lisbon please"}
        asked = post_run(client, run_body(deployment.thread_id, "r1", messages=[message]))
        deployment.waiting_id = asked.interrupts[0]["id"]
        created = client.post("/v1/continuations", json={"payload": {"question": "ok?"}})
        assert created.status_code == 201, created.text
        deployment.resumed_id = created.json()["continuation"]["continuationId"]
        deployment.resume_token = created.json()["resumeToken"]
        resumed = client.post(
            f"/v1/continuations/{deployment.resumed_id}/resume",
            json={"payload": {"answer": "yes"}},
            headers={
                "authorization": f"PauseMesh {deployment.resume_token}",
                "idempotency-key": "k-1",
            },
        )
        assert resumed.status_code == 200, resumed.text


@pytest.fixture(name="deployment", scope="module", params=["sqlite", "postgres"])
def deployment_fixture(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    if request.param == "sqlite":
        path = tmp_path_factory.mktemp("inspect") / "pausemesh.db"
        deployment = Deployment(["--database-path", str(path)])
        _converse(deployment)
        asyncio.run(_seed_and_read_secrets(deployment))
        yield deployment
        return
    asyncio.run(require_postgres())
    schema = fresh_schema("pm_inspect")
    migrate = ["migrate", "--database-url", DATABASE_URL, "--schema", schema]
    subprocess.run(
        [sys.executable, "-m", "pausemesh", *migrate],
        check=True,
        capture_output=True,
        timeout=120,
        cwd=REPO_ROOT,
    )
    deployment = Deployment(["--database-url", DATABASE_URL, "--database-schema", schema])
    try:
        _converse(deployment)
        asyncio.run(_seed_and_read_secrets(deployment))
        yield deployment
    finally:
        asyncio.run(drop_schema(schema))


def test_inspect_thread_shows_the_open_question_without_its_messages(
    deployment: Deployment,
) -> None:
    body = deployment.json("inspect", "thread", deployment.thread_id)
    assert body["threadId"] == deployment.thread_id
    interrupts = body["openInterrupts"]
    assert isinstance(interrupts, list)
    assert [i["continuationId"] for i in interrupts] == [deployment.waiting_id]
    assert all(set(i) == {"continuationId", "expiresAt"} for i in interrupts)
    assert isinstance(body["messages"], int)
    assert body["lease"] is None
    text = deployment.cli("inspect", "thread", deployment.thread_id)
    assert text.returncode == 0, text.stderr
    assert deployment.waiting_id in text.stdout
    assert "Lisbon" not in text.stdout


def test_inspect_continuation_gives_state_and_history_without_the_token_hash(
    deployment: Deployment,
) -> None:
    body = deployment.json("inspect", "continuation", deployment.resumed_id)
    assert body["status"] == "resumed"
    history = body["history"]
    assert isinstance(history, list)
    assert [event["type"] for event in history] == ["continuation.created", "continuation.resumed"]
    assert all("resumeTokenHash" not in event for event in history)
    waiting = deployment.json("inspect", "continuation", deployment.waiting_id)
    assert waiting["status"] == "pending"
    text = deployment.cli("inspect", "continuation", deployment.resumed_id)
    assert text.returncode == 0, text.stderr
    assert "continuation.resumed" in text.stdout
    deployment.assert_no_secret(text.stdout)


def test_inspect_operation_shows_digests_never_the_retained_body(deployment: Deployment) -> None:
    body = deployment.json("inspect", "operation", deployment.operation_id)
    assert body["status"] == "RESPONSE_RETAINED"
    assert body["operationId"] == deployment.operation_id
    assert body["domain"] == "billing"
    assert [(r["step"], r["number"]) for r in body["recoveries"]] == [("RESENT", 1)]
    assert isinstance(body["explanation"], str)
    text = deployment.cli("inspect", "operation", deployment.operation_id)
    assert text.returncode == 0, text.stderr
    deployment.assert_no_secret(text.stdout)


def test_stats_counts_by_state_and_names_the_oldest_waiting_question(
    deployment: Deployment,
) -> None:
    body = deployment.json("stats")
    assert body["continuations"] == {"pending": 1, "resumed": 1, "cancelled": 0, "expired": 0}
    oldest = body["oldestWaiting"]
    assert isinstance(oldest, dict)
    assert oldest["continuationId"] == deployment.waiting_id
    assert body["threads"] == 1
    assert body["threadsWaiting"] == 1
    assert body["operations"] == 1
    assert body["operationsWithoutOutcome"] == 0
    text = deployment.cli("stats")
    assert text.returncode == 0, text.stderr
    assert deployment.waiting_id in text.stdout


@pytest.mark.parametrize("kind", ["thread", "continuation", "operation"])
def test_an_unknown_id_is_a_clear_message_and_exit_1(deployment: Deployment, kind: str) -> None:
    done = deployment.cli("inspect", kind, "no-such-id")
    assert done.returncode == 1
    assert f"no {kind} 'no-such-id'" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_missing_sqlite_file_is_exit_2_and_is_not_created(tmp_path: Path) -> None:
    path = tmp_path / "absent.db"
    done = Deployment(["--database-path", str(path)]).cli("stats")
    assert done.returncode == 2
    assert "MIGRATION_REQUIRED" in done.stderr
    assert "Traceback" not in done.stderr
    assert not path.exists()


async def test_an_unmigrated_postgres_schema_is_exit_2_and_stays_empty() -> None:
    await require_postgres()
    schema = fresh_schema("pm_inspect_empty")
    try:
        done = await asyncio.to_thread(
            Deployment(["--database-url", DATABASE_URL, "--database-schema", schema]).cli,
            "inspect",
            "thread",
            "t-1",
        )
        assert done.returncode == 2
        assert "MIGRATION_REQUIRED" in done.stderr
        assert "Traceback" not in done.stderr
    finally:
        await drop_schema(schema)
