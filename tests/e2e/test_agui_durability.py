"""Durable threads against real server processes: crash and restart, reconnect, replay and tail,
and threads scoped to their principal."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.agui_helpers import (
    QUESTION,
    ask,
    bookings,
    new_thread,
    resolved,
    resume_body,
    snapshot,
)
from tests.support.agui import Frame, StreamChecker, post_run, read_frames, run_body
from tests.support.rest import assert_problem
from tests.support.server import ServerProcess


def _demo(database: Path, *extra: str) -> ServerProcess:
    return ServerProcess(["demo", "--no-browser", "--database-path", str(database), *extra])


def test_after_sigkill_a_fresh_client_reconnects_answers_and_books_exactly_once(
    tmp_path: Path,
) -> None:
    server = _demo(tmp_path / "demo.db").start()
    try:
        thread_id = new_thread()
        with httpx.Client(base_url=server.base_url, timeout=30) as client:
            asked = ask(client, thread_id)
        [interrupt] = asked.interrupts
        server.kill()  # SIGKILL between the question and the answer
        server.start()
        with httpx.Client(base_url=server.base_url, timeout=30) as client:
            # A fresh client knows only the thread id: connect restores everything.
            restored = post_run(client, run_body(thread_id, "run-reload"), path="/agui/connect")
            assert restored.types == [
                "RUN_STARTED",
                "MESSAGES_SNAPSHOT",
                "STATE_SNAPSHOT",
                "RUN_FINISHED",
            ]
            assert restored.interrupts == [interrupt]
            assert restored.interrupts[0]["message"] == QUESTION
            asked_snapshot = next(e for e in asked.events if e["type"] == "MESSAGES_SNAPSHOT")
            assert restored.events[1]["messages"] == asked_snapshot["messages"]
            answer = resume_body(thread_id, [resolved(interrupt["id"], "PM101")])
            done = post_run(client, answer)
            assert done.last["type"] == "RUN_FINISHED"
            assert "PM101" in done.text()
            # A client that retries (it never saw the answer arrive) books nothing more.
            post_run(client, answer)
            assert [b["flight"] for b in bookings(client, thread_id)] == ["PM101"]
            assert snapshot(client, thread_id)["pendingInterrupts"] == []
    finally:
        server.close()


@pytest.fixture(name="server", scope="module")
def server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    database = tmp_path_factory.mktemp("agui-durability") / "demo.db"
    resolver = "tests.support.agui:header_principal"
    with _demo(database, "--principal-resolver", resolver) as server:
        yield server


ALICE = {"X-Principal": "alice"}
BOB = {"X-Principal": "bob"}


@pytest.fixture(name="client")
def client_fixture(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=30, headers=ALICE) as client:
        yield client


def _tail(
    server: ServerProcess, thread_id: str, headers: dict[str, str], out: queue.Queue[Frame]
) -> None:
    with (
        httpx.Client(base_url=server.base_url, timeout=httpx.Timeout(30, read=60)) as client,
        client.stream("GET", f"/agui/threads/{thread_id}/events", headers=headers) as response,
    ):
        assert response.status_code == 200
        for frame in read_frames(response.iter_lines()):
            out.put(frame)
            if frame.event.get("runId") == "run-live" and frame.event["type"] == "RUN_FINISHED":
                return


def test_last_event_id_replays_exactly_the_later_events_then_tails_live_ones(
    server: ServerProcess, client: httpx.Client
) -> None:
    thread_id = new_thread()
    asked = ask(client, thread_id)
    cut = 5
    frames: queue.Queue[Frame] = queue.Queue()
    reader = threading.Thread(
        target=_tail, args=(server, thread_id, {**ALICE, "Last-Event-ID": str(cut)}, frames)
    )
    reader.start()
    replayed = [frames.get(timeout=30) for _ in range(len(asked.frames) - cut)]
    assert [(f.sequence, f.data) for f in replayed] == [
        (f.sequence, f.data) for f in asked.frames[cut:]
    ]
    # Live: a run on the thread while the tail is open arrives on the tail, in order.
    [interrupt] = asked.interrupts
    live = post_run(client, resume_body(thread_id, [resolved(interrupt["id"])], run_id="run-live"))
    reader.join(60)
    assert not reader.is_alive()
    tailed = [frames.get_nowait() for _ in range(frames.qsize())]
    assert [(f.sequence, f.data) for f in tailed] == [(f.sequence, f.data) for f in live.frames]
    # The whole log reads back as one valid multi-run stream.
    checker = StreamChecker()
    for frame in [*asked.frames, *tailed]:
        checker.check(frame.event)


def test_the_after_query_parameter_is_a_replay_cursor_too(
    server: ServerProcess, client: httpx.Client
) -> None:
    thread_id = new_thread()
    asked = ask(client, thread_id)
    last = asked.frames[-1].sequence
    assert last is not None
    with client.stream("GET", f"/agui/threads/{thread_id}/events?after={last - 2}") as response:
        lines = response.iter_lines()
        got = [next(read_frames(lines)), next(read_frames(lines))]
    assert [f.data for f in got] == [f.data for f in asked.frames[-2:]]
    bad = client.get(f"/agui/threads/{thread_id}/events", headers={"Last-Event-ID": "abc"})
    assert_problem(bad, 400, "INVALID_CURSOR")


def test_threads_are_scoped_to_their_principal(server: ServerProcess, client: httpx.Client) -> None:
    thread_id = new_thread()
    [interrupt] = ask(client, thread_id).interrupts
    with httpx.Client(base_url=server.base_url, timeout=30, headers=BOB) as bob:
        assert_problem(bob.get(f"/agui/threads/{thread_id}"), 404, "THREAD_NOT_FOUND")
        assert_problem(bob.get(f"/agui/threads/{thread_id}/events"), 404, "THREAD_NOT_FOUND")
        steal = bob.post("/agui", json=resume_body(thread_id, [resolved(interrupt["id"])]))
        assert_problem(steal, 404, "THREAD_NOT_FOUND")
        # Connect on someone else's thread looks like a new, empty thread.
        peek = post_run(bob, run_body(thread_id, "run-peek"), path="/agui/connect")
        assert peek.events[1]["messages"] == []
        assert "outcome" not in peek.last
    anonymous = httpx.post(server.url("/agui"), json=run_body(thread_id, "r"))
    assert_problem(anonymous, 401, "UNAUTHENTICATED")
    assert [i["id"] for i in snapshot(client, thread_id, headers=ALICE)["pendingInterrupts"]] == [
        interrupt["id"]
    ]
    assert bookings(client, thread_id) == []


def test_a_client_added_tool_message_and_a_reused_run_id_are_tolerated(
    client: httpx.Client,
) -> None:
    thread_id = new_thread()
    asked = ask(client, thread_id)
    [interrupt] = asked.interrupts
    run_id = asked.last["runId"]
    history = next(e for e in asked.events if e["type"] == "MESSAGES_SNAPSHOT")["messages"]
    synthetic = {
        "id": "tool-synthetic",
        "role": "tool",
        "toolCallId": "call-unrelated",
        "content": '{"status":"resolved"}',
    }
    body = resume_body(thread_id, [resolved(interrupt["id"])], run_id=run_id)
    body["messages"] = [*history, synthetic]
    done = post_run(client, body)
    assert done.events[0]["runId"] == run_id
    assert done.last["type"] == "RUN_FINISHED"
    assert len(bookings(client, thread_id)) == 1
