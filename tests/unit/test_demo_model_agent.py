"""The demo's travel agent on a pydantic-ai model (``PAUSEMESH_EXAMPLE_MODEL``), in-process
through the real app on a SQLite file, with a file airline: a scripted ``FunctionModel``
(no network) calls ``search_flights`` with the user's words, then ``book_flight`` with the
traveller's pick, then says what the tool said.

The pauses are the ones the page renders for the rule-based agent (the flight question, the
manager's approval); a resume books once, and a replayed resume books nothing more.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from pausemesh.agui import (
    Decision,
    Operations,
    PauseRequest,
    RunContext,
    ThreadTitle,
    ToolCallResultEvent,
    ToolCallStartEvent,
    UserMessage,
)
from pausemesh.demo.agent import QUESTION
from pausemesh.demo.flights import find_city
from pausemesh.demo.identity import DEMO_USER_COOKIE, demo_identity
from pausemesh.demo.model_agent import ModelTravelAgent, instructions
from pausemesh.demo.reservations import Airline, airline, configure_airline
from pausemesh.settings import Settings
from pausemesh.stores.sqlite import open_sqlite_storage
from pausemesh.web.app import create_app
from tests.support.agui import RunResult, StreamChecker, read_frames, run_body

# What the scripted model saw, per request: the instructions and tools, and the conversation.
_SEEN: list[AgentInfo] = []
_HISTORIES: list[list[ModelMessage]] = []


def _call(name: str, arguments: dict[str, Any]) -> DeltaToolCalls:
    call_id = f"call-{uuid.uuid4().hex[:12]}"
    return {0: DeltaToolCall(name=name, json_args=json.dumps(arguments), tool_call_id=call_id)}


async def _scripted(
    messages: list[ModelMessage], info: AgentInfo
) -> AsyncIterator[str | DeltaToolCalls]:
    """Search where the user says, book what the traveller picked, repeat the tool's words."""
    _SEEN.append(info)
    _HISTORIES.append(list(messages))
    last = messages[-1]
    parts = last.parts if isinstance(last, ModelRequest) else []
    for part in parts:
        if isinstance(part, ToolReturnPart) and part.tool_name == "book_flight":
            yield part.model_response_str()
            return
        if isinstance(part, ToolReturnPart) and part.tool_name == "search_flights":
            picked: Any = part.content
            if isinstance(picked, dict) and isinstance(picked.get("flight"), str):
                yield _call("book_flight", {"flight_code": picked["flight"]})
            else:
                yield f"Nothing booked: {part.model_response_str()}"
            return
    prompts = [p.content for p in parts if isinstance(p, UserPromptPart)]
    said = " ".join(p for p in prompts if isinstance(p, str))
    if find_city(said) is None:
        yield "Where would you like to fly?"
        return
    yield "Let me look."
    yield _call("search_flights", {"destination": said})


@pytest.fixture(name="desk")
def desk_fixture(tmp_path: Path) -> Iterator[Airline]:
    before = airline()
    desk = Airline(tmp_path / "airline.db")
    configure_airline(desk)
    yield desk
    configure_airline(before)


@pytest.fixture(name="app")
async def app_fixture(tmp_path: Path, desk: Airline) -> AsyncIterator[Any]:
    del desk
    agent = ModelTravelAgent(FunctionModel(stream_function=_scripted, model_name="scripted"))
    settings = Settings(database_path=str(tmp_path / "demo.db"))
    app: Any = create_app(settings, agent=agent, principal_resolver=demo_identity)
    async with LifespanManager(app):
        yield app


def _client(app: Any, person: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app),
        base_url="http://localhost",
        cookies={DEMO_USER_COOKIE: person},
    )


@pytest.fixture(name="traveller")
async def traveller_fixture(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with _client(app, "traveller") as client:
        yield client


@pytest.fixture(name="manager")
async def manager_fixture(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with _client(app, "manager") as client:
        yield client


async def _run(client: httpx.AsyncClient, body: dict[str, Any]) -> RunResult:
    response = await client.post("/agui", json=body)
    assert response.status_code == 200, response.text
    return RunResult(list(read_frames(iter(response.text.split("\n")), StreamChecker())))


async def _ask(client: httpx.AsyncClient, thread: str, text: str) -> RunResult:
    user = {"id": f"user-{uuid.uuid4()}", "role": "user", "content": text}
    return await _run(client, run_body(thread, f"ask-{uuid.uuid4()}", messages=[user]))


def _answer(interrupt: dict[str, Any], flight: str) -> list[dict[str, Any]]:
    return [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"flight": flight}}]


