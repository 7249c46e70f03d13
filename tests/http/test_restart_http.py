"""A SIGKILLed server loses nothing it acknowledged: a pending pause resumes after restart."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import pytest

from tests.support.rest import PAYLOAD, assert_problem
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow


def test_a_pending_continuation_survives_sigkill_and_resumes_with_its_token(
    tmp_path: Path,
) -> None:
    server = ServerProcess(["serve", "--database-path", str(tmp_path / "pausemesh.db")])
    try:
        server.start()
        created = httpx.post(server.url("/v1/continuations"), json={"payload": PAYLOAD}).json()
        continuation_id, token = created["continuation"]["continuationId"], created["resumeToken"]
        other = httpx.post(server.url("/v1/continuations"), json={"payload": 1}).json()

        assert server.kill() == -9  # no shutdown hook ran
        server.start()

        url = server.url(f"/v1/continuations/{continuation_id}")
        assert httpx.get(url).json()["continuation"]["status"] == "pending"
        headers = {"authorization": f"PauseMesh {token}", "idempotency-key": "after-crash"}
        resumed = httpx.post(
            f"{url}/resume", json={"payload": {"flight": "PM101"}}, headers=headers
        )
        assert resumed.status_code == 200
        assert resumed.json()["continuation"]["status"] == "resumed"
        # The other pause's token still does not open this one.
        wrong = {"authorization": f"PauseMesh {other['resumeToken']}", "idempotency-key": "x"}
        assert_problem(
            httpx.post(f"{url}/resume", json={"payload": 1}, headers=wrong), 401, "TOKEN_MISMATCH"
        )

        # And the outcome itself is durable across a second crash.
        server.kill()
        server.start()
        replay = httpx.post(f"{url}/resume", json={"payload": {"flight": "PM101"}}, headers=headers)
        assert replay.status_code == 200
        assert replay.content == resumed.content
        # The server logged every transition (level info), and never a token.
        log = server.output()
        assert "continuation.transitioned" in log
        assert f"continuationId={continuation_id}" in log
        assert token not in log
        assert other["resumeToken"] not in log
    finally:
        server.close()


def test_a_run_reported_finished_survives_a_sigkill_right_after(tmp_path: Path) -> None:
    """The run's save and its RUN_FINISHED are committed before the client reads the event,
    whichever thread committed them (the loop's or the writer's: ``INLINE_COMMIT_BUDGET``)."""
    server = ServerProcess(
        [
            "serve",
            "--agent",
            "tests.support.texting_agent:agent",
            "--database-path",
            str(tmp_path / "pausemesh.db"),
        ]
    )
    try:
        server.start()
        for turn in range(3):
            body = {
                "threadId": "t-killed",
                "runId": f"r{turn}",
                "messages": [{"id": f"u{turn}", "role": "user", "content": f"turn {turn}"}],
            }
            with httpx.stream("POST", server.url("/agui"), json=body) as response:
                finished = next(
                    line for line in response.iter_lines() if '"type":"RUN_FINISHED"' in line
                )
                assert server.kill() == -9  # the moment the client read it
            assert f'"runId":"r{turn}"' in finished
            server.start()
            thread = httpx.get(server.url("/agui/threads/t-killed")).json()
            said = [m["content"] for m in thread["messages"]]
            assert said == [t for n in range(turn + 1) for t in (f"turn {n}", f"echo turn {n}")]
    finally:
        server.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_shuts_down_gracefully(tmp_path: Path, sig: signal.Signals) -> None:
    server = ServerProcess(["serve", "--database-path", str(tmp_path / "pausemesh.db")])
    try:
        server.start()
        # uvicorn re-raises the signal after its graceful shutdown; the CLI may exit 130 on ^C.
        assert server.stop(sig=sig) in {0, -sig, 130}
        assert "Application shutdown complete" in server.output()
    finally:
        server.close()
