"""The demo as a chat people use (issue 44), in Debian's headless Chromium at 1280 px and on a
390 px phone, against ONE ``pausemesh demo`` process and ONE browser for the whole module.

Each test asserts what a person sees for one defect the issue lists: the destination echoed,
the chosen flight as the person's message, times after a reload, no focus ring after a click,
one list of choices (with "needs approval" up front, the deadline in minutes), badges by whose
move it is, the offline banner cleared on reconnect, distinct titles, the collapsible sidebar
and row menu on a phone, a real "not available" state for a thread URL (nothing created by
typing there), and the suggestions on the empty page. Screenshots of every state go to
``test-artifacts/browser/<test>/`` (not committed), each audited with axe-core. One more test
books the same flight over AG-UI, MCP and A2A on the same server and compares the bookings.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
from mcp_types import CallToolResult, InputRequiredResult
from playwright.sync_api import Browser, BrowserContext, Page, expect

from pausemesh.demo.flights import booking_record
from tests.support.agui import post_run, run_body
from tests.support.browser import (
    PHONE,
    Shots,
    bookings,
    browser_context,
    expect_live,
    flight,
    open_demo,
    overflowing,
)
from tests.support.protocol_clients import flight_answer, send_for_task, tool_round, user_message
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

PORTO = "I need a flight to Porto next week"
DESKTOP = {"width": 1280, "height": 800}
# The demo's people: the page sends the person as this cookie (demo/identity.py).
PERSON_COOKIE = "pausemesh_demo_user"
SNAPSHOT_MESSAGES = 6


@pytest.fixture(name="server", scope="module")
def server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("chat")
    server = ServerProcess(
        ["demo", "--no-browser", "--database-path", str(data / "demo.db")],
        env={
            "PAUSEMESH_LOG_LEVEL": "warning",
            "PAUSEMESH_DATA_DIR": str(data),
            # A reload carries the newest 6 messages; the page loads older ones on scroll.
            "PAUSEMESH_SNAPSHOT_MESSAGES": str(SNAPSHOT_MESSAGES),
        },
    )
    with server:
        yield server


@pytest.fixture(name="desktop")
def desktop_fixture(browser: Browser) -> Iterator[BrowserContext]:
    with browser_context(browser, viewport=DESKTOP) as context:
        yield context


@pytest.fixture(name="phone")
def phone_fixture(browser: Browser) -> Iterator[BrowserContext]:
    with browser_context(browser, viewport=PHONE, has_touch=True, is_mobile=True) as context:
        yield context


def transcript(page: Page) -> Any:
    return page.get_by_role("log", name="Conversation")


def sidebar(page: Page) -> Any:
    return page.get_by_role("navigation", name="Conversations")


def current_row(page: Page) -> Any:
    return sidebar(page).locator("li.thread.current")


def thread_of(page: Page) -> str:
    match = re.search(r"[?&]thread=([^&]+)", page.url)
    assert match is not None, page.url
    return match.group(1)


def outline_of_focused(page: Page) -> str:
    style: str = page.evaluate(
        "() => { const s = getComputedStyle(document.activeElement);"
        " return `${document.activeElement.id}:${s.outlineStyle}`; }"
    )
    return style


def test_the_empty_page_welcomes_with_three_suggestions_at_both_widths(
    server: ServerProcess, desktop: BrowserContext, phone: BrowserContext
) -> None:
    shots = Shots("chat-empty-page")
    for context, width in ((desktop, "1280"), (phone, "390")):
        page = open_demo(context, server.url("/"))
        welcome = page.get_by_role("region", name="Where would you like to fly?")
        expect(welcome).to_be_visible()
        suggestions = welcome.get_by_role("button")
        expect(suggestions).to_have_count(3)
        expect(suggestions.first).to_be_in_viewport()
        # The composer's hint fits: its placeholder is not cut off on a phone.
        fits = page.evaluate(
            "() => { const t = document.getElementById('composer-input');"
            " return t.scrollWidth <= t.clientWidth; }"
        )
        assert fits
        shots.take(page, f"empty-{width}")


def test_the_page_names_the_agent_its_capability_discovery_describes(
    server: ServerProcess, desktop: BrowserContext
) -> None:
    described = httpx.get(server.url("/agui/capabilities"), timeout=30).json()
    page = open_demo(desktop, server.url("/"))
    subtitle = page.locator(".brand .subtitle")
    expect(subtitle).to_have_text(f"A PauseMesh demo · agent {described['identity']['name']}")
    expect(subtitle).to_have_attribute("data-interrupts", "true")
    expect(subtitle).to_have_attribute("data-resumable", "true")


def test_a_request_is_answered_for_its_destination_and_the_choice_is_the_users_message(
    server: ServerProcess, desktop: BrowserContext
) -> None:
    shots = Shots("chat-porto")
    page = open_demo(desktop, server.url("/?questionTtl=240"))
    page.get_by_role("button", name=PORTO).click()  # a suggestion, with the mouse

    # The destination echoed, the flights listed once (as the question's buttons).
    expect(transcript(page).get_by_text("I found 4 flights to Porto.")).to_be_visible()
    expect(flight(page, "PM211")).to_be_enabled()
    expect(page.get_by_text(re.compile("PM111"))).to_have_count(1)
    expect(transcript(page)).not_to_contain_text("PM111")
    expect(flight(page, "PM411")).to_contain_text("needs approval")
    expect(flight(page, "PM211")).not_to_contain_text("needs approval")
    # The deadline in minutes, in one format.
    expect(page.locator("#question .expiry")).to_have_text(
        re.compile(r"^Answer within [1-4] min\.$")
    )
    # The question's heading has focus after the click, without a focus ring.
    expect(page.locator("#question-heading")).to_be_focused()
    assert outline_of_focused(page) == "question-heading:none"
    expect(page.get_by_role("heading", name="Flight to Porto")).to_be_visible()
    expect(page.locator("#chat-date")).to_have_text(re.compile(r"^Started "))
    shots.take(page, "question")

    flight(page, "PM211").click()
    chosen = transcript(page).locator(".message-user").last
    expect(chosen).to_contain_text("PM211 · 13:15\u201315:10 · 119 EUR to Porto")
    expect(chosen.locator(".speaker")).to_have_text("You")
    booked = transcript(page).get_by_text(re.compile(r"^Booked flight PM211 to Porto"))
    expect(booked).to_be_visible()
    # The booking is a card in the flow, right after the message that confirmed it.
    card = transcript(page).locator("li.booking-card")
    expect(card).to_have_count(1)
    after = page.evaluate(
        "() => document.querySelector('#transcript li.booking-card')"
        ".previousElementSibling.textContent"
    )
    assert "Booked flight PM211 to Porto" in after
    expect(card).to_contain_text("13:15")
    expect(page.locator("#question")).to_be_hidden()
    shots.take(page, "booked")

    # Every message keeps its time after a reload, in a fresh browser as well.
    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    messages = transcript(page).locator("li.message")
    expect(messages).to_have_count(4)
    expect(transcript(page).locator("li.message time.sent-at")).to_have_count(4)
    with browser_context(page.context.browser, viewport=DESKTOP) as other:  # type: ignore[arg-type]
        elsewhere = open_demo(other, page.url)
        expect(transcript(elsewhere).locator("li.message time.sent-at")).to_have_count(4)
        expect(transcript(elsewhere).locator("li.booking-card")).to_have_count(1)
        shots.take(elsewhere, "reloaded-elsewhere")
    [record] = bookings(server, thread_of(page))
    assert record == booking_record("Porto", "PM211", record["confirmation"])


def test_badges_say_whose_move_it_is_and_titles_tell_conversations_apart(
    server: ServerProcess, desktop: BrowserContext
) -> None:
    shots = Shots("chat-badges")
    page = open_demo(desktop, server.url("/"))
    page.get_by_role("textbox", name="Message").fill("Book me a flight to Lisbon")
    page.get_by_role("button", name="Send", exact=True).click()
    expect(flight(page, "PM404")).to_contain_text("needs approval")
    expect(current_row(page).locator(".badge")).to_have_text("Needs your answer")
    flight(page, "PM404").click()
    expect(page.get_by_role("heading", name="Waiting for the manager")).to_be_visible()
    expect(current_row(page).locator(".badge")).to_have_text("Waiting for the manager")
    expect(transcript(page).locator(".message-user").last).to_contain_text("PM404")
    shots.take(page, "waiting-for-the-manager")

    # Titles by destination, each with the day and time it began.
    rows = sidebar(page).locator("li.thread")
    expect(rows.locator(".thread-title").filter(has_text="Flight to Lisbon")).to_have_count(1)
    expect(rows.locator(".thread-title").filter(has_text="Flight to Porto")).to_have_count(1)
    expect(rows.locator(".thread-date").first).to_have_text(re.compile(r"\d"))
    # Row actions show on hover or keyboard focus, not on every row all the time.
    other = rows.filter(has_text="Flight to Porto")
    rename = other.get_by_role("button", name=re.compile("^Rename"))
    assert rename.evaluate("b => getComputedStyle(b.parentElement).opacity") == "0"  # not shown
    other.hover()
    expect(rename).to_be_visible()
    assert rename.evaluate("b => getComputedStyle(b.parentElement).opacity") == "1"
    shots.take(page, "row-hover")

    # With more conversations than fit, the list scrolls; "You are" stays on screen.
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        for n in range(8):
            message = {"id": f"u-{n}", "role": "user", "content": "A flight to Kraków"}
            post_run(http, run_body(f"t-many-{uuid.uuid4()}", "r-1", messages=[message]))
    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    expect(rows.filter(has_text="Flight to Kraków")).to_have_count(8)
    expect(page.get_by_label("You are")).to_be_in_viewport()
    expect(sidebar(page).get_by_role("link", name="New conversation")).to_be_in_viewport()
    shots.take(page, "many-conversations")


def test_on_a_phone_the_sidebar_collapses_and_row_actions_are_in_a_menu(
    server: ServerProcess, phone: BrowserContext
) -> None:
    shots = Shots("chat-phone")
    page = open_demo(phone, server.url("/"))
    expect(sidebar(page)).to_be_hidden()
    toggle = page.get_by_role("button", name="Conversations")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    page.get_by_role("button", name="Book me a business flight to Zürich").click()
    expect(transcript(page).get_by_text("I found 3 flights to Zürich.")).to_be_visible()
    # The question's first choice is on screen with the conversation.
    expect(flight(page, "PM141")).to_be_in_viewport()
    shots.take(page, "question")

    toggle.click()
    expect(sidebar(page)).to_be_visible()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    row = sidebar(page).locator("li.thread").filter(has_text="Flight to Zürich")
    expect(row.get_by_role("button", name=re.compile("^Rename"))).to_be_hidden()
    menu = row.get_by_role("button", name=re.compile("^Actions for"))
    menu.tap()
    expect(row.get_by_role("button", name=re.compile("^Rename"))).to_be_visible()
    expect(row.get_by_role("button", name=re.compile("^Delete"))).to_be_visible()
    expect(page.get_by_label("You are")).to_be_in_viewport()
    shots.take(page, "sidebar-open")
    sidebar(page).get_by_role("button", name="Close").tap()
    expect(sidebar(page)).to_be_hidden()


def test_a_thread_url_that_is_not_yours_shows_not_available_and_creates_nothing(
    server: ServerProcess, desktop: BrowserContext, browser: Browser
) -> None:
    shots = Shots("chat-not-found")
    made_up = f"typed-{uuid.uuid4()}"
    page = open_demo(desktop, server.url(f"/?thread={made_up}"))
    expect(page.get_by_role("heading", name="Conversation not found")).to_be_visible()
    expect(page.get_by_role("region", name="This conversation is not available")).to_be_visible()
    expect(page.get_by_role("textbox", name="Message")).to_be_disabled()
    expect(page.get_by_role("region", name="Where would you like to fly?")).to_be_hidden()
    shots.take(page, "made-up-id")
    page.get_by_role("textbox", name="Message").press("Enter")
    assert httpx.get(server.url(f"/agui/threads/{made_up}"), timeout=10).status_code == 404

    # Someone else's conversation: the manager opens the traveller's thread URL.
    theirs = f"t-{uuid.uuid4()}"
    body = run_body(theirs, "r-1", messages=[{"id": "u1", "role": "user", "content": "Porto"}])
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        post_run(http, body)
    with browser_context(browser, viewport=DESKTOP) as managing:
        managing.add_cookies([{"name": PERSON_COOKIE, "value": "manager", "url": server.url("/")}])
        desk = open_demo(managing, server.url(f"/?thread={theirs}"))
        expect(
            desk.get_by_role("region", name="This conversation is not available")
        ).to_be_visible()
        expect(transcript(desk).locator("li")).to_have_count(0)
        shots.take(desk, "someone-elses")


def test_the_offline_banner_is_cleared_when_the_connection_is_back(
    server: ServerProcess, desktop: BrowserContext
) -> None:
    shots = Shots("chat-banner")
    page = open_demo(desktop, server.url("/"))
    page.get_by_role("textbox", name="Message").fill("hello")
    page.get_by_role("button", name="Send", exact=True).click()
    expect(transcript(page).get_by_text(re.compile("^Hello! I book flights to"))).to_be_visible()
    expect_live(page)
    server.kill()
    expect(page.locator("#connection")).to_have_text("Connection lost. Reconnecting…")
    page.get_by_role("textbox", name="Message").fill("Madrid")
    page.get_by_role("button", name="Send", exact=True).click()
    notice = page.locator("#notice")
    expect(notice).to_contain_text("Could not reach the server")
    shots.take(page, "offline")
    server.start()
    expect(page.locator("#connection")).to_have_text(re.compile("Reconnected"))
    expect(notice).to_be_hidden()
    shots.take(page, "reconnected")


def test_one_booking_reads_the_same_over_ag_ui_mcp_and_a2a(server: ServerProcess) -> None:
    """The same flight booked on each surface: the same details, each its own confirmation.
    (Its own thread: this module's sync Playwright holds the test thread's event loop.)"""
    with ThreadPoolExecutor(1) as pool:
        found = pool.submit(asyncio.run, _book_everywhere(server)).result()
    for booking in found.values():
        assert booking == booking_record("Porto", "PM211", booking["confirmation"])
    assert len({b["confirmation"] for b in found.values()}) == 3


async def _book_everywhere(server: ServerProcess) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    thread = f"t-{uuid.uuid4()}"
    async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
        asked = await http.post(
            "/agui",
            json=run_body(
                thread,
                "r-1",
                messages=[{"id": "u1", "role": "user", "content": "a flight to oporto"}],
            ),
        )
        interrupt = re.search(r'"interrupts":\[\{"id":"([^"]+)"', asked.text)
        assert interrupt is not None, asked.text
        answer = [
            {
                "interruptId": interrupt.group(1),
                "status": "resolved",
                "payload": {"flight": "PM211"},
            }
        ]
        done = await http.post("/agui", json=run_body(thread, "r-2", messages=[], resume=answer))
        assert done.status_code == 200
        [found["ag-ui"]] = (await http.get(f"/agui/threads/{thread}")).json()["state"]["bookings"]

        first = await tool_round(server.url("/mcp"), "book_flight", {"destination": "porto"})
        assert isinstance(first, InputRequiredResult)
        booked = await tool_round(
            server.url("/mcp"),
            "book_flight",
            {"destination": "porto"},
            state=first.request_state,
            responses=flight_answer("PM211"),
        )
        assert isinstance(booked, CallToolResult)
        assert booked.structured_content is not None
        found["mcp"] = {k: v for k, v in booked.structured_content.items() if k != "booked"}

        config = ClientConfig(httpx_client=http, streaming=False)
        client = await create_client(server.url("/a2a"), client_config=config)
        try:
            task = await send_for_task(client, user_message(text="A flight to Porto, please"))
            answer_a2a = user_message({"flight": "PM211"}, task_id=task.id)
            completed = await send_for_task(client, answer_a2a)
        finally:
            await client.close()
        [artifact] = MessageToDict(completed)["artifacts"]
        found["a2a"] = artifact["parts"][0]["data"]

    return found


def test_a_newer_message_from_another_tab_interrupts_a_running_answer(
    server: ServerProcess, desktop: BrowserContext
) -> None:
    """Double texting: the demo sends new messages with the ``interrupt`` policy."""
    shots = Shots("chat-double-texting")
    # A slow search (20 s, on request) keeps the first run going while the second tab types.
    first = open_demo(desktop, server.url("/?searchDelay=20"))
    first.get_by_role("textbox", name="Message").fill("A flight to Porto")
    first.get_by_role("button", name="Send", exact=True).click()
    expect(first.get_by_text("The assistant is typing…")).to_be_visible()
    thread = thread_of(first)
    second = open_demo(desktop, server.url(f"/?thread={thread}"))
    second.get_by_role("textbox", name="Message").fill("no, Madrid")
    second.get_by_role("button", name="Send", exact=True).click()

    # The second message is answered, not refused as busy; the first tab says its answer stopped.
    expect(transcript(second).get_by_text("I found 3 flights to Madrid.")).to_be_visible()
    expect(second.locator("#notice")).to_be_hidden()
    expect(first.locator("#notice")).to_contain_text("stopped that answer")
    expect(transcript(first).get_by_text("I found 3 flights to Madrid.")).to_be_visible()
    expect(transcript(first).get_by_text("I found 4 flights to Porto.")).to_have_count(0)
    expect(flight(first, "PM121")).to_be_enabled()
    # What the stopped run said stays, drawn as stopped, in both tabs and after a reload.
    for page in (first, second):
        partial = (
            transcript(page).locator("li.message").filter(has_text="Searching flights to Porto…")
        )
        expect(partial).to_have_class(re.compile(r"\bmessage-stopped\b"))
        expect(partial.locator(".stopped-mark")).to_have_text("Stopped — you sent a newer message")
    expect(transcript(first).locator(".stopped-mark")).to_have_count(1)
    shots.take(first, "interrupted-tab")
    shots.take(second, "interrupting-tab")
    first.reload()
    expect(first.locator("body")).to_have_attribute("data-ready", "true")
    stopped = transcript(first).locator("li.message-stopped")
    expect(stopped).to_have_count(1)
    expect(stopped).to_contain_text("Searching flights to Porto…")
    expect(stopped.locator(".stopped-mark")).to_have_text("Stopped — you sent a newer message")
    expect(transcript(first).get_by_text("I found 3 flights to Madrid.")).to_be_visible()
    shots.take(first, "stopped-after-reload")
    pending = httpx.get(server.url(f"/agui/threads/{thread}"), timeout=10).json()
    [question] = pending["pendingInterrupts"]
    assert question["responseSchema"]["properties"]["flight"]["enum"][0] == "PM121"
    [kept] = [m for m in pending["messages"] if m.get("metadata")]
    assert kept["metadata"]["pausemesh"]["interrupted"] is True


def readable_stopped_mark(page: Page) -> None:
    """The stopped answer and its mark are on screen once scrolled to, within the phone's
    width, in type no smaller than 12 px, nothing cut off (axe checks their contrast)."""
    stopped = transcript(page).locator("li.message-stopped")
    expect(stopped).to_have_count(1)
    mark = stopped.locator(".stopped-mark")
    expect(mark).to_have_text("Stopped — you sent a newer message")
    mark.scroll_into_view_if_needed()
    expect(mark).to_be_in_viewport()
    expect(stopped.get_by_text("Searching flights to Porto…")).to_be_in_viewport()
    cut: list[str] = mark.evaluate(
        "m => { const s = getComputedStyle(m); const out = [];"
        " if (parseFloat(s.fontSize) < 12) out.push(`font ${s.fontSize}`);"
        " if (m.scrollWidth > m.clientWidth) out.push(`${m.scrollWidth} > ${m.clientWidth}`);"
        " return out; }"
    )
    assert cut == []
    assert overflowing(page) == []


def test_on_a_phone_an_answer_a_newer_message_stopped_reads_clearly(
    server: ServerProcess, phone: BrowserContext
) -> None:
    """Double texting at 390 px: what the stopped run said keeps its mark, readable, in the
    tab whose answer stopped, in the tab that stopped it, and after a reload."""
    shots = Shots("chat-phone-stopped")
    first = open_demo(phone, server.url("/?searchDelay=20"))
    first.get_by_role("textbox", name="Message").fill("A flight to Porto")
    first.get_by_role("button", name="Send", exact=True).tap()
    expect(first.get_by_text("The assistant is typing…")).to_be_visible()
    thread = thread_of(first)
    second = open_demo(phone, server.url(f"/?thread={thread}"))
    second.get_by_role("textbox", name="Message").fill("no, Madrid")
    second.get_by_role("button", name="Send", exact=True).tap()
    expect(transcript(second).get_by_text("I found 3 flights to Madrid.")).to_be_visible()
    expect(first.locator("#notice")).to_contain_text("stopped that answer")
    expect(transcript(first).get_by_text("I found 3 flights to Madrid.")).to_be_visible()
    for page, step in ((first, "stopped-tab"), (second, "stopping-tab")):
        readable_stopped_mark(page)
        shots.take(page, step)
    first.reload()
    expect(first.locator("body")).to_have_attribute("data-ready", "true")
    readable_stopped_mark(first)
    shots.take(first, "after-reload")


def test_two_conversations_to_one_city_begun_together_get_distinct_titles(
    server: ServerProcess, desktop: BrowserContext
) -> None:
    """Same destination, same minute: the later one is "Flight to Málaga (2)", in the list
    and as the open conversation's heading."""
    shots = Shots("chat-distinct-titles")
    threads = [f"t-malaga-{n}-{uuid.uuid4()}" for n in (1, 2)]
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        for thread in threads:
            message = {"id": f"u-{thread}", "role": "user", "content": "A flight to Malaga"}
            post_run(http, run_body(thread, "r-1", messages=[message]))
    page = open_demo(desktop, server.url(f"/?thread={threads[1]}"))
    titles = sidebar(page).locator(".thread-title").filter(has_text="Flight to Málaga")
    expect(titles).to_have_count(2)
    expect(current_row(page).locator(".thread-title")).to_have_text("Flight to Málaga (2)")
    first = sidebar(page).locator(f'li.thread[data-thread-id="{threads[0]}"]')
    expect(first.locator(".thread-title")).to_have_text("Flight to Málaga")
    expect(page.get_by_role("heading", name="Flight to Málaga (2)")).to_be_visible()
    expect(page).to_have_title("Flight to Málaga (2) · Travel assistant")
    # The stored titles stay as the agent gave them; only the labels tell them apart.
    for thread in threads:
        assert httpx.get(server.url(f"/agui/threads/{thread}"), timeout=10).json()["title"] == (
            "Flight to Málaga"
        )
    shots.take(page, "two-namesakes")


