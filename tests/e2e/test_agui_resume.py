"""Whole-batch resume against a real ``pausemesh demo`` process: refusals, replays, races.

Every refusal leaves the question pending and books nothing; the right answer afterwards
books exactly once, whatever is replayed or raced.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.agui_helpers import (
    QUESTION,
    ask,
    bookings,
    new_thread,
    pending_ids,
    resolved,
    resume_body,
    snapshot,
)
from tests.support.agui import post_run, run_body
from tests.support.rest import assert_problem
from tests.support.server import ServerProcess


@pytest.fixture(name="database", scope="module")
def database_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("agui-resume") / "demo.db"


@pytest.fixture(name="server", scope="module")
def server_fixture(database: Path) -> Iterator[ServerProcess]:
    with ServerProcess(["demo", "--no-browser", "--database-path", str(database)]) as server:
        yield server


@pytest.fixture(name="client")
def client_fixture(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        yield client


def _refused(client: httpx.Client, thread_id: str, body: dict[str, Any], code: str) -> None:
    result = post_run(client, body)
    assert result.types == ["RUN_ERROR"], result.events
    assert result.error_code == code, result.events
    assert result.frames[0].sequence is None  # a refusal is not part of the thread's history


def _still_pending(client: httpx.Client, thread_id: str, interrupt_id: str) -> None:
    assert pending_ids(client, thread_id) == [interrupt_id]
    assert bookings(client, thread_id) == []


def test_the_demo_asks_which_flight_with_a_schema_of_at_least_two_flights(
    client: httpx.Client,
) -> None:
    thread_id = new_thread()
    result = ask(client, thread_id)
    assert result.types[0] == "RUN_STARTED"
    assert result.types[-3:] == ["MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED"]
    assert result.text()  # a short reply was streamed first
    [interrupt] = result.interrupts
    assert interrupt["reason"] == "input_required"
    assert interrupt["message"] == QUESTION
    assert "expiresAt" in interrupt
    schema = interrupt["responseSchema"]
    assert schema["required"] == ["flight"]
    assert schema["properties"]["flight"]["type"] == "string"
    assert len(schema["properties"]["flight"]["enum"]) >= 2
    # Sequences are the thread log's: dense and increasing from 1.
    assert [f.sequence for f in result.frames] == list(range(1, len(result.frames) + 1))
    assert snapshot(client, thread_id)["lastSequence"] == len(result.frames)


@pytest.mark.parametrize(
    ("name", "entries", "code"),
    [
        ("outside the schema", lambda i: [resolved(i, "XX999")], "PAUSEMESH_AGUI_INVALID_PAYLOAD"),
        ("wrong payload type", lambda i: [resolved(i, 7)], "PAUSEMESH_AGUI_INVALID_PAYLOAD"),
        ("empty batch", lambda _: [], "PAUSEMESH_AGUI_RESUME_SET_MISMATCH"),
        (
            "duplicate entries",
            lambda i: [resolved(i), resolved(i)],
            "PAUSEMESH_AGUI_DUPLICATE_INTERRUPT",
        ),
        (
            "unknown interrupt alongside",
            lambda i: [resolved(i), resolved("not-an-interrupt")],
            "PAUSEMESH_AGUI_RESUME_SET_MISMATCH",
        ),
        (
            "resolved without payload",
            lambda i: [{"interruptId": i, "status": "resolved"}],
            "PAUSEMESH_AGUI_INVALID_PAYLOAD",
        ),
        (
            "cancelled with payload",
            lambda i: [{"interruptId": i, "status": "cancelled", "payload": {"flight": "PM101"}}],
            "PAUSEMESH_AGUI_INVALID_ENTRY",
        ),
    ],
)
def test_a_refused_batch_leaves_the_question_pending_and_books_nothing(
    client: httpx.Client, name: str, entries: Any, code: str
) -> None:
    thread_id = new_thread()
    [interrupt] = ask(client, thread_id).interrupts
    _refused(client, thread_id, resume_body(thread_id, entries(interrupt["id"])), code)
    _still_pending(client, thread_id, interrupt["id"])
    # The right answer still works afterwards, exactly once.
    done = post_run(client, resume_body(thread_id, [resolved(interrupt["id"])]))
    assert done.last["type"] == "RUN_FINISHED", (name, done.events)
    assert [b["flight"] for b in bookings(client, thread_id)] == ["PM202"]


def test_a_plain_run_while_the_question_is_open_is_refused(client: httpx.Client) -> None:
    thread_id = new_thread()
    [interrupt] = ask(client, thread_id).interrupts
    message = {"id": "user-again", "role": "user", "content": "Hello?"}
    _refused(
        client,
        thread_id,
        run_body(thread_id, "run-plain", messages=[message]),
        "PAUSEMESH_AGUI_RESUME_REQUIRED",
    )
    _still_pending(client, thread_id, interrupt["id"])


def test_an_expired_question_cannot_be_answered(client: httpx.Client) -> None:
    thread_id = new_thread()
    [interrupt] = ask(client, thread_id, forwardedProps={"questionTtlSeconds": 1}).interrupts
    expires_at = datetime.fromisoformat(interrupt["expiresAt"])
    while datetime.now(UTC) <= expires_at:  # the server shares this machine's clock
        time.sleep(0.1)
    result = post_run(client, resume_body(thread_id, [resolved(interrupt["id"])]))
    assert result.error_code == "PAUSEMESH_AGUI_RESUME_EXPIRED", result.events
    # The server closed the lapsed question: it is no longer shown as pending.
    assert pending_ids(client, thread_id) == []
    # The client that still holds it cancels it (AG-UI: it must), and the agent hears that once.
    cancel = [{"interruptId": interrupt["id"], "status": "cancelled"}]
    cancelled = post_run(client, resume_body(thread_id, cancel))
    assert cancelled.last["type"] == "RUN_FINISHED", cancelled.events
    assert "not book" in cancelled.text()
    assert pending_ids(client, thread_id) == []
    assert bookings(client, thread_id) == []
    again = post_run(client, resume_body(thread_id, cancel))
    assert again.types == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED"]


def test_an_answer_sent_on_another_thread_is_ignored_there(client: httpx.Client) -> None:
    thread_id, other = new_thread(), new_thread()
    [interrupt] = ask(client, thread_id).interrupts
    result = post_run(client, resume_body(other, [resolved(interrupt["id"])]))
    assert result.last["type"] == "RUN_FINISHED"
    assert "outcome" not in result.last
    assert bookings(client, other) == []
    _still_pending(client, thread_id, interrupt["id"])


def test_an_altered_receipt_is_refused(client: httpx.Client, database: Path) -> None:
    thread_id = new_thread()
    [interrupt] = ask(client, thread_id).interrupts
    with sqlite3.connect(database, timeout=10) as conn:
        conn.execute(
            "UPDATE agui_threads SET open_receipt_json ="
            " json_set(open_receipt_json, '$.receipt.runId', 'forged-run') WHERE thread_id = ?",
            (thread_id,),
        )
    _refused(
        client,
        thread_id,
        resume_body(thread_id, [resolved(interrupt["id"])]),
        "PAUSEMESH_AGUI_INVALID_INPUT",
    )
    _still_pending(client, thread_id, interrupt["id"])


def test_the_answer_books_once_and_an_identical_replay_books_nothing_more(
    client: httpx.Client,
) -> None:
    thread_id = new_thread()
    [interrupt] = ask(client, thread_id).interrupts
    body = resume_body(thread_id, [resolved(interrupt["id"], "PM303")], run_id="run-answer")
    first = post_run(client, body)
    assert first.last == {"type": "RUN_FINISHED", "threadId": thread_id, "runId": "run-answer"}
    assert "PM303" in first.text()
    after_first = snapshot(client, thread_id)
    assert after_first["pendingInterrupts"] == []
    [booking] = after_first["state"]["bookings"]
    assert booking["flight"] == "PM303"
    # The same request again (same runId too, as CopilotKit sends): idempotent.
    for _ in range(3):
        again = post_run(client, body)
        assert again.last["type"] == "RUN_FINISHED", again.events
        assert "outcome" not in again.last
        assert again.types == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED"]
    assert snapshot(client, thread_id)["state"]["bookings"] == [booking]
    assert snapshot(client, thread_id)["messages"] == after_first["messages"]


def test_a_different_answer_after_resolution_is_refused(client: httpx.Client) -> None:
    thread_id = new_thread()
    [interrupt] = ask(client, thread_id).interrupts
    post_run(client, resume_body(thread_id, [resolved(interrupt["id"], "PM101")]))
    result = post_run(client, resume_body(thread_id, [resolved(interrupt["id"], "PM202")]))
    assert result.error_code == "PAUSEMESH_AGUI_REPLAY_CONFLICT"
    cancel = post_run(
        client, resume_body(thread_id, [{"interruptId": interrupt["id"], "status": "cancelled"}])
    )
    assert cancel.error_code == "PAUSEMESH_AGUI_REPLAY_CONFLICT"
    assert [b["flight"] for b in bookings(client, thread_id)] == ["PM101"]


def test_a_cancelled_question_books_nothing_and_says_so(client: httpx.Client) -> None:
    thread_id = new_thread()
    [interrupt] = ask(client, thread_id).interrupts
    result = post_run(
        client, resume_body(thread_id, [{"interruptId": interrupt["id"], "status": "cancelled"}])
    )
    assert result.last["type"] == "RUN_FINISHED"
    assert "not book" in result.text()
    assert bookings(client, thread_id) == []
    assert pending_ids(client, thread_id) == []


def test_concurrent_resumes_with_different_answers_book_exactly_once(
    server: ServerProcess,
) -> None:
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        thread_id = new_thread()
        [interrupt] = ask(client, thread_id).interrupts
    flights = ["PM101", "PM202"] * 6

    def answer(flight: str) -> Any:
        with httpx.Client(base_url=server.base_url, timeout=60) as own:
            return post_run(own, resume_body(thread_id, [resolved(interrupt["id"], flight)]))

    with ThreadPoolExecutor(len(flights)) as pool:
        results = list(pool.map(answer, flights))
    winners = [r for r in results if r.last["type"] == "RUN_FINISHED"]
    losers = [r for r in results if r.last["type"] == "RUN_ERROR"]
    assert len(winners) + len(losers) == len(flights)
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        [booking] = bookings(client, thread_id)
    # Several winners are possible only as identical replays of the one booked answer.
    booked_text = [r for r in winners if "Booked" in r.text()]
    assert len(booked_text) == 1
    assert booking["flight"] in booked_text[0].text()
    assert {r.error_code for r in losers} <= {"THREAD_BUSY", "PAUSEMESH_AGUI_REPLAY_CONFLICT"}


def test_thread_snapshot_of_an_unknown_thread_is_a_404_problem(client: httpx.Client) -> None:
    assert_problem(client.get("/agui/threads/no-such-thread"), 404, "THREAD_NOT_FOUND")


def test_malformed_run_input_is_a_4xx_problem_before_any_stream(client: httpx.Client) -> None:
    malformed = client.post(
        "/agui", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert_problem(malformed, 400, "INVALID_RUN_INPUT")
    assert_problem(client.post("/agui", json={"threadId": "t"}), 400, "INVALID_RUN_INPUT")
    bad_status = run_body("t", "r", resume=[{"interruptId": "x", "status": "maybe"}])
    assert_problem(client.post("/agui", json=bad_status), 400, "INVALID_RUN_INPUT")
    listed = client.post(
        "/agui/connect", content=b"[]", headers={"content-type": "application/json"}
    )
    assert_problem(listed, 400, "INVALID_RUN_INPUT")
