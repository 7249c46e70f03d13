"""A scripted demo session (REST, AG-UI, MCP, A2A) against a real ``pausemesh demo`` process
with ``PAUSEMESH_METRICS=1`` and ``PAUSEMESH_LOG_FORMAT=json``: ``/metrics`` parses with the
official Prometheus parser and counts what happened; every log line is one JSON object and no
line carries a token, a token hash or a payload; the Grafana dashboard queries only metrics
that exist."""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import Message, Part, Role, SendMessageRequest, Task, TaskState
from google.protobuf.json_format import MessageToDict, ParseDict  # type: ignore[import-untyped]
from mcp_types import CallToolResult, InputRequiredResult
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.agui_helpers import QUESTION, new_thread, resolved, resume_body
from tests.support.agui import RunResult, post_run, read_frames, run_body
from tests.support.protocol_clients import flight_answer, tool_round
from tests.support.server import REPO_ROOT, ServerProcess

pytestmark = pytest.mark.slow

USER_TEXT = "Book me a flight to Lisbon please"
REST_MESSAGE = "Approve the refund of order 4711?"
DASHBOARD = REPO_ROOT / "docs" / "grafana" / "pausemesh.json"


@dataclass
class Session:
    """What the script did, to compare with what the server counted and logged."""

    secrets: list[str] = field(default_factory=list)
    busy_refusals: int = 0
    waiting_left: int = 0


@pytest.fixture(name="data_dir", scope="module")
def data_dir_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("observed-session")


@pytest.fixture(name="server", scope="module")
def server_fixture(data_dir: Path) -> Iterator[ServerProcess]:
    env = {
        "PAUSEMESH_DATA_DIR": str(data_dir),
        "PAUSEMESH_METRICS": "1",
        "PAUSEMESH_LOG_FORMAT": "json",
        # The airline answers slowly, so a second run can arrive while the first books.
        "PAUSEMESH_DEMO_AIRLINE_LATENCY_SECONDS": "2",
    }
    args = ["demo", "--no-browser", "--database-path", str(data_dir / "pausemesh.db")]
    with ServerProcess(args, env=env) as server:
        yield server


def _rest(client: httpx.Client, session: Session) -> None:
    created = client.post(
        "/v1/continuations", json={"payload": {"kind": "input", "message": REST_MESSAGE}}
    )
    assert created.status_code == 201, created.text
    body = created.json()
    cid, token = body["continuation"]["continuationId"], body["resumeToken"]
    session.secrets.append(token)
    headers = {"authorization": f"PauseMesh {token}", "idempotency-key": "k1"}
    answer = {"payload": {"approved": "yes-refund-4711"}}
    resumed = client.post(f"/v1/continuations/{cid}/resume", json=answer, headers=headers)
    assert resumed.status_code == 200, resumed.text
    again = client.post(
        f"/v1/continuations/{cid}/resume",
        json=answer,
        headers={**headers, "idempotency-key": "k2"},
    )
    assert again.json()["code"] == "TOKEN_ALREADY_USED"
    # One question left waiting, with its secret in the query string of a read.
    waiting = client.post(
        "/v1/continuations", json={"payload": {"kind": "input", "message": REST_MESSAGE}}
    ).json()
    session.secrets.append(waiting["resumeToken"])
    session.waiting_left += 1
    read = client.get(
        f"/v1/continuations/{waiting['continuation']['continuationId']}",
        params={"secret": waiting["resumeToken"]},
    )
    assert read.status_code == 200


def _agui(client: httpx.Client, session: Session) -> None:
    thread_id = new_thread()
    message = {"id": f"user-{uuid.uuid4()}", "role": "user", "content": USER_TEXT}
    asked = post_run(client, run_body(thread_id, f"run-{uuid.uuid4()}", messages=[message]))
    [interrupt] = asked.interrupts
    assert interrupt["message"] == QUESTION
    # The resume books at the (slow) airline; a second run while it holds the thread is busy.
    started = threading.Event()
    results: list[RunResult] = []

    def resume() -> None:
        body = resume_body(thread_id, [resolved(interrupt["id"])])
        with client.stream("POST", "/agui", json=body) as response:
            lines = response.iter_lines()
            frames = []
            for frame in read_frames(lines):
                frames.append(frame)
                started.set()
            results.append(RunResult(frames))

    worker = threading.Thread(target=resume)
    worker.start()
    assert started.wait(30)
    busy = post_run(client, run_body(thread_id, f"run-{uuid.uuid4()}"))
    worker.join(60)
    assert busy.error_code == "THREAD_BUSY", busy.events
    session.busy_refusals += 1
    [done] = results
    assert done.last["type"] == "RUN_FINISHED", done.events


async def _mcp(server: ServerProcess) -> None:
    first = await tool_round(server.url("/mcp"), "book_flight", {"destination": "Lisbon"})
    assert isinstance(first, InputRequiredResult)
    done = await tool_round(
        server.url("/mcp"),
        "book_flight",
        {"destination": "Lisbon"},
        state=first.request_state,
        responses=flight_answer("PM202"),
    )
    assert isinstance(done, CallToolResult)
    assert not done.is_error


async def _a2a(server: ServerProcess) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        config = ClientConfig(
            httpx_client=http, streaming=False, supported_protocol_bindings=["JSONRPC"]
        )
        client = await create_client(server.url("/a2a"), client_config=config)
        try:
            ask = Message(
                message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text="Oslo")]
            )
            task = await _send(client, ask)
            assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            reply: Message = ParseDict(
                {
                    "messageId": str(uuid.uuid4()),
                    "role": "ROLE_USER",
                    "taskId": task.id,
                    "parts": [{"data": {"flight": "PM303"}}],
                },
                Message(),
            )
            done = await _send(client, reply)
            assert done.status.state == TaskState.TASK_STATE_COMPLETED, MessageToDict(done)
        finally:
            await client.close()