def test_a_long_conversation_loads_older_messages_when_scrolled_to_the_top(
    server: ServerProcess, browser: Browser
) -> None:
    shots = Shots("chat-older-messages")
    thread = f"t-{uuid.uuid4()}"
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        for n in range(1, 13):  # 24 messages: a greeting and its answer, twelve times
            message = {"id": f"user-{n}", "role": "user", "content": f"hello {n}"}
            post_run(http, run_body(thread, f"r-{n}", messages=[message]))
    small = {"width": 390, "height": 560}
    with browser_context(browser, viewport=small, has_touch=True, is_mobile=True) as context:
        page = open_demo(context, server.url(f"/?thread={thread}"))
        messages = transcript(page).locator("li.message")
        expect(messages).to_have_count(SNAPSHOT_MESSAGES)
        expect(transcript(page).get_by_text("hello 1", exact=True)).to_have_count(0)
        shots.take(page, "newest-page")
        page.locator("#scroll").evaluate("s => s.scrollTo(0, 0)")
        expect(messages).to_have_count(24)
        expect(messages.first).to_contain_text("hello 1")
        expect(messages.last).to_contain_text("Hello! I book flights to")
        shots.take(page, "older-loaded")


def test_a_message_sent_by_another_client_shows_the_servers_time_after_the_page_loads(
    server: ServerProcess, desktop: BrowserContext
) -> None:
    """Restored messages carry the time the server first stored them (``messageTimes``), not
    the time this browser first saw them; the other client's id says no time."""
    thread = f"t-{uuid.uuid4()}"
    message_id = f"other-{uuid.uuid4()}"
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        message = {"id": message_id, "role": "user", "content": "hello from my phone"}
        post_run(http, run_body(thread, "r-other", messages=[message]))
        stored = http.get(f"/agui/threads/{thread}").json()
    times = stored["messageTimes"]
    assert set(times) == {m["id"] for m in stored["messages"]}

    page = open_demo(desktop, server.url(f"/?thread={thread}"))
    sent = transcript(page).locator(f'li.message[data-message-id="{message_id}"] time.sent-at')
    expect(sent).to_have_attribute("datetime", times[message_id])
    for other in stored["messages"]:
        shown = transcript(page).locator(f'li.message[data-message-id="{other["id"]}"] time')
        expect(shown).to_have_attribute("datetime", times[other["id"]])


