"""Framework agents served by ``pausemesh serve --agent`` (real processes, SQLite files).

Every test runs twice: on ``examples/pydantic_ai_refund.py`` (pydantic-ai's scripted
``FunctionModel``) and on ``examples/langgraph_refund.py`` (LangChain's scripted chat model, the
graph's checkpoints in the same SQLite file). Their payment side effect logs every real refund to
a file (``tests/support/refund_agents.py``), so "runs once" is counted where it happens. Every streamed event is checked against the
official ``ag-ui-protocol`` models and the client's ordering rules.
"""

from __future__ import annotations

import secrets
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.agui import RunResult, post_run, run_body
from tests.support.refund_agents import refund_log_lines
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

AGENTS = {
    "pydantic-ai": "tests.support.refund_agents:pydantic_agent",
    "langgraph": "tests.support.refund_agents:langgraph_agent",
}


def _server(agent: str, tmp: Path, **env: str) -> ServerProcess:
    return ServerProcess(
        ["serve", "--agent", AGENTS[agent], "--database-path", str(tmp / "agents.db")],
        env={"PAUSEMESH_TEST_REFUND_LOG": str(tmp / "refunds.jsonl"), **env},
    )


@pytest.fixture(name="framework", scope="module", params=sorted(AGENTS))
def framework_fixture(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture(name="tmp", scope="module")
def tmp_fixture(tmp_path_factory: pytest.TempPathFactory, framework: str) -> Path:
    return tmp_path_factory.mktemp(framework)


@pytest.fixture(name="server", scope="module")
def server_fixture(framework: str, tmp: Path) -> Iterator[ServerProcess]:
    with _server(framework, tmp) as server:
        yield server


@pytest.fixture(name="client")
def client_fixture(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        yield client


def _thread() -> str:
    return f"thread-{uuid.uuid4()}"


def ask(
    client: httpx.Client, thread_id: str, text: str = "Please refund order A-1001"
) -> RunResult:
    message = {"id": f"user-{uuid.uuid4()}", "role": "user", "content": text}
    result = post_run(client, run_body(thread_id, f"run-{uuid.uuid4()}", messages=[message]))
    assert result.last["type"] == "RUN_FINISHED", result.events
    return result


def answer(
    client: httpx.Client, thread_id: str, interrupt_id: str, payload: Any, run_id: str | None = None
) -> RunResult:
    entry = {"interruptId": interrupt_id, "status": "resolved", "payload": payload}
    return post_run(client, run_body(thread_id, run_id or f"run-{uuid.uuid4()}", resume=[entry]))


def thread(client: httpx.Client, thread_id: str) -> dict[str, Any]:
    response = client.get(f"/agui/threads/{thread_id}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def refunds_of(client: httpx.Client, thread_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = thread(client, thread_id)["state"]["refunds"]
    return found


def logged(tmp: Path, order_id: str) -> list[dict[str, Any]]:
    return [r for r in refund_log_lines(tmp / "refunds.jsonl") if r["orderId"] == order_id]


# Order ids the module has handed out (and the fixed one ``ask`` uses): every test of a
# framework shares one server and one refund log, so a repeated id would count another
# test's refund as this one's (it did once, by chance).
_ORDERS_USED = {"A-1001"}


def _order() -> str:
    """An order id (``A-dddd``, the shape the agents read) no other test here has used."""
    while (order := f"A-{secrets.randbelow(9000) + 1000}") in _ORDERS_USED:
        pass
    _ORDERS_USED.add(order)
    return order


def test_the_approval_question_is_shaped_like_pydantic_ais_own_interrupt(
    client: httpx.Client,
) -> None:
    order = _order()
    asked = ask(client, _thread(), f"Refund {order} please")
    [interrupt] = asked.interrupts
    assert interrupt["reason"] == "tool_call"
    assert interrupt["message"] == (
        f'Approve issue_refund({{"order_id":"{order}","amount_cents":2500}})?'
    )
    call = next(e for e in asked.events if e["type"] == "TOOL_CALL_START")
    assert interrupt["toolCallId"] == call["toolCallId"]
    assert call["toolCallName"] == "issue_refund"
    schema = interrupt["responseSchema"]
    assert schema["required"] == ["approved"]
    assert schema["properties"]["approved"] == {"type": "boolean"}
    assert schema["properties"]["reason"] == {"type": "string"}
    # editedArgs is the tool's own argument schema (pydantic-ai's says only "object").
    assert schema["properties"]["editedArgs"]["type"] == "object"
    assert schema["properties"]["editedArgs"]["required"] == ["order_id", "amount_cents"]
    assert asked.text() == f"I will refund order {order}."


def test_approving_runs_the_tool_once_and_records_one_refund(
    client: httpx.Client, tmp: Path
) -> None:
    thread_id, order = _thread(), _order()
    [interrupt] = ask(client, thread_id, f"Refund {order}").interrupts
    assert refunds_of(client, thread_id) == []
    done = answer(client, thread_id, interrupt["id"], {"approved": True})
    assert done.last["type"] == "RUN_FINISHED"
    assert "outcome" not in done.last or done.last["outcome"]["type"] == "success"
    assert f"2500 cents for {order} issued" in done.text()
    [refund] = refunds_of(client, thread_id)
    assert logged(tmp, order) == [refund]
    result = next(e for e in done.events if e["type"] == "TOOL_CALL_RESULT")
    assert result["toolCallId"] == interrupt["toolCallId"]
    # The identical answer again (a retry) changes nothing.
    again = answer(client, thread_id, interrupt["id"], {"approved": True})
    assert again.last["type"] == "RUN_FINISHED"
    assert logged(tmp, order) == [refund]
    assert refunds_of(client, thread_id) == [refund]


def test_approving_with_edited_arguments_runs_the_tool_with_them(
    client: httpx.Client, tmp: Path
) -> None:
    thread_id, order = _thread(), _order()
    [interrupt] = ask(client, thread_id, f"Refund {order}").interrupts
    edited = {"order_id": order, "amount_cents": 1200}
    answer(client, thread_id, interrupt["id"], {"approved": True, "editedArgs": edited})
    [refund] = refunds_of(client, thread_id)
    assert refund["amountCents"] == 1200
    assert [r["amountCents"] for r in logged(tmp, order)] == [1200]


def test_denying_runs_nothing_and_the_model_says_it_was_declined(
    client: httpx.Client, tmp: Path
) -> None:
    thread_id, order = _thread(), _order()
    [interrupt] = ask(client, thread_id, f"Refund {order}").interrupts
    denied = answer(
        client, thread_id, interrupt["id"], {"approved": False, "reason": "Not eligible"}
    )
    assert denied.last["type"] == "RUN_FINISHED"
    assert denied.text() == "The refund was declined: Not eligible"
    assert refunds_of(client, thread_id) == []
    assert logged(tmp, order) == []
    # Without a reason the model is told the person declined.
    thread_id = _thread()
    [interrupt] = ask(client, thread_id, f"Refund {order}").interrupts
    plain = answer(client, thread_id, interrupt["id"], {"approved": False})
    assert plain.text() == "The refund was declined: The user declined this tool call."
    cancelled_id = _thread()
    [interrupt] = ask(client, cancelled_id, f"Refund {order}").interrupts
    entry = {"interruptId": interrupt["id"], "status": "cancelled"}
    cancelled = post_run(client, run_body(cancelled_id, "run-cancel", resume=[entry]))
    assert "declined" in cancelled.text()
    assert logged(tmp, order) == []


def test_reload_through_connect_restores_the_question_and_the_messages(
    client: httpx.Client,
) -> None:
    thread_id = _thread()
    asked = ask(client, thread_id)
    restored = post_run(client, run_body(thread_id, "run-reload"), path="/agui/connect")
    assert restored.types == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED"]
    assert restored.interrupts == asked.interrupts
    snapshot = next(e for e in asked.events if e["type"] == "MESSAGES_SNAPSHOT")
    assert restored.events[1]["messages"] == snapshot["messages"]
    assert restored.events[2]["snapshot"] == {"refunds": []}


def test_a_schema_breaking_answer_is_a_run_error_and_runs_nothing(
    client: httpx.Client, tmp: Path
) -> None:
    thread_id, order = _thread(), _order()
    [interrupt] = ask(client, thread_id, f"Refund {order}").interrupts
    for bad in (
        {"approved": "yes"},
        {"reason": "no decision"},
        {"approved": True, "editedArgs": {"order_id": order, "amount_cents": "lots"}},
    ):
        refused = answer(client, thread_id, interrupt["id"], bad)
        assert refused.error_code == "PAUSEMESH_AGUI_INVALID_PAYLOAD", refused.events
    assert logged(tmp, order) == []
    assert [i["id"] for i in thread(client, thread_id)["pendingInterrupts"]] == [interrupt["id"]]
    # The question still stands and a valid answer is served.
    answer(client, thread_id, interrupt["id"], {"approved": True})
    assert len(logged(tmp, order)) == 1


def test_approving_a_tool_call_that_was_never_asked_is_a_run_error(
    client: httpx.Client, tmp: Path
) -> None:
    thread_id, order = _thread(), _order()
    [interrupt] = ask(client, thread_id, f"Refund {order}").interrupts
    forged = answer(client, thread_id, "call-never-asked", {"approved": True})
    assert forged.error_code == "PAUSEMESH_AGUI_RESUME_SET_MISMATCH", forged.events
    both = [
        {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}},
        {"interruptId": "call-never-asked", "status": "resolved", "payload": {"approved": True}},
    ]
    refused = post_run(client, run_body(thread_id, "run-forged", resume=both))
    assert refused.error_code == "PAUSEMESH_AGUI_RESUME_SET_MISMATCH", refused.events
    assert logged(tmp, order) == []


def test_a_later_turn_continues_the_conversation_from_the_thread(
    client: httpx.Client, tmp: Path
) -> None:
    thread_id, first, second = _thread(), _order(), _order()
    [interrupt] = ask(client, thread_id, f"Refund {first}").interrupts
    answer(client, thread_id, interrupt["id"], {"approved": True})
    # The client sends only the new message: the server holds the history.
    [interrupt] = ask(client, thread_id, f"And {second} too").interrupts
    assert f'"order_id":"{second}"' in interrupt["message"]
    answer(client, thread_id, interrupt["id"], {"approved": True})
    assert [r["orderId"] for r in refunds_of(client, thread_id)] == [first, second]
    assert len(logged(tmp, first)) == len(logged(tmp, second)) == 1


def test_two_tabs_approving_at_once_refund_once(client: httpx.Client, tmp: Path) -> None:
    thread_id, order = _thread(), _order()
    [interrupt] = ask(client, thread_id, f"Refund {order}").interrupts
    results: list[RunResult] = []
    start = threading.Barrier(2)

    def tab() -> None:
        with httpx.Client(base_url=str(client.base_url), timeout=30) as own:
            start.wait()
            results.append(answer(own, thread_id, interrupt["id"], {"approved": True}))

    tabs = [threading.Thread(target=tab) for _ in range(2)]
    for t in tabs:
        t.start()
    for t in tabs:
        t.join(60)
    assert len(results) == 2
    # One ran the tool; the other was refused as busy or answered from the record.
    assert all(r.last["type"] in {"RUN_FINISHED", "RUN_ERROR"} for r in results)
    assert {r.error_code for r in results} <= {None, "THREAD_BUSY"}
    assert len(logged(tmp, order)) == 1
    assert len(refunds_of(client, thread_id)) == 1


def _retry_while_busy(client: httpx.Client, body: dict[str, Any]) -> RunResult:
    """The dead run's lease blocks the thread until it lapses (THREAD_BUSY); a client retries."""
    for _ in range(120):
        result = post_run(client, body)
        if result.error_code != "THREAD_BUSY":
            return result
        time.sleep(0.5)
    pytest.fail("the crashed run's lease never lapsed")


def test_sigkill_between_the_question_and_the_answer_loses_nothing(
    framework: str, tmp_path: Path
) -> None:
    server = _server(framework, tmp_path).start()
    try:
        thread_id = _thread()
        with httpx.Client(base_url=server.base_url, timeout=30) as client:
            [interrupt] = ask(client, thread_id).interrupts
        server.kill()
        server.start()
        with httpx.Client(base_url=server.base_url, timeout=30) as client:
            restored = post_run(client, run_body(thread_id, "run-reload"), path="/agui/connect")
            assert restored.interrupts == [interrupt]
            done = answer(client, thread_id, interrupt["id"], {"approved": True})
            assert "issued" in done.text()
            assert len(refunds_of(client, thread_id)) == 1
        assert len(refund_log_lines(tmp_path / "refunds.jsonl")) == 1
    finally:
        server.close()


def test_sigkill_after_the_tool_ran_then_the_same_resume_refunds_once(
    framework: str, tmp_path: Path
) -> None:
    marker = tmp_path / "crashed"
    server = _server(framework, tmp_path, PAUSEMESH_TEST_CRASH_MARKER=str(marker)).start()
    try:
        thread_id = _thread()
        with httpx.Client(base_url=server.base_url, timeout=30) as client:
            [interrupt] = ask(client, thread_id).interrupts
            entry = {
                "interruptId": interrupt["id"],
                "status": "resolved",
                "payload": {"approved": True},
            }
            body = run_body(thread_id, "run-approve", resume=[entry])
            # The server dies right after the refund ran, mid-stream.
            with (
                pytest.raises(httpx.TransportError),
                client.stream("POST", "/agui", json=body) as response,
            ):
                for _ in response.iter_lines():
                    pass
        assert marker.exists()
        assert server.process is not None
        server.process.wait(15)
        assert len(refund_log_lines(tmp_path / "refunds.jsonl")) == 1
        server.start()
        with httpx.Client(base_url=server.base_url, timeout=30) as client:
            # The client retries the same answer: the recorded refund is reused, not redone.
            done = _retry_while_busy(client, body)
            assert done.last["type"] == "RUN_FINISHED", done.events
            assert "issued" in done.text()
            [refund] = refunds_of(client, thread_id)
        assert refund_log_lines(tmp_path / "refunds.jsonl") == [refund]
    finally:
        server.close()


def test_sigkill_while_the_tool_runs_leaves_the_outcome_unknown_and_never_reruns_it(
    framework: str, tmp_path: Path
) -> None:
    marker = tmp_path / "crashed-in-tool"
    server = _server(framework, tmp_path, PAUSEMESH_TEST_CRASH_IN_TOOL=str(marker)).start()
    try:
        thread_id = _thread()
        with httpx.Client(base_url=server.base_url, timeout=30) as client:
            [interrupt] = ask(client, thread_id).interrupts
            entry = {
                "interruptId": interrupt["id"],
                "status": "resolved",
                "payload": {"approved": True},
            }
            body = run_body(thread_id, "run-approve", resume=[entry])
            with (
                pytest.raises(httpx.TransportError),
                client.stream("POST", "/agui", json=body) as response,
            ):
                for _ in response.iter_lines():
                    pass
        assert marker.exists()
        assert server.process is not None
        server.process.wait(15)
        server.start()
        with httpx.Client(base_url=server.base_url, timeout=30) as client:
            # The payment went out but its outcome was never recorded: no second attempt.
            refused = _retry_while_busy(client, body)
            assert refused.error_code == "OUTCOME_UNKNOWN", refused.events
            assert refunds_of(client, thread_id) == []
        assert len(refund_log_lines(tmp_path / "refunds.jsonl")) == 1
    finally:
        server.close()