async def _send(client: Any, message: Message) -> Task:
    task: Task | None = None
    seen = []
    async for response in client.send_message(SendMessageRequest(message=message)):
        seen.append(MessageToDict(response))
        if response.HasField("task"):
            task = response.task
    assert task is not None, seen
    return task


@pytest.fixture(name="session", scope="module")
async def session_fixture(server: ServerProcess) -> Session:
    session = Session()
    with httpx.Client(base_url=server.base_url, timeout=60) as client:
        _rest(client, session)
        _agui(client, session)
    await _mcp(server)
    await _a2a(server)
    return session


def _samples(server: ServerProcess) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = httpx.get(server.url("/metrics"), timeout=30)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            out[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return out


def _value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples[name, tuple(sorted(labels.items()))]


def test_metrics_count_what_the_session_did(server: ServerProcess, session: Session) -> None:
    samples = _samples(server)

    # AG-UI: the question, then its resume (the busy run never started).
    assert _value(samples, "pausemesh_runs_started_total") == 2
    assert _value(samples, "pausemesh_runs_finished_total", outcome="interrupt") == 1
    assert _value(samples, "pausemesh_runs_finished_total", outcome="success") == 1
    assert _value(samples, "pausemesh_runs_finished_total", outcome="error") == 0
    assert _value(samples, "pausemesh_thread_busy_total") == session.busy_refusals == 1
    # REST 2, AG-UI 1, MCP 1, A2A 1; resumed: REST, AG-UI, MCP, A2A once each.
    assert _value(samples, "pausemesh_continuations_created_total") == 5
    assert _value(samples, "pausemesh_resumes_total", code="OK") == 4
    assert _value(samples, "pausemesh_resumes_total", code="TOKEN_ALREADY_USED") == 1
    assert _value(samples, "pausemesh_interrupts_waiting") == session.waiting_left == 1
    # Three bookings (AG-UI, MCP, A2A), each dispatched once through the ledger.
    assert _value(samples, "pausemesh_operation_decisions_total", decision="EXECUTE") == 3
    assert _value(samples, "pausemesh_expiries_total", by="sweeper") == 0
    assert _value(samples, "pausemesh_store_commit_seconds_count", store="sqlite") > 0
    assert _value(samples, "pausemesh_store_commit_group_size_count", store="sqlite") > 0
    # One process: every committed group took its file's write turn, after no wait to speak of.
    assert _value(samples, "pausemesh_store_write_turn_wait_seconds_count") == _value(
        samples, "pausemesh_store_commit_seconds_count", store="sqlite"
    )
    for route in ("run", "connect", "tail"):
        assert _value(samples, "pausemesh_sse_streams_open", route=route) == 0
    assert _value(samples, "pausemesh_rate_limited_total", code="RATE_LIMITED") == 0
    # Bounded labels only: never a principal, thread or continuation id.
    for _, labels in samples:
        for key, value in labels:
            assert key not in {"principal", "thread_id", "continuation_id", "thread"}
            assert not re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-.*", value), (key, value)


def test_the_grafana_dashboard_queries_only_metrics_that_exist(
    server: ServerProcess, session: Session
) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    expressions = [
        target["expr"]
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
        if "expr" in target
    ]
    assert expressions
    queried = {name for expr in expressions for name in re.findall(r"pausemesh_[a-z_]+", expr)}
    exposed = {name for name, _ in _samples(server)}
    assert queried, expressions
    assert queried <= exposed, sorted(queried - exposed)


def _log_lines(server: ServerProcess) -> list[dict[str, Any]]:
    lines = [line for line in server.output().splitlines() if line.strip()]
    assert lines
    parsed = []
    for line in lines:
        value = json.loads(line)  # every line is one JSON object
        assert isinstance(value, dict), line
        assert {"time", "level", "logger", "message"} <= value.keys(), line
        parsed.append(value)
    return parsed


def _token_hashes(data_dir: Path) -> list[str]:
    with sqlite3.connect(f"file:{data_dir / 'pausemesh.db'}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT event_json FROM continuation_events").fetchall()
    hashes = [json.loads(r[0]).get("resumeTokenHash") for r in rows]
    return [h for h in hashes if h]


def test_json_logs_parse_and_carry_no_token_hash_or_payload(
    server: ServerProcess, session: Session, data_dir: Path
) -> None:
    httpx.get(server.url("/healthz"), timeout=10)
    logs = _log_lines(server)
    hashes = _token_hashes(data_dir)
    assert len(hashes) == 5
    forbidden = [
        *session.secrets,
        *hashes,
        USER_TEXT,
        QUESTION,
        REST_MESSAGE,
        "yes-refund-4711",
        "PM202",
        "PM303",
        "Lisbon",
        "Oslo",
    ]
    text = server.output()
    for secret in forbidden:
        assert secret not in text, secret

    access = [line for line in logs if line["logger"] == "pausemesh.access"]
    routes = {line["route"] for line in access}
    assert {
        "/v1/continuations",
        "/v1/continuations/{continuation_id}/resume",
        "/agui",
        "/mcp",
        "/a2a",
    } <= routes, sorted(routes)
    for line in access:
        assert {"method", "status", "durationMs", "bytes", "requestId"} <= line.keys(), line
        assert "?" not in line["route"]
    busy = [line for line in access if line["route"] == "/agui"]
    assert len(busy) == 3  # the question, its resume and the busy run
    # Continuation events carry their ids and the request that caused them.
    created = [line for line in logs if line["message"] == "continuation.created"]
    assert len(created) == 5
    assert all("continuationId" in line and "requestId" in line for line in created)
