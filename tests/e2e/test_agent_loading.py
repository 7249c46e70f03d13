"""``pausemesh serve --agent`` / ``PAUSEMESH_AGENT``: what it loads, and what it refuses at start.

Real processes: a refused agent is a start-up error (exit 2) that names what was found; an
accepted one serves AG-UI next to the REST API. The framework extras stay out of the core.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest
from asgi_lifespan import LifespanManager
from examples.langgraph_refund import RefundState
from examples.langgraph_refund import agent as graph
from examples.pydantic_ai_refund import agent as pydantic_agent
from examples.pydantic_ai_refund import support_agent
from langgraph.graph import StateGraph
from starlette.applications import Starlette

from pausemesh.core.errors import AgentLoadError
from pausemesh.integrations.agents import AgentDatabase, as_agent, load_agent
from pausemesh.integrations.langgraph import LangGraphAgent
from pausemesh.integrations.pydantic_ai import PydanticAIAgent
from pausemesh.settings import Settings
from pausemesh.web.agui_starlette import StarletteAgui
from pausemesh.web.app import create_app
from tests.support.agui import post_run, run_body
from tests.support.asgi import asgi
from tests.support.server import REPO_ROOT, ServerProcess

pytestmark = pytest.mark.slow

DOCS = REPO_ROOT / "docs" / "agents.md"


def _serve(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PAUSEMESH_")}
    command = [sys.executable, "-m", "pausemesh", "serve", "--env-file", os.devnull, *args]
    return subprocess.run(
        [*command, "--database-path", str(tmp_path / "x.db"), "--port", "1"],
        cwd=REPO_ROOT,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            "examples.fastapi_mount:app",
            "found fastapi.applications.FastAPI instance: expected a PauseMesh agent",
        ),
        ("pausemesh.demo.agent:QUESTION", "found builtins.str instance"),
        (
            "pausemesh.demo.agent:approval_schema",
            "found function pausemesh.demo.agent.approval_schema",
        ),
        (
            "pausemesh.demo.agent:missing",
            "module 'pausemesh.demo.agent' has no attribute 'missing'",
        ),
        ("no_such_module:agent", "cannot import agent module 'no_such_module'"),
        ("examples/no_such_file.py:agent", "no such file"),
    ],
)
def test_serve_refuses_what_is_not_an_agent_and_names_what_it_found(
    tmp_path: Path, spec: str, expected: str
) -> None:
    completed = _serve(tmp_path, "--agent", spec)
    assert completed.returncode == 2, completed.stderr
    assert expected in completed.stderr
    assert "Traceback" not in completed.stderr


def test_the_agent_can_come_from_the_environment(tmp_path: Path) -> None:
    completed = _serve(tmp_path, env={"PAUSEMESH_AGENT": "pausemesh.demo.agent:QUESTION"})
    assert completed.returncode == 2
    assert "pausemesh.demo.agent:QUESTION: found builtins.str instance" in completed.stderr


def test_a_pausemesh_agent_function_is_served_on_agui(tmp_path: Path) -> None:
    database = str(tmp_path / "fn.db")
    args = ["serve", "--agent", "pausemesh.demo.agent:travel_agent", "--database-path", database]
    with (
        ServerProcess(args) as server,
        httpx.Client(base_url=server.base_url, timeout=30) as client,
    ):
        message = {"id": "u1", "role": "user", "content": "Lisbon please"}
        asked = post_run(client, run_body(f"t-{uuid.uuid4()}", "r1", messages=[message]))
        assert asked.interrupts[0]["message"] == "Which flight should I book?"
        assert client.get("/healthz").status_code == 200


def test_a_plain_serve_has_no_agui_routes(tmp_path: Path) -> None:
    with ServerProcess(["serve", "--database-path", str(tmp_path / "plain.db")]) as server:
        response = httpx.post(server.url("/agui"), json=run_body("t", "r"))
        assert response.status_code == 404


def test_a_pydantic_ai_agent_and_an_agent_file_path_are_recognised() -> None:

    adapted = as_agent(support_agent)
    assert isinstance(adapted, PydanticAIAgent)
    assert adapted.agent is support_agent
    assert as_agent(pydantic_agent) is pydantic_agent
    loaded = load_agent("examples/pydantic_ai_quickstart.py:agent")
    assert isinstance(loaded, PydanticAIAgent)
    with pytest.raises(AgentLoadError, match=r"found builtins\.int instance"):
        as_agent(42)


def test_a_compiled_langgraph_graph_is_recognised_and_a_builder_is_refused(tmp_path: Path) -> None:

    database = AgentDatabase(sqlite_path=str(tmp_path / "lg.db"))
    adapted = as_agent(graph, database=database)
    assert isinstance(adapted, LangGraphAgent)
    assert adapted.graph is graph
    assert adapted.database == database
    # An adapter built before the app knew its database is bound to it by the app.
    bound = as_agent(LangGraphAgent(graph), database=database)
    assert isinstance(bound, LangGraphAgent)
    assert bound.database == database
    with pytest.raises(AgentLoadError, match="not compiled"):
        as_agent(StateGraph(RefundState))


async def test_create_app_and_the_starlette_binding_serve_a_pydantic_ai_agent_as_is(
    tmp_path: Path,
) -> None:
    settings = Settings(database_path=str(tmp_path / "embedded.db"))
    starlette = StarletteAgui(settings, agent=support_agent)
    apps = [
        create_app(settings, agent=support_agent),
        Starlette(routes=[*starlette.routes("/agui")], lifespan=starlette.lifespan),
    ]
    message = {"id": "u1", "role": "user", "content": "Refund A-1001"}
    for app in apps:
        async with (
            LifespanManager(asgi(app)) as manager,
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=manager.app), base_url="http://localhost"
            ) as client,
        ):
            body = run_body(f"t-{uuid.uuid4()}", "r1", messages=[message])
            response = await client.post("/agui", json=body)
            assert response.status_code == 200
            assert '"reason":"tool_call"' in response.text
            assert "Approve issue_refund(" in response.text


def test_the_core_and_the_agui_layer_import_no_agent_framework() -> None:
    code = (
        "import sys\n"
        "import pausemesh.core, pausemesh.agui, pausemesh.agui.run, pausemesh.agui.agent\n"
        "import pausemesh.integrations.agents, pausemesh.web.app\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in {'pydantic_ai', 'langgraph'})\n"
        "print(loaded)\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert completed.stdout.strip() == "[]"


def test_the_quickstart_in_the_docs_is_the_tested_file_and_approves_once(tmp_path: Path) -> None:
    quickstart = (REPO_ROOT / "examples" / "pydantic_ai_quickstart.py").read_text()
    assert quickstart.strip() in DOCS.read_text()
    assert len(quickstart.strip().splitlines()) <= 20
    args = [
        "serve",
        "--agent",
        "examples.pydantic_ai_quickstart:agent",
        "--database-path",
        str(tmp_path / "quick.db"),
    ]
    with (
        ServerProcess(args) as server,
        httpx.Client(base_url=server.base_url, timeout=30) as client,
    ):
        message = {"id": "u1", "role": "user", "content": "Delete my account"}
        asked = post_run(client, run_body("quick", "r1", messages=[message]))
        [interrupt] = asked.interrupts
        assert interrupt["message"].startswith("Approve delete_account(")
        entry = {
            "interruptId": interrupt["id"],
            "status": "resolved",
            "payload": {"approved": True},
        }
        done = post_run(client, run_body("quick", "r2", resume=[entry]))
        [result] = [e for e in done.events if e["type"] == "TOOL_CALL_RESULT"]
        assert result["content"].startswith("deleted ")
        assert done.last["type"] == "RUN_FINISHED"
