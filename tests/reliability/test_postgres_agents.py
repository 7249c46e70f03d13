"""Framework agents on PostgreSQL replicas: asked on one, answered on another after a SIGKILL.

Two ``pausemesh serve --agent`` processes share one database (a fresh schema, migrated) and one
server key. The pydantic-ai history rides in the pause; the LangGraph checkpoints live in the
same schema. The payment side effect logs every real refund to a file, so "once" is counted
where it happens.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from pausemesh.stores.postgres.migrate import migrate
from tests.support.agui import post_run, run_body
from tests.support.postgres import DATABASE_URL, drop_schema, fresh_schema, require_postgres
from tests.support.refund_agents import refund_log_lines
from tests.support.server import ServerProcess

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

AGENTS = {
    "pydantic-ai": "tests.support.refund_agents:pydantic_agent",
    "langgraph": "tests.support.refund_agents:langgraph_agent",
}


@pytest.fixture(name="schema")
async def schema_fixture() -> AsyncIterator[str]:
    await require_postgres()
    schema = fresh_schema("pm_agents")
    await migrate(DATABASE_URL, schema=schema)
    try:
        yield schema
    finally:
        await drop_schema(schema)


@pytest.mark.parametrize("framework", sorted(AGENTS))
def test_a_question_asked_on_one_replica_is_approved_on_another_once(
    framework: str, schema: str, tmp_path: Path
) -> None:
    log = tmp_path / "refunds.jsonl"
    env = {
        "PAUSEMESH_DATABASE_SCHEMA": schema,
        "PAUSEMESH_SECRET_KEY": secrets.token_urlsafe(48),
        "PAUSEMESH_TEST_REFUND_LOG": str(log),
    }
    args = ["serve", "--agent", AGENTS[framework], "--database-url", DATABASE_URL]
    first, second = ServerProcess(args, env=env), ServerProcess(args, env=env)
    thread_id = f"thread-{uuid.uuid4()}"
    message = {"id": "u1", "role": "user", "content": "Please refund order A-1001"}
    try:
        first.start()
        second.start()
        with httpx.Client(base_url=first.base_url, timeout=30) as client:
            asked = post_run(client, run_body(thread_id, "run-ask", messages=[message]))
        [interrupt] = asked.interrupts
        first.kill()  # the replica that asked is gone
        entry = {
            "interruptId": interrupt["id"],
            "status": "resolved",
            "payload": {"approved": True},
        }
        body = run_body(thread_id, "run-answer", resume=[entry])
        with httpx.Client(base_url=second.base_url, timeout=30) as client:
            restored = post_run(client, run_body(thread_id, "run-reload"), path="/agui/connect")
            assert restored.interrupts == [interrupt]
            done = post_run(client, body)
            assert done.last["type"] == "RUN_FINISHED", done.events
            assert done.text().startswith("Done: refund ")
            again = post_run(client, body)  # a retry of the same answer
            assert again.last["type"] == "RUN_FINISHED"
            state = client.get(f"/agui/threads/{thread_id}").json()["state"]
        [refund] = state["refunds"]
        assert refund_log_lines(log) == [refund]
    finally:
        first.close()
        second.close()
