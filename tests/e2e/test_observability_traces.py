"""Traces of one interrupt and its resume, recorded by the OpenTelemetry SDK in a real
``pausemesh demo`` process (``tests.support.traced_server``): the span tree, the ids that join
it to the browser's trace and to the store, and nothing secret in any attribute."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.agui_helpers import QUESTION, new_thread, resolved, resume_body
from tests.support.agui import post_run, run_body
from tests.support.traced_server import TracedServer

pytestmark = pytest.mark.slow

USER_TEXT = "Book me a flight to Lisbon"
FORBIDDEN_KEYS = ("token", "payload", "hash", "message", "content", "delta", "secret")


@pytest.fixture(name="data_dir", scope="module")
def data_dir_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("traces")


@pytest.fixture(name="server", scope="module")
def server_fixture(data_dir: Path) -> Iterator[TracedServer]:
    server = TracedServer(
        ["demo", "--no-browser", "--database-path", str(data_dir / "pausemesh.db")],
        env={"PAUSEMESH_DATA_DIR": str(data_dir)},
        spans_path=data_dir / "spans.jsonl",
    )
    with server:
        yield server


def _traceparent() -> tuple[str, str, str]:
    trace_id, parent_id = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    return trace_id, parent_id, f"00-{trace_id}-{parent_id}-01"


def _one(spans: list[dict[str, Any]], name: str, **where: Any) -> dict[str, Any]:
    found = [
        s
        for s in spans
        if s["name"] == name and all(s["attributes"].get(k) == v for k, v in where.items())
    ]
    assert len(found) == 1, (name, where, [s["name"] for s in spans])
    return found[0]


def _children(spans: list[dict[str, Any]], parent: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in spans if s["parentSpanId"] == parent["spanId"]]


def _descendants(spans: list[dict[str, Any]], root: dict[str, Any]) -> list[dict[str, Any]]:
    out, todo = [], [root]
    while todo:
        node = todo.pop()
        kids = _children(spans, node)
        out += kids
        todo += kids
    return out


def _secrets(data_dir: Path) -> list[str]:
    """What must never show in a span: every stored token hash, and the payloads' text."""
    with sqlite3.connect(f"file:{data_dir / 'pausemesh.db'}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT event_json FROM continuation_events").fetchall()
    hashes = [json.loads(r[0]).get("resumeTokenHash") for r in rows]
    found = [h for h in hashes if h]
    assert found, "no continuation was stored"
    return [*found, USER_TEXT, QUESTION, "Lisbon", "PM202"]


def test_an_interrupt_and_its_resume_form_two_traces_joined_by_ids(
    server: TracedServer, data_dir: Path
) -> None:
    thread_id = new_thread()
    ask_trace, ask_parent, ask_header = _traceparent()
    resume_trace, resume_parent, resume_header = _traceparent()
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        message = {"id": f"user-{uuid.uuid4()}", "role": "user", "content": USER_TEXT}
        asked = post_run(
            client,
            run_body(thread_id, f"run-{uuid.uuid4()}", messages=[message]),
            headers={"traceparent": ask_header},
        )
        [interrupt] = asked.interrupts
        done = post_run(
            client,
            resume_body(thread_id, [resolved(interrupt["id"])]),
            headers={"traceparent": resume_header},
        )
    assert done.last["type"] == "RUN_FINISHED"
    # A request's span ends just after its last byte is sent: wait for both to be written.
    spans = server.wait_for_spans(
        lambda found: (
            {ask_trace, resume_trace} <= {s["traceId"] for s in found if s["kind"] == "SERVER"}
        )
    )

    # The ask: the browser's trace continues in the server (its span is the parent).
    http_ask = next(s for s in spans if s["name"] == "POST /agui" and s["traceId"] == ask_trace)
    assert http_ask["parentSpanId"] == ask_parent
    assert http_ask["kind"] == "SERVER"
    assert http_ask["attributes"]["http.route"] == "/agui"
    run = _one(
        spans, "agui.run", **{"pausemesh.thread_id": thread_id, "pausemesh.outcome": "interrupt"}
    )
    assert run["parentSpanId"] == http_ask["spanId"]
    assert run["traceId"] == ask_trace
    created = _one(spans, "continuation.create", **{"pausemesh.continuation_id": interrupt["id"]})
    assert created["attributes"]["pausemesh.correlation_id"] == thread_id
    assert created["attributes"]["pausemesh.keyed"] is True
    assert created in _descendants(spans, run)
    commits = [s for s in _descendants(spans, run) if s["name"] == "store.commit"]
    assert commits, "the run's writes commit under its span"
    assert all(c["attributes"]["pausemesh.group_size"] >= 1 for c in commits)
    assert all(c["attributes"]["pausemesh.store"] == "sqlite" for c in commits)

    # The resume: validated, then resumed exactly once, inside the run of the second trace.
    http_resume = next(
        s for s in spans if s["name"] == "POST /agui" and s["traceId"] == resume_trace
    )
    assert http_resume["parentSpanId"] == resume_parent
    run2 = _one(
        spans, "agui.run", **{"pausemesh.thread_id": thread_id, "pausemesh.outcome": "success"}
    )
    assert run2["parentSpanId"] == http_resume["spanId"]
    validate = _one(spans, "agui.resume.validate", **{"pausemesh.thread_id": thread_id})
    assert validate["parentSpanId"] == run2["spanId"]
    assert validate["attributes"]["pausemesh.cohort_size"] == 1
    assert validate["attributes"]["pausemesh.run_id"] == run2["attributes"]["pausemesh.run_id"]
    resumed = _one(spans, "continuation.resume", **{"pausemesh.continuation_id": interrupt["id"]})
    assert resumed["parentSpanId"] == run2["spanId"]
    assert resumed["attributes"]["pausemesh.version"] == 2
    assert resumed["attributes"]["pausemesh.trusted"] is True
    assert resumed["status"] == "UNSET"
    booking = _one(spans, "operation.run_once", **{"pausemesh.decision": "EXECUTE"})
    assert booking in _descendants(spans, run2)

    # Nothing secret anywhere: no token, hash, payload or message text, in keys or values,
    # and no span event (an exception event would carry its text).
    secrets = _secrets(data_dir)
    for span in spans:
        assert span["events"] == [], span
        for key, value in span["attributes"].items():
            assert not any(word in key.lower() for word in FORBIDDEN_KEYS), (span["name"], key)
            for secret in secrets:
                assert secret not in str(value), (span["name"], key)