async def _thread(client: httpx.AsyncClient, thread: str) -> dict[str, Any]:
    response = await client.get(f"/agui/threads/{thread}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_the_search_asks_the_demo_question_with_the_citys_flights(
    traveller: httpx.AsyncClient,
) -> None:
    asked = await _ask(traveller, "porto", "I need a flight to porto next week")
    assert asked.last["type"] == "RUN_FINISHED", asked.events
    [question] = asked.interrupts
    assert question["reason"] == "input_required"
    assert question["message"] == QUESTION
    choice = question["responseSchema"]["properties"]["flight"]
    assert choice["enum"] == ["PM111", "PM211", "PM311", "PM411"]
    assert choice["enumNames"][3].endswith("needs approval")
    assert question["responseSchema"]["required"] == ["flight"]
    assert "Let me look." in asked.text()
    thread = await _thread(traveller, "porto")
    assert thread["title"] == "Flight to Porto"
    assert thread["state"] == {"bookings": []}
    # The model was told what it can do, and given the two tools.
    assert _SEEN[-1].instructions == instructions()
    assert {t.name for t in _SEEN[-1].function_tools} == {"search_flights", "book_flight"}


async def test_the_answer_books_once_and_a_replayed_answer_books_nothing_more(
    traveller: httpx.AsyncClient, desk: Airline
) -> None:
    [question] = (await _ask(traveller, "lisbon", "Lisbon please")).interrupts
    body = run_body("lisbon", "answer-1", resume=_answer(question, "PM202"))
    done = await _run(traveller, body)
    assert done.last["type"] == "RUN_FINISHED", done.events
    assert done.last.get("outcome", {}).get("type") != "interrupt"
    [booking] = (await _thread(traveller, "lisbon"))["state"]["bookings"]
    assert booking["flight"] == "PM202"
    assert booking["departs"] == "12:40"
    assert booking["price"] == 129
    assert f"Booked flight PM202 to Lisbon, confirmation {booking['confirmation']}" in done.text()
    # The pick is the traveller's message, as with the rule-based agent.
    users = [e for e in done.events if e["type"] == "TEXT_MESSAGE_START" and e["role"] == "user"]
    assert len(users) == 1
    assert "PM202 \u00b7 12:40\u201314:45 \u00b7 129 EUR to Lisbon" in done.text()
    assert list(desk.bookings().values()) == [booking]

    # The same answer again (a retry, another tab): the recorded outcome, nothing run again.
    again = await _run(traveller, run_body("lisbon", "answer-2", resume=body["resume"]))
    assert again.last["type"] == "RUN_FINISHED", again.events
    assert "TOOL_CALL_START" not in again.types
    assert list(desk.bookings().values()) == [booking]
    assert (await _thread(traveller, "lisbon"))["state"]["bookings"] == [booking]


async def _wait_for_bookings(client: httpx.AsyncClient, thread: str) -> list[dict[str, Any]]:
    for _ in range(400):
        found: list[dict[str, Any]] = (await _thread(client, thread))["state"]["bookings"]
        pending = (await _thread(client, thread))["pendingInterrupts"]
        if found or not pending:
            return found
        await asyncio.sleep(0.05)
    pytest.fail("the manager's decision did not continue the thread")


async def test_a_later_message_continues_with_the_conversation_so_far(
    traveller: httpx.AsyncClient, desk: Airline
) -> None:
    [question] = (await _ask(traveller, "later", "Madrid")).interrupts
    done = await _run(traveller, run_body("later", "pick", resume=_answer(question, "PM121")))
    [booking] = desk.bookings().values()
    asked = await _ask(traveller, "later", "Now one to Málaga")
    [again] = asked.interrupts
    assert again["responseSchema"]["properties"]["flight"]["enum"] == ["PM131", "PM231"]
    # The model's history, rebuilt from the thread: the booking it confirmed, then the message.
    history = _HISTORIES[-1]
    returned = [
        p.model_response_str()
        for m in history
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart) and p.tool_name == "book_flight"
    ]
    assert [booking["confirmation"] in r for r in returned] == [True]
    last = history[-1]
    assert isinstance(last, ModelRequest)
    assert [p.content for p in last.parts if isinstance(p, UserPromptPart)] == ["Now one to Málaga"]
    assert booking["confirmation"] in done.text()
    assert (await _thread(traveller, "later"))["title"] == "Flight to Málaga"


async def test_no_flight_thanks_books_nothing(traveller: httpx.AsyncClient, desk: Airline) -> None:
    [question] = (await _ask(traveller, "none", "Reykjavík")).interrupts
    declined = [{"interruptId": question["id"], "status": "cancelled"}]
    done = await _run(traveller, run_body("none", "decline", resume=declined))
    assert done.last["type"] == "RUN_FINISHED", done.events
    said = [m.get("content") for m in (await _thread(traveller, "none"))["messages"]]
    assert "No flight, thanks." in said
    assert "TOOL_CALL_START" not in done.types  # the model did not try to book
    assert desk.bookings() == {}


