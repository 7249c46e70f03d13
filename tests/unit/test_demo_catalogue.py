"""The demo agent listens: the destination read from a person's words (case, accents and
punctuation tolerant), "Where to?" without one, what it can do for a greeting, and each
booking's details from one catalogue (the in-process app on a SQLite file)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager

from pausemesh.agui import Decision
from pausemesh.demo.agent import QUESTION, answer_text, reply_to, travel_agent
from pausemesh.demo.flights import (
    CATALOGUE,
    FLIGHTS,
    NEEDS_APPROVAL,
    booking_record,
    booking_summary,
    city_of,
    destination_name,
    find_city,
    flight_choice_schema,
)
from pausemesh.settings import Settings
from pausemesh.web.app import create_app
from tests.support.agui import RunResult, StreamChecker, read_frames


@pytest.mark.parametrize(
    ("words", "city"),
    [
        ("I need a flight to Porto next week", "Porto"),
        ("PORTO!", "Porto"),
        ("book me a flight to lisbon, please", "Lisbon"),
        ("Lisboa", "Lisbon"),
        ("zurich on friday", "Z\u00fcrich"),
        ("ZÜRICH", "Z\u00fcrich"),
        ("to Malaga", "M\u00e1laga"),
        ("Kraków in May", "Krak\u00f3w"),
        ("krakow", "Krak\u00f3w"),
        ("reykjavik", "Reykjav\u00edk"),
        ("from Porto to Madrid", "Madrid"),
        ("Madrid from Porto", "Madrid"),
        ("Madrid, no, Porto", "Porto"),
    ],
)
def test_the_destination_is_found_in_the_words_whatever_the_case_and_accents(
    words: str, city: str
) -> None:
    found = find_city(words)
    assert found is not None
    assert found.name == city


@pytest.mark.parametrize("words", ["hello", "Book me a flight", "portobello road", "Oslo", ""])
def test_words_naming_no_catalogue_city_find_none(words: str) -> None:
    assert find_city(words) is None


@pytest.mark.parametrize("words", ["hello", "Hi there!", "help", "What can you do?", ""])
def test_a_greeting_or_a_question_is_answered_with_what_the_agent_can_do(words: str) -> None:
    said = reply_to(words)
    assert isinstance(said, str)
    assert said.startswith("Hello! I book flights to Lisbon, Porto, Madrid")
    assert "manager" in said


def test_a_request_without_a_destination_is_asked_where_to() -> None:
    said = reply_to("Book me a flight")
    assert isinstance(said, str)
    assert said.startswith("Where to?")
    assert all(city.name in said for city in CATALOGUE)


def test_a_greeting_that_names_a_city_is_a_request_for_flights_there() -> None:
    city = reply_to("hello, a flight to Porto please")
    assert not isinstance(city, str)
    assert city.name == "Porto"


def test_every_flight_code_belongs_to_one_city_and_lisbon_keeps_the_standard_timetable() -> None:
    codes = [f.code for c in CATALOGUE for f in c.flights]
    assert len(codes) == len(set(codes))
    assert [f.code for f in FLIGHTS] == ["PM101", "PM202", "PM303", "PM404"]
    assert all(city_of(f.code) == city for city in CATALOGUE for f in city.flights)


def test_a_destination_outside_the_catalogue_keeps_its_name_and_the_standard_timetable() -> None:
    assert destination_name("Oslo") == "Oslo"
    assert destination_name("a flight to porto") == "Porto"
    assert flight_choice_schema("Oslo") == flight_choice_schema()
    assert flight_choice_schema("Porto")["properties"]["flight"]["enum"] == [
        "PM111",
        "PM211",
        "PM311",
        "PM411",
    ]


def test_a_fare_above_the_threshold_says_it_needs_approval_in_its_title() -> None:
    titles = flight_choice_schema("Lisbon", approval_above=500)["properties"]["flight"]["enumNames"]
    assert titles == [
        "PM101 \u00b7 07:05\u201309:10 \u00b7 89 EUR",
        "PM202 \u00b7 12:40\u201314:45 \u00b7 129 EUR",
        "PM303 \u00b7 18:20\u201320:25 \u00b7 179 EUR",
        f"PM404 \u00b7 09:30\u201311:35 \u00b7 640 EUR \u00b7 business \u00b7 {NEEDS_APPROVAL}",
    ]


def test_a_booking_record_carries_the_flight_times_cabin_price_and_confirmation() -> None:
    booking = booking_record("Porto", "PM411", "PM-ABC12345")
    assert booking == {
        "destination": "Porto",
        "flight": "PM411",
        "price": 560,
        "currency": "EUR",
        "departs": "10:00",
        "arrives": "11:55",
        "cabin": "business",
        "confirmation": "PM-ABC12345",
    }
    assert booking_summary(booking, " (approved by manager)") == (
        "Booked flight PM411 to Porto (approved by manager), confirmation PM-ABC12345:"
        " departs 10:00, arrives 11:55, business, 560 EUR."
    )


@pytest.fixture(name="client")
async def client_fixture(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    app: Any = create_app(Settings(database_path=str(tmp_path / "app.db")), agent=travel_agent)
    async with (
        LifespanManager(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app), base_url="http://localhost"
        ) as client,
    ):
        yield client


async def _say(client: httpx.AsyncClient, thread: str, text: str) -> RunResult:
    user = {"id": f"u-{thread}", "role": "user", "content": text}
    body = {"threadId": thread, "runId": f"r-{thread}", "messages": [user]}
    response = await client.post("/agui", json=body)
    assert response.status_code == 200, response.text
    return RunResult(list(read_frames(iter(response.text.split("\n")), StreamChecker())))


async def test_hello_is_answered_without_a_flight_offer(client: httpx.AsyncClient) -> None:
    run = await _say(client, "greeted", "hello")
    assert run.interrupts == []
    assert run.text().startswith("Hello! I book flights to")


async def test_the_flights_offered_are_to_the_city_the_user_named(
    client: httpx.AsyncClient,
) -> None:
    run = await _say(client, "porto", "I need a flight to Porto next week")
    assert run.text() == "I found 4 flights to Porto."
    [question] = run.interrupts
    assert question["message"] == QUESTION
    assert question["responseSchema"] == flight_choice_schema("Porto", approval_above=500)
    [listed] = (await client.get("/agui/threads")).json()["threads"]
    assert listed["title"] == "Flight to Porto"


async def test_a_booking_reads_the_same_in_the_reply_and_in_the_state(
    client: httpx.AsyncClient,
) -> None:
    [question] = (await _say(client, "madrid", "madrid")).interrupts
    answer = [{"interruptId": question["id"], "status": "resolved", "payload": {"flight": "PM221"}}]
    body = {"threadId": "madrid", "runId": "book", "messages": [], "resume": answer}
    response = await client.post("/agui", json=body)
    done = RunResult(list(read_frames(iter(response.text.split("\n")), StreamChecker())))
    thread = (await client.get("/agui/threads/madrid")).json()
    [booking] = thread["state"]["bookings"]
    assert booking == booking_record("Madrid", "PM221", booking["confirmation"])
    # The answer is the traveller's message, then the assistant confirms with the details.
    answered, confirmed = thread["messages"][-2:]
    assert answered["role"] == "user"
    assert answered["content"] == "PM221 \u00b7 15:30\u201317:55 \u00b7 139 EUR to Madrid"
    assert answered["id"].startswith("answer-")
    assert confirmed["role"] == "assistant"
    assert confirmed["content"] == booking_summary(booking)
    assert done.text() == answered["content"] + booking_summary(booking)


def test_a_managers_decision_says_who_decided() -> None:
    decision = Decision(
        interrupt_id="c-1",
        status="resolved",
        payload={"decision": "approve"},
        metadata={"kind": "approval", "flight": "PM404"},
        resolved_by="maria",
    )
    assert answer_text(decision) == ("decision", "Approved by maria: flight PM404")
    cancelled = Decision(interrupt_id="c-2", status="cancelled")
    assert answer_text(cancelled) == ("answer", "No flight, thanks.")
