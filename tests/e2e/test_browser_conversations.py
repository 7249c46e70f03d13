"""The demo as a chat product, in headless Chromium against real ``pausemesh demo`` processes:
the sidebar of conversations, the chat essentials and the manager's approvals.

Every check that matters is also made against the server's own record (the thread list, the
thread snapshot, the approvals inbox), not only the page. Screenshots of each step go to
``test-artifacts/browser/<test>/`` and each is audited with axe-core.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.support.browser import (
    ASK,
    Shots,
    ask,
    bookings,
    browser_context,
    expect_live,
    flight,
    open_demo,
    thread_of,
)
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow


def demo_server(tmp_path: Path, **env: str) -> ServerProcess:
    return ServerProcess(
        ["demo", "--no-browser", "--database-path", str(tmp_path / "demo.db")],
        env={"PAUSEMESH_LOG_LEVEL": "warning", **env},
    )


@pytest.fixture(name="server")
def server_fixture(tmp_path: Path) -> Iterator[ServerProcess]:
    with demo_server(tmp_path) as server:
        yield server


@pytest.fixture(name="context")
def context_fixture(browser: Browser) -> Iterator[BrowserContext]:
    with browser_context(browser) as context:
        yield context


@pytest.fixture(name="shots")
def shots_fixture(request: pytest.FixtureRequest) -> Shots:
    return Shots(request.node.name)


# The demo agent names a conversation after its destination.
TITLE = "Flight to Lisbon"
SECOND = "Flight to Porto"


def listed(server: ServerProcess, person: str = "traveller") -> list[dict[str, Any]]:
    """The thread list the server keeps for ``person`` (the demo cookie)."""
    response = httpx.get(
        server.url("/agui/threads"), cookies={"pausemesh_demo_user": person}, timeout=10
    )
    response.raise_for_status()
    threads: list[dict[str, Any]] = response.json()["threads"]
    return threads


def sidebar(page: Page) -> Any:
    return page.get_by_role("navigation", name="Conversations")


def row(page: Page, title: str) -> Any:
    return sidebar(page).get_by_role("listitem").filter(has=page.get_by_text(title, exact=True))


def transcript(page: Page) -> Any:
    return page.get_by_role("log", name="Conversation")


def book(page: Page, code: str, city: str = "Lisbon") -> None:
    flight(page, code).click()
    expect(
        transcript(page).get_by_text(re.compile(rf"Booked flight {code} to {city}"))
    ).to_be_visible()


def test_the_sidebar_lists_switches_renames_and_deletes_conversations(
    server: ServerProcess, context: BrowserContext, shots: Shots
) -> None:
    page = open_demo(context, server.url("/"))
    expect(page.get_by_role("heading", name="New conversation")).to_be_visible()
    ask(page)
    first = thread_of(page)
    # The new conversation is listed under its first message, waiting for an answer.
    expect(row(page, TITLE).get_by_text("Needs your answer")).to_be_visible()
    expect(page.get_by_role("heading", name=TITLE)).to_be_visible()
    shots.take(page, "first-waiting")
    assert [(t["threadId"], t["pendingInterrupts"]) for t in listed(server)] == [(first, 1)]

    book(page, "PM101")
    expect(row(page, TITLE).locator(".badge")).to_have_count(0)

    # New: a fresh thread id, then listed above the first once it has a message.
    sidebar(page).get_by_role("link", name="New conversation").click()
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    assert thread_of(page) != first
    expect(transcript(page).get_by_role("listitem")).to_have_count(0)
    page.get_by_role("textbox", name="Message").fill("A second trip, to Porto")
    page.get_by_role("button", name="Send", exact=True).click()
    expect(flight(page, "PM211")).to_be_enabled()
    second = thread_of(page)
    expect(sidebar(page).locator(".thread-title")).to_have_text([SECOND, TITLE])
    book(page, "PM111", "Porto")
    shots.take(page, "two-conversations")

    # Switch: the URL names the thread, and the first conversation comes back.
    sidebar(page).get_by_role("link", name=re.compile(re.escape(TITLE))).click()
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    assert thread_of(page) == first
    expect(transcript(page).get_by_text(ASK)).to_be_visible()
    expect(row(page, TITLE).locator("[aria-current=page]")).to_have_count(1)

    # Rename it in place; the header and the server agree, and a reload keeps both.
    sidebar(page).get_by_role("button", name=f"Rename “{TITLE}”").click()
    page.get_by_role("textbox", name="New name").fill("Lisbon in May")
    shots.take(page, "renaming")
    page.get_by_role("button", name="Save").click()
    expect(row(page, "Lisbon in May")).to_have_count(1)
    expect(page.get_by_role("heading", name="Lisbon in May")).to_be_visible()
    assert {t["threadId"]: t["title"] for t in listed(server)}[first] == "Lisbon in May"
    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    assert thread_of(page) == first
    expect(page.get_by_role("heading", name="Lisbon in May")).to_be_visible()

    # Delete the other conversation: asked to confirm, then gone here and on the server.
    sidebar(page).get_by_role("button", name=f"Delete “{SECOND}”").click()
    shots.take(page, "confirm-delete")
    sidebar(page).get_by_role("button", name=f"Yes, delete “{SECOND}”").click()
    expect(row(page, SECOND)).to_have_count(0)
    assert httpx.get(server.url(f"/agui/threads/{second}"), timeout=10).status_code == 404

    # Delete the one on screen: the page moves to a fresh conversation.
    sidebar(page).get_by_role("button", name="Delete “Lisbon in May”").click()
    sidebar(page).get_by_role("button", name="Yes, delete “Lisbon in May”").click()
    expect(page.get_by_role("heading", name="New conversation")).to_be_visible()
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    assert thread_of(page) not in {first, second}
    expect(sidebar(page).get_by_text("Lisbon in May")).to_have_count(0)
    assert listed(server) == []
    shots.take(page, "all-deleted")


def test_the_chat_shows_typing_a_booking_card_and_a_code_per_booking(
    tmp_path: Path, context: BrowserContext, shots: Shots
) -> None:
    # A slow airline keeps the assistant busy long enough to see it typing.
    with demo_server(tmp_path, PAUSEMESH_DEMO_AIRLINE_LATENCY_SECONDS="3") as server:
        page = open_demo(context, server.url("/"))
        composer = page.get_by_role("textbox", name="Message")
        ask(page)
        # The composer stays docked at the bottom of the window, under the conversation.
        box = composer.bounding_box()
        viewport = page.viewport_size
        assert box is not None
        assert viewport is not None
        assert viewport["height"] - (box["y"] + box["height"]) < 80
        # Flights read with their times and prices; the answer is still the code.
        expect(flight(page, "PM202")).to_have_text(re.compile(r"PM202.*12:40.*129 EUR"))
        expect(transcript(page).locator("time")).to_have_count(2)

        typing = page.get_by_text("The assistant is typing…")
        flight(page, "PM202").click()
        expect(typing).to_be_visible()
        shots.take(page, "typing")
        expect(typing).to_be_hidden(timeout=20_000)
        [booked] = bookings(server, thread_of(page))
        # The booking is a card in the conversation, after the message that confirmed it.
        card = transcript(page).locator("li.booking-card")
        expect(card).to_have_count(1)
        expect(card).to_contain_text("Flight PM202 to Lisbon")
        expect(card).to_contain_text(f"Confirmation{booked['confirmation']}")
        shots.take(page, "booking-card")

        # The same flight in another conversation gets its own confirmation code.
        other = open_demo(context, server.url("/"))
        ask(other)
        flight(other, "PM202").click()
        expect(
            transcript(other).get_by_text(re.compile(r"Booked flight PM202 to Lisbon"))
        ).to_be_visible(timeout=20_000)
        [again] = bookings(server, thread_of(other))
        assert again["confirmation"] != booked["confirmation"]
        confirmed = transcript(other).locator(".message").filter(has_text=again["confirmation"])
        expect(confirmed).to_be_visible()


def test_a_manager_approves_a_dear_flight_and_the_travellers_open_tab_shows_the_booking(
    server: ServerProcess, browser: Browser, shots: Shots
) -> None:
    with (
        browser_context(browser) as travelling,
        browser_context(browser) as managing,
    ):
        traveller = open_demo(travelling, server.url("/"))
        expect(traveller.get_by_label("You are")).to_have_value("traveller")
        ask(traveller)
        thread = thread_of(traveller)
        expect(flight(traveller, "PM404")).to_have_text(re.compile(r"PM404.*640 EUR"))
        flight(traveller, "PM404").click()
        waiting = traveller.get_by_role("heading", name="Waiting for the manager")
        expect(waiting).to_be_visible()
        terms = traveller.locator("#question").get_by_text(
            re.compile(r"Approve booking flight PM404")
        )
        expect(terms).to_contain_text("640 EUR")
        # The traveller is shown the request, never a way to approve it.
        expect(traveller.get_by_role("button", name="Approve")).to_have_count(0)
        expect(row(traveller, TITLE).get_by_text("Waiting for the manager")).to_be_visible()
        shots.take(traveller, "traveller-waiting")

        # A reload and a server restart between the request and the decision.
        traveller.reload()
        expect(traveller.locator("body")).to_have_attribute("data-ready", "true")
        expect(waiting).to_be_visible()
        expect_live(traveller)
        server.kill()
        expect(traveller.locator("#connection")).to_have_text("Connection lost. Reconnecting…")
        server.start()
        expect(traveller.locator("#connection")).to_have_text(re.compile("Reconnected"))

        # The manager: another browser, switched to the manager in the page.
        desk = open_demo(managing, server.url("/"))
        desk.get_by_label("You are").select_option("manager")
        expect(desk.locator("body")).to_have_attribute("data-ready", "true")
        expect(desk.get_by_role("heading", name="Approvals waiting for you")).to_be_visible()
        request = desk.get_by_role("listitem").filter(has_text="Approve booking flight PM404")
        expect(request).to_contain_text("Asked by traveller")
        expect(request).to_contain_text(TITLE)
        expect(request).to_contain_text("09:30")
        shots.take(desk, "manager-approvals")
        request.get_by_role("button", name="Approve").click()
        expect(request.get_by_role("status")).to_have_text(re.compile("^Approved"))
        shots.take(desk, "manager-approved")

        # The traveller's open tab shows the booking without a reload.
        booked = transcript(traveller).get_by_text(re.compile(r"Booked flight PM404 to Lisbon"))
        expect(booked).to_be_visible(timeout=20_000)
        expect(waiting).to_have_count(0)
        [record] = bookings(server, thread)
        expect(traveller.locator("#notice")).to_have_text(
            f"A manager approved it: flight PM404 is booked (confirmation {record['confirmation']})."
        )
        expect(transcript(traveller).locator("li.booking-card")).to_contain_text(
            record["confirmation"]
        )
        shots.take(traveller, "traveller-booked")
        assert record["flight"] == "PM404"
        inbox = httpx.get(
            server.url("/v1/approvals"), cookies={"pausemesh_demo_user": "manager"}, timeout=10
        )
        assert inbox.json()["approvals"] == []


def test_the_person_switcher_is_offered_only_with_the_demo_identity(
    tmp_path: Path, context: BrowserContext
) -> None:
    people = ServerProcess(
        [
            "demo",
            "--no-browser",
            "--database-path",
            str(tmp_path / "resolved.db"),
            "--principal-resolver",
            "tests.support.agui:header_principal",
        ],
        env={"PAUSEMESH_LOG_LEVEL": "warning"},
    )
    with people:
        assert httpx.get(people.url("/demo/people"), timeout=10).status_code == 404
        page = context.new_page()
        page.set_extra_http_headers({"X-Principal": "alice"})
        page.goto(people.url("/"))
        expect(page.locator("body")).to_have_attribute("data-ready", "true")
        expect(page.get_by_label("You are")).to_have_count(0)
        expect(page.get_by_role("link", name=re.compile("^Approvals"))).to_be_hidden()