async def test_a_business_fare_waits_for_the_managers_approval_then_books_once(
    traveller: httpx.AsyncClient, manager: httpx.AsyncClient, desk: Airline
) -> None:
    [question] = (await _ask(traveller, "dear", "a flight to Porto")).interrupts
    run = await _run(traveller, run_body("dear", "pick", resume=_answer(question, "PM411")))
    assert run.last["type"] == "RUN_FINISHED", run.events
    [approval] = run.interrupts
    assert approval["reason"] == "approval_required"
    assert approval["metadata"]["pausemesh"]["approvers"] == ["role:manager"]
    for term in ("PM411", "Porto", "10:00", "business", "560 EUR", "traveller"):
        assert term in approval["message"]
    assert desk.bookings() == {}

    decided = await manager.post(
        f"/v1/approvals/{approval['id']}",
        json={"payload": {"decision": "approve"}},
        headers={"idempotency-key": "approve-once"},
    )
    assert decided.status_code == 200, decided.text
    [booking] = await _wait_for_bookings(traveller, "dear")
    assert booking["flight"] == "PM411"
    assert list(desk.bookings().values()) == [booking]
    messages = (await _thread(traveller, "dear"))["messages"]
    said = [m.get("content") for m in messages]
    assert "Approved by manager: flight PM411" in said
    assert any(
        isinstance(s, str) and "(approved by manager)" in s and booking["confirmation"] in s
        for s in said
    )


async def test_a_rejected_business_fare_is_not_booked(
    traveller: httpx.AsyncClient, manager: httpx.AsyncClient, desk: Airline
) -> None:
    [question] = (await _ask(traveller, "no", "Zürich")).interrupts
    run = await _run(traveller, run_body("no", "pick", resume=_answer(question, "PM441")))
    [approval] = run.interrupts
    decided = await manager.post(
        f"/v1/approvals/{approval['id']}",
        json={"payload": {"decision": "reject"}},
        headers={"idempotency-key": "reject-once"},
    )
    assert decided.status_code == 200, decided.text
    assert await _wait_for_bookings(traveller, "no") == []
    said = [m.get("content") for m in (await _thread(traveller, "no"))["messages"]]
    assert "Rejected by manager: flight PM441" in said
    assert any(isinstance(s, str) and "Not approved by manager" in s for s in said)
    assert desk.bookings() == {}


async def test_a_flight_nobody_picked_is_not_booked(desk: Airline, tmp_path: Path) -> None:
    """The model cannot book on its own: book_flight needs the traveller's pick."""

    async def eager(
        messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        del info
        last = messages[-1]
        returned = [p for p in getattr(last, "parts", []) if isinstance(p, ToolReturnPart)]
        if returned:
            yield returned[0].model_response_str()
            return
        yield _call("book_flight", {"flight_code": "PM101"})

    agent = ModelTravelAgent(FunctionModel(stream_function=eager))
    app: Any = create_app(Settings(database_path=str(tmp_path / "eager.db")), agent=agent)
    async with LifespanManager(app), _client(app, "traveller") as client:
        done = await _ask(client, "eager", "Book PM101")
    assert done.last["type"] == "RUN_FINISHED", done.events
    assert "Not booked: the traveller has not picked flight PM101" in done.text()
    assert desk.bookings() == {}


async def test_a_resume_run_again_books_once_though_the_model_calls_the_tool_anew(
    desk: Airline, tmp_path: Path
) -> None:
    """A resume the server runs twice (a replica died before recording the first run): the
    model calls book_flight again under a new tool call id, and the booking is the first
    one, keyed by the question the traveller answered."""
    storage = await open_sqlite_storage(str(tmp_path / "ledger.db"))
    assert storage.operations is not None
    try:
        agent = ModelTravelAgent(FunctionModel(stream_function=_scripted))
        ctx = RunContext(
            thread_id="again",
            run_id="ask",
            messages=[UserMessage(id="u1", content="Kraków, please")],
            state={},
            principal="traveller",
            operations=Operations(storage.operations),
        )
        asked = [o async for o in agent(ctx)]
        [pause] = [o for o in asked if isinstance(o, PauseRequest)]
        assert ThreadTitle("Flight to Kraków") in asked
        answer = Decision(
            interrupt_id="question-1",
            status="resolved",
            payload={"flight": "PM151"},
            tool_call_id=pause.tool_call_id,
            metadata=pause.metadata or {},
        )
        resumed = dataclasses.replace(ctx, run_id="resume", decisions={"question-1": answer})
        said = []
        for _ in range(2):
            outputs = [o async for o in agent(resumed)]
            calls = [o.tool_call_id for o in outputs if isinstance(o, ToolCallStartEvent)]
            said.append((calls, [o for o in outputs if isinstance(o, ToolCallResultEvent)][-1]))
        (first_calls, first), (second_calls, second) = said
        assert first_calls != second_calls
        assert first.content == second.content
        [booking] = desk.bookings().values()
        assert booking["confirmation"] in first.content
    finally:
        await storage.close()