def _more_than(page: Page, messages: Any, count: int) -> int:
    """The transcript's message count once it is above ``count`` (older pages loaded)."""
    for _ in range(400):  # liveness only (20 s): the counts the test compares are the test
        shown: int = messages.count()
        if shown > count:
            return shown
        page.wait_for_timeout(50)
    pytest.fail(f"no older messages came above the {count} shown")


def test_a_thread_of_thousands_of_messages_reloads_its_newest_page_and_pages_older_on_scroll(
    server: ServerProcess, browser: Browser
) -> None:
    """Issue 42: a reload of a 3,000-message thread carries the newest page, not its life, and
    scrolling to the top loads the pages before it, in order."""
    thread = f"t-{uuid.uuid4()}"
    batches, per_batch = 10, 300  # each POST under the default 64 KB body limit
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        for batch in range(batches):
            notes = [
                {"id": f"note-{n}", "role": "user", "content": f"note {n}"}
                for n in range(batch * per_batch + 1, (batch + 1) * per_batch + 1)
            ]
            post_run(http, run_body(thread, f"r-{batch}", messages=notes))
        connected = post_run(http, run_body(thread, "r-connect"), path="/agui/connect")
    # The reload carries one page of the 3,000 notes and their answers.
    [snapshot] = [f.event for f in connected.frames if f.event["type"] == "MESSAGES_SNAPSHOT"]
    assert len(snapshot["messages"]) == SNAPSHOT_MESSAGES
    last_note = batches * per_batch
    with browser_context(browser, viewport=DESKTOP) as context:
        page = open_demo(context, server.url(f"/?thread={thread}"))
        messages = transcript(page).locator("li.message")
        expect(transcript(page).get_by_text(f"note {last_note}", exact=True)).to_have_count(1)
        shots = Shots("chat-thousands")
        shots.take(page, "newest")
        # The page fills its pane from the older pages (50 at a time), never the whole life.
        counts = [_more_than(page, messages, 0)]
        for _ in range(2):
            page.locator("#scroll").evaluate("s => s.scrollTo(0, 0)")
            counts.append(_more_than(page, messages, counts[-1]))
        assert counts[-1] <= SNAPSHOT_MESSAGES + 50 * 4, counts
        texts = messages.all_inner_texts()
        shown = [int(m.group(1)) for t in texts if (m := re.search(r"\bnote (\d+)\b", t))]
        assert shown == sorted(shown), "older pages go above, in order"
        assert shown[-1] == last_note
        assert len(shown) == len(set(shown)), "no message twice"
        assert 1 not in shown
        shots.take(page, "older-loaded")
