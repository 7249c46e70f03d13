"""``pausemesh conformance agui URL`` against real servers, one process per target.

PauseMesh's demo (on SQLite and on PostgreSQL) and the two ``serve --agent`` examples pass
every rule (exit 0).
pydantic-ai's own AG-UI app (``bench/pydantic_ai_agui_app.py``, the scripted offline model of
``examples/pydantic_ai_refund.py``) is pinned: which rules it breaks, which do not apply, and
exit 1; ``docs/agui.md`` ("Conformance") records the same as a fact.
"""

from __future__ import annotations

import asyncio
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pausemesh.cli.main import main
from pausemesh.conformance import RULES
from pausemesh.stores.postgres.migrate import migrate
from tests.support.postgres import DATABASE_URL, drop_schema, fresh_schema, require_postgres
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

REFUND = "Please refund order A-1001"


class UvicornApp(ServerProcess):
    """``python -m uvicorn <module:app>`` (pydantic-ai's own app) instead of the CLI."""

    def command(self) -> list[str]:
        (app,) = self.args
        return [
            sys.executable,
            "-m",
            "uvicorn",
            app,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--no-access-log",
            "--log-level",
            "warning",
        ]


def conformance(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, str], str]:
    """Run the command in this process: its exit code, each rule's line, the whole output."""
    capsys.readouterr()
    try:
        code = main(["conformance", "agui", *args])
    except SystemExit as stop:
        code = int(stop.code or 0)
    output = capsys.readouterr().out
    lines = output.splitlines()
    verdicts = {line.split()[1].rstrip(":"): line for line in lines[:-1]}
    return code, verdicts, output


def assert_every_rule_passes(capsys: pytest.CaptureFixture[str], url: str, *args: str) -> None:
    code, verdicts, output = conformance(capsys, url, *args)
    assert list(verdicts) == list(RULES), output
    assert all(line.startswith("PASS ") for line in verdicts.values()), output
    assert output.splitlines()[-1] == f"{len(RULES)} passed, 0 failed, 0 not applicable"
    assert code == 0, output


def _demo_store(store: str, tmp_path: Path) -> tuple[list[str], str | None]:
    """The demo's store flags, and the PostgreSQL schema to drop afterwards."""
    if store == "sqlite":
        return ["--database-path", str(tmp_path / "demo.db")], None
    asyncio.run(require_postgres())
    schema = fresh_schema("pm_conformance")
    asyncio.run(migrate(DATABASE_URL, schema=schema))
    return ["--database-url", DATABASE_URL, "--database-schema", schema], schema


# PostgreSQL needs the key every replica shares (a SQLite demo makes its own file).
_KEY_ENV = {"PAUSEMESH_SECRET_KEY": secrets.token_urlsafe(48)}


@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_the_demo_passes_every_rule_of_the_interrupt_contract_and_resumability(
    store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flags, schema = _demo_store(store, tmp_path)
    try:
        with ServerProcess(["demo", "--no-browser", *flags], env=_KEY_ENV) as server:
            # The cheapest flight: a dearer one would wait for a manager's approval.
            args = ["--message", "A flight to Lisbon, please", "--answer", '{"flight": "PM101"}']
            assert_every_rule_passes(capsys, server.url("/agui"), *args)
    finally:
        if schema is not None:
            asyncio.run(drop_schema(schema))


@pytest.fixture(name="scenario_file")
def scenario_file_fixture(tmp_path: Path) -> Path:
    scenario = tmp_path / "refund.json"
    scenario.write_text('{"message": "Please refund order A-1001", "answer": {"approved": true}}')
    return scenario


@pytest.mark.parametrize(
    "agent", ["examples.pydantic_ai_refund:agent", "examples.langgraph_refund:agent"]
)
def test_the_served_agent_examples_pass_every_rule(
    agent: str, tmp_path: Path, scenario_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["serve", "--agent", agent, "--database-path", str(tmp_path / "agent.db")]
    with ServerProcess(args) as server:
        assert_every_rule_passes(capsys, server.url("/agui"), "--scenario", str(scenario_file))


def test_an_agent_asking_two_questions_at_once_refuses_an_answer_to_one_of_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["serve", "--agent", "tests.support.cohort_agent:agent"]
    with ServerProcess([*args, "--database-path", str(tmp_path / "cohort.db")]) as server:
        code, verdicts, output = conformance(capsys, server.url("/agui"), "--message", "Go")
    assert "a resume answering 1 of 2 interrupts: refused" in verdicts["partial-cohort-refused"]
    assert all(line.startswith("PASS ") for line in verdicts.values()), output
    assert code == 0, output


@pytest.fixture(name="pydantic_ai_app", scope="module")
def pydantic_ai_app_fixture() -> Iterator[UvicornApp]:
    with UvicornApp(["bench.pydantic_ai_agui_app:app"]) as server:
        yield server


def test_pydantic_ais_own_agui_app_breaks_three_rules_and_offers_no_resumability(
    pydantic_ai_app: UvicornApp, capsys: pytest.CaptureFixture[str]
) -> None:
    code, verdicts, output = conformance(capsys, pydantic_ai_app.url("/agui"), "--message", REFUND)
    assert list(verdicts) == list(RULES), output
    statuses = {rule: line.split()[0] for rule, line in verdicts.items()}
    assert statuses == {
        # It sends no snapshot before the interrupt, and keeps nothing between runs: no
        # restore route, no frame ids.
        "interrupt-snapshots": "FAIL",
        "restore-by-connect": "N/A",
        "reconnect-last-event-id": "N/A",
        # A new message while the approval is open runs the agent and ends as success.
        "pending-blocks-new-input": "FAIL",
        "partial-cohort-refused": "PASS",
        "schema-breaking-payload-refused": "PASS",
        "resume-same-thread": "PASS",
        # The same approval sent again runs the approved tool again.
        "identical-replay-safe": "FAIL",
        "stale-resume-refused": "PASS",
    }, output
    assert "the open question was dropped" in verdicts["pending-blocks-new-input"]
    assert "ran the agent again (TOOL_CALL_RESULT" in verdicts["identical-replay-safe"]
    assert "answered 404" in verdicts["restore-by-connect"]
    assert output.splitlines()[-1] == "4 passed, 3 failed, 2 not applicable"
    assert code == 1


def test_a_run_that_asks_nothing_is_a_usage_error_naming_what_was_seen(
    pydantic_ai_app: UvicornApp, capsys: pytest.CaptureFixture[str]
) -> None:
    # With no order id the scripted model asks in text, with no interrupt.
    code = main(["conformance", "agui", pydantic_ai_app.url("/agui"), "--message", "hi"])
    assert code == 2
    error = capsys.readouterr().err
    assert "did not end with an interrupt (RUN_FINISHED success" in error
