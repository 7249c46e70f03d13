"""Expiry that shows, against a real ``pausemesh demo``: a 1-second question expires and the live
tail, ``/agui/connect``, the snapshot and the official ``@ag-ui/client`` all agree it is gone."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.e2e.agui_helpers import ask, bookings, new_thread, pending_ids, resume_body
from tests.support.agui import (
    NODE,
    NODE_DIR,
    Frame,
    StreamChecker,
    needs_node,
    post_run,
    read_frames,
)
from tests.support.agui import run_body as run_input
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow


@pytest.fixture(name="server", scope="module")
def server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    database = tmp_path_factory.mktemp("agui-expiry") / "demo.db"
    args = ["demo", "--no-browser", "--database-path", str(database)]
    with ServerProcess(args, env={"PAUSEMESH_SWEEP_INTERVAL_SECONDS": "0.2"}) as server:
        yield server


def _tail_until_expiry(
    server: ServerProcess, thread_id: str, after: int, out: queue.Queue[Frame]
) -> None:
    with (
        httpx.Client(base_url=server.base_url, timeout=httpx.Timeout(30, read=60)) as client,
        client.stream("GET", f"/agui/threads/{thread_id}/events?after={after}") as response,
    ):
        assert response.status_code == 200
        for frame in read_frames(response.iter_lines()):
            out.put(frame)
            if frame.event["type"] == "RUN_FINISHED":
                return


def test_an_expired_question_shows_on_the_tail_connect_and_snapshot_without_a_read(
    server: ServerProcess,
) -> None:
    thread_id = new_thread()
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        asked = ask(client, thread_id, forwardedProps={"questionTtlSeconds": 1})
        [interrupt] = asked.interrupts
        last = asked.frames[-1].sequence
        assert last is not None
        frames: queue.Queue[Frame] = queue.Queue()
        reader = threading.Thread(target=_tail_until_expiry, args=(server, thread_id, last, frames))
        reader.start()
        reader.join(60)  # the sweeper closes it; nobody reads the thread meanwhile
        assert not reader.is_alive()
        tailed = [frames.get_nowait() for _ in range(frames.qsize())]
        assert [f.event["type"] for f in tailed] == ["RUN_STARTED", "CUSTOM", "RUN_FINISHED"]
        assert [f.sequence for f in tailed] == [last + 1, last + 2, last + 3]
        custom = tailed[1].event
        assert custom["name"] == "pausemesh.interrupts_expired"
        assert custom["value"] == {
            "interruptIds": [interrupt["id"]],
            "statuses": {interrupt["id"]: "expired"},
        }
        assert "outcome" not in tailed[2].event  # success: a client drops its pending interrupts
        checker = StreamChecker()
        for frame in [*asked.frames, *tailed]:
            checker.check(frame.event)

        assert pending_ids(client, thread_id) == []
        restored = post_run(client, run_input(thread_id, "run-reload"), path="/agui/connect")
        assert "outcome" not in restored.last
        assert restored.interrupts == []

        # The client that still holds the question cancels it: the agent hears it once.
        cancel = [{"interruptId": interrupt["id"], "status": "cancelled"}]
        cancelled = post_run(client, resume_body(thread_id, cancel))
        assert "not book" in cancelled.text()
        again = post_run(client, resume_body(thread_id, cancel))
        assert again.types == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED"]
        assert bookings(client, thread_id) == []


def _pending_counts(client: httpx.Client) -> dict[str, int]:
    response = client.get("/agui/threads", params={"limit": 100})
    assert response.status_code == 200, response.text
    return {t["threadId"]: t["pendingInterrupts"] for t in response.json()["threads"]}


def test_the_thread_list_counts_no_pending_interrupt_once_the_question_expired(
    server: ServerProcess,
) -> None:
    lasting, expiring = new_thread(), new_thread()
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        ask(client, lasting)  # the server's default deadline: still pending at the end
        asked = ask(client, expiring, forwardedProps={"questionTtlSeconds": 1})
        last = asked.frames[-1].sequence
        assert last is not None
        # Wait for the sweeper's run on the thread (its RUN_FINISHED), not for a clock.
        frames: queue.Queue[Frame] = queue.Queue()
        _tail_until_expiry(server, expiring, last, frames)
        assert frames.get_nowait().event["type"] == "RUN_STARTED"
        # The run's record (its count) is saved just after its last event is logged.
        deadline = time.monotonic() + 30  # liveness only: the counts below are the test
        while (counts := _pending_counts(client))[expiring] != 0 and time.monotonic() < deadline:
            time.sleep(0.05)

    assert counts[expiring] == 0
    assert counts[lasting] == 1


@needs_node
def test_the_official_client_ends_with_no_pending_interrupt_after_expiry(
    server: ServerProcess,
) -> None:
    assert NODE is not None
    thread_id = new_thread()
    completed = subprocess.run(
        [NODE, str(NODE_DIR / "expiry.mjs"), server.base_url, thread_id],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.stdout, completed.stderr
    report: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    assert completed.returncode == 0, report.get("error", completed.stderr)
    assert len(report["askedPending"]) == 1
    assert [e["type"] for e in report["tailed"]] == ["RUN_STARTED", "CUSTOM", "RUN_FINISHED"]
    assert report["pendingAfterTail"] == []
    assert report["pendingAfterReload"] == []
    assert report["warnings"] == [], report["warnings"]


def test_a_plain_message_after_expiry_starts_over_without_a_resume(
    server: ServerProcess,
) -> None:
    thread_id = new_thread()
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        ask(client, thread_id, forwardedProps={"questionTtlSeconds": 1})
        for _ in range(600):
            if not pending_ids(client, thread_id):
                break
            threading.Event().wait(0.1)
        again = ask(client, thread_id)
        assert len(again.interrupts) == 1
