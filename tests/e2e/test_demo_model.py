"""``pausemesh demo`` with ``PAUSEMESH_EXAMPLE_MODEL``: real processes.

``test`` (pydantic-ai's ``TestModel``, no network) serves runs through the pydantic-ai
integration, whatever it makes of the tools; without the setting the demo never loads an
agent framework; a model pydantic-ai cannot use, or the extra missing, stops the start in one
line. (The scripted conversation, with its pauses and bookings, is
tests/unit/test_demo_model_agent.py.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest

from tests.support.agui import post_run, run_body
from tests.support.loaded_frameworks import AGENT_MARKER
from tests.support.server import REPO_ROOT, ServerProcess, free_port

pytestmark = pytest.mark.slow

_MODEL = "PAUSEMESH_EXAMPLE_MODEL"


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAUSEMESH_")}
    env.update(extra)
    return env


def _demo_args(tmp_path: Path, *more: str) -> list[str]:
    return ["demo", "--no-browser", "--database-path", str(tmp_path / "demo.db"), *more]


def _said(user: str) -> dict[str, str]:
    return {"id": f"user-{uuid.uuid4()}", "role": "user", "content": user}


def test_the_demo_on_pydantic_ais_test_model_serves_runs(tmp_path: Path) -> None:
    with (
        ServerProcess(_demo_args(tmp_path), env={_MODEL: "test"}) as server,
        httpx.Client(base_url=server.base_url, timeout=60) as client,
    ):
        server.wait_for_output("the demo agent runs on the pydantic-ai model test")
        thread = f"thread-{uuid.uuid4()}"
        first = post_run(client, run_body(thread, "r1", messages=[_said("A flight to Lisbon")]))
        # TestModel calls every tool with made-up arguments: neither books, nothing crashes.
        assert first.last["type"] == "RUN_FINISHED", first.events
        called = {e["toolCallName"] for e in first.events if e["type"] == "TOOL_CALL_START"}
        assert called == {"search_flights", "book_flight"}
        results = [e["content"] for e in first.events if e["type"] == "TOOL_CALL_RESULT"]
        assert any(r.startswith("Not booked") for r in results), results
        # A second turn rebuilds the model's history from the thread.
        second = post_run(client, run_body(thread, "r2", messages=[_said("Thanks!")]))
        assert second.last["type"] == "RUN_FINISHED", second.events
        state = client.get(f"/agui/threads/{thread}").json()["state"]
        assert state == {"bookings": []}
        assert client.get("/").status_code == 200
        assert "Traceback" not in server.output()


class _WatchedDemo(ServerProcess):
    """The demo run through ``tests.support.loaded_frameworks``: on SIGTERM it reports what
    it loaded."""

    def command(self) -> list[str]:
        return [sys.executable, "-m", "tests.support.loaded_frameworks", *super().command()[3:]]


def test_the_demo_without_the_setting_loads_no_agent_framework(tmp_path: Path) -> None:
    server = _WatchedDemo(_demo_args(tmp_path))
    with server, httpx.Client(base_url=server.base_url, timeout=60) as client:
        run = post_run(client, run_body("t", "r1", messages=[_said("Porto")]))
        assert run.last["type"] == "RUN_FINISHED", run.events
        assert run.interrupts, run.events  # the rule-based agent asked which flight
        assert server.stop() == 0
        output = server.output()
    [report] = [line for line in output.splitlines() if line.startswith(AGENT_MARKER)]
    assert json.loads(report.removeprefix(AGENT_MARKER)) == [], output


def _start(tmp_path: Path, env: dict[str, str], *prefix: str) -> subprocess.CompletedProcess[str]:
    command = [*prefix] if prefix else [sys.executable, "-m", "pausemesh"]
    args = _demo_args(tmp_path, "--port", str(free_port()), "--env-file", os.devnull)
    return subprocess.run(
        [*command, *args],
        cwd=REPO_ROOT,
        env=_clean_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    output = done.stdout + done.stderr
    assert "Traceback" not in output, output
    [line] = done.stderr.strip().splitlines()
    assert done.returncode == 2, output
    return line


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_model_pydantic_ai_does_not_know_stops_the_demo_in_one_line(
    tmp_path: Path, workers: str
) -> None:
    done = _start(tmp_path, {_MODEL: "no-such-provider:model", "PAUSEMESH_WORKERS": workers})
    line = _one_line(done)
    assert line == (
        "pausemesh: error: PAUSEMESH_EXAMPLE_MODEL='no-such-provider:model': pydantic-ai"
        " knows no such model (e.g. openai:gpt-4o-mini, or test)"
    )
    assert not (tmp_path / "demo.db").exists()


def test_a_model_whose_provider_package_is_missing_stops_the_demo_in_one_line(
    tmp_path: Path,
) -> None:
    # No provider package for this one in the test environment (pydantic-ai-slim alone).
    done = _start(tmp_path, {_MODEL: "anthropic:claude-3-5-haiku-latest"})
    line = _one_line(done)
    assert line.startswith("pausemesh: error: PAUSEMESH_EXAMPLE_MODEL='anthropic:"), line
    assert "install" in line or "API_KEY" in line, line


def test_the_setting_without_the_pydantic_ai_extra_stops_the_demo_in_one_line(
    tmp_path: Path,
) -> None:
    # pydantic-ai uninstalled, as Python sees it: its import fails (None in sys.modules).
    missing = (
        "import sys; sys.modules['pydantic_ai'] = None;"
        " from pausemesh.cli.main import main; sys.exit(main(sys.argv[1:]))"
    )
    done = _start(tmp_path, {_MODEL: "test"}, sys.executable, "-c", missing)
    assert _one_line(done) == (
        "pausemesh: error: PAUSEMESH_EXAMPLE_MODEL='test' needs pydantic-ai: pip install"
        " 'pausemesh[pydantic-ai]' (or unset it for the rule-based demo agent)"
    )
