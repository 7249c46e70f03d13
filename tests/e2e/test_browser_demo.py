"""The browser demo in headless Chromium (Debian's package) against a real ``pausemesh demo``.

Each test starts its own server process on a fresh SQLite file, drives the page the way a
person would (roles and accessible names, keyboard where it matters) and checks the server's
record of the thread (``GET /agui/threads/{id}``): exactly one booking, no open question.
Screenshots of every step go to ``test-artifacts/browser/<test>/`` for a person to look at,
and the page is audited with axe-core (WCAG 2 A/AA rules) at each of them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, expect

from tests.support.browser import (
    ASK,
    PHONE,
    Shots,
    ask,
    bookings,
    browser_context,
    expect_live,
    flight,
    open_demo,
    snapshot,
    thread_of,
)
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

# Clicks the option for a flight at once if it is still offered (no actionability waits).
PRESS = """code => {
    for (const button of document.querySelectorAll('#question button.choice')) {
        if (JSON.parse(button.dataset.value) === code) { button.click(); return true; }
    }
    return false;
}"""


@pytest.fixture(name="server")
def server_fixture(tmp_path: Path) -> Iterator[ServerProcess]:
    server = ServerProcess(
        ["demo", "--no-browser", "--database-path", str(tmp_path / "demo.db")],
        env={"PAUSEMESH_LOG_LEVEL": "warning"},
    )
    with server:
        yield server


@pytest.fixture(name="context")
def context_fixture(browser: Browser) -> Iterator[BrowserContext]:
    with browser_context(browser) as context:
        yield context


@pytest.fixture(name="shots")
def shots_fixture(request: pytest.FixtureRequest) -> Shots:
    return Shots(request.node.name)


def test_question_survives_a_reload_and_one_click_books_exactly_once(
    server: ServerProcess, context: BrowserContext, shots: Shots
) -> None:
    page = open_demo(context, server.url("/"))
    shots.take(page, "empty")
    ask(page)
    thread = thread_of(page)
    shots.take(page, "question")

    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    expect(page.get_by_role("log").get_by_text(ASK)).to_be_visible()
    expect(page.get_by_text("Which flight should I book?")).to_be_visible()
    shots.take(page, "question-after-reload")

    flight(page, "PM202").click()
    expect(page.get_by_text(re.compile(r"Booked flight PM202 to Lisbon"))).to_be_visible()
    expect(page.get_by_role("log").locator("li.booking-card")).to_contain_text("PM202")
    expect(page.locator("#question")).to_be_hidden()
    shots.take(page, "booked")

    record = snapshot(server, thread)
    assert record["pendingInterrupts"] == []
    assert [b["flight"] for b in bookings(server, thread)] == ["PM202"]

    page.reload()
    expect(page.get_by_text(re.compile(r"Booked flight PM202"))).to_be_visible()
    expect(page.locator("#question")).to_be_hidden()
    assert len(bookings(server, thread)) == 1


def test_server_killed_between_question_and_answer_the_page_reconnects_and_books_once(
    server: ServerProcess, context: BrowserContext, shots: Shots
) -> None:
    page = open_demo(context, server.url("/"))
    ask(page)
    thread = thread_of(page)
    expect_live(page)

    server.kill()
    expect(page.locator("#connection")).to_have_text("Connection lost. Reconnecting…")
    shots.take(page, "connection-lost")

    server.start()
    expect(page.locator("#connection")).to_have_text(re.compile("Reconnected"))
    expect(flight(page, "PM303")).to_be_enabled()
    shots.take(page, "reconnected")

    flight(page, "PM303").click()
    expect(page.get_by_text(re.compile(r"Booked flight PM303 to Lisbon"))).to_be_visible()
    shots.take(page, "booked-after-restart")
    assert [b["flight"] for b in bookings(server, thread)] == ["PM303"]
    assert snapshot(server, thread)["pendingInterrupts"] == []


def test_two_tabs_answer_differently_one_booking_and_the_loser_is_told_which_answer_was_recorded(
    server: ServerProcess, context: BrowserContext, shots: Shots
) -> None:
    first = open_demo(context, server.url("/"))
    ask(first)
    thread = thread_of(first)
    second = open_demo(context, first.url)
    expect(flight(second, "PM303")).to_be_enabled()
    shots.take(second, "second-tab-question")

    # Both answer at (nearly) the same moment, differently: the clicks go in without
    # Playwright's waits, so neither tab has seen the other's answer yet.
    pressed = [page.evaluate(PRESS, code) for page, code in ((first, "PM101"), (second, "PM303"))]
    assert pressed == [True, True]

    # Whichever the server took first is the one booking, in both tabs.
    either = re.compile(r"Booked flight (PM101|PM303) to Lisbon")
    expect(first.get_by_role("log").get_by_text(either)).to_be_visible()
    [booked] = bookings(server, thread)
    winner, loser = (first, second) if booked["flight"] == "PM101" else (second, first)
    unused = "PM303" if booked["flight"] == "PM101" else "PM101"
    for page in (winner, loser):
        expect(
            page.get_by_role("log").get_by_text(f"Booked flight {booked['flight']} to Lisbon")
        ).to_be_visible()
        expect(page.locator("#question")).to_be_hidden()
        expect(page.get_by_text(f"Booked flight {unused}")).to_have_count(0)
    # The tab that lost says plainly what was recorded, never "busy … try again".
    notice = loser.locator("#notice")
    expect(notice).to_be_visible()
    expect(notice).to_have_attribute("data-kind", "info")
    expect(notice).to_contain_text(
        f"Another tab answered first: flight {booked['flight']} to Lisbon"
        f" (confirmation {booked['confirmation']}) was booked."
    )
    expect(notice).not_to_contain_text(re.compile("busy|try again", re.IGNORECASE))
    shots.take(winner, "winning-tab")
    shots.take(loser, "losing-tab-recorded-outcome")
    assert [b["flight"] for b in bookings(server, thread)] == [booked["flight"]]

    # The live tail: what one tab does appears in the other without a reload.
    first.get_by_role("textbox", name="Message").fill("And another one to Lisbon")
    first.get_by_role("button", name="Send", exact=True).click()
    expect(second.get_by_text("And another one to Lisbon")).to_be_visible()
    expect(flight(second, "PM202")).to_be_enabled()
    flight(second, "PM202").click()
    expect(first.get_by_text(re.compile(r"Booked flight PM202 to Lisbon"))).to_be_visible()
    expect(first.locator("#question")).to_be_hidden()
    shots.take(first, "first-tab-sees-second-tab-answer")
    assert [b["flight"] for b in bookings(server, thread)] == [booked["flight"], "PM202"]


def test_an_answer_outside_the_schema_is_blocked_by_the_form_and_refused_by_the_server(
    server: ServerProcess, context: BrowserContext, shots: Shots
) -> None:
    page = open_demo(context, server.url("/"))
    ask(page)
    thread = thread_of(page)

    # Tamper with an option so the form would send a flight that was never offered.
    page.evaluate(
        """() => {
            const button = document.querySelector('#question button.choice');
            button.dataset.value = JSON.stringify('PM999');
            button.textContent = 'PM999';
        }"""
    )
    flight(page, "PM999").click()
    expect(page.get_by_text("Flight must be one of: PM101, PM202, PM303, PM404.")).to_be_visible()
    expect(page.get_by_role("alert").filter(has_text="it was not sent")).to_be_visible()
    shots.take(page, "blocked-in-form")
    assert snapshot(server, thread)["pendingInterrupts"] != []

    # Forced past the form: a raw request with the same answer.
    (interrupt,) = snapshot(server, thread)["pendingInterrupts"]
    forced = page.evaluate(
        """async ([thread, interruptId]) => {
            const response = await fetch('./agui', {
              method: 'POST',
              headers: {'content-type': 'application/json', accept: 'text/event-stream'},
              body: JSON.stringify({
                threadId: thread, runId: 'forced-1', messages: [], state: {}, tools: [],
                context: [], forwardedProps: {},
                resume: [{interruptId, status: 'resolved', payload: {flight: 'PM999'}}],
              }),
            });
            return {status: response.status, type: response.headers.get('content-type'),
                    body: await response.text()};
        }""",
        [thread, interrupt["id"]],
    )
    if forced["status"] == 200:
        frames = [
            json.loads(line[len("data: ") :])
            for line in forced["body"].splitlines()
            if line.startswith("data: ")
        ]
        errors = [f for f in frames if f["type"] == "RUN_ERROR"]
        assert errors, frames
        refusal = errors[0]
        assert [f["type"] for f in frames] == ["RUN_ERROR"]
    else:
        assert 400 <= forced["status"] < 500, forced
        refusal = json.loads(forced["body"])
        refusal["message"] = refusal["detail"]
    assert refusal["code"] == "PAUSEMESH_AGUI_INVALID_PAYLOAD"
    assert "response schema" in refusal["message"]

    # Nothing was booked and the question still stands; a valid answer still works.
    assert bookings(server, thread) == []
    assert snapshot(server, thread)["pendingInterrupts"] != []
    page.reload()
    flight(page, "PM101").click()
    expect(page.get_by_text(re.compile(r"Booked flight PM101"))).to_be_visible()
    shots.take(page, "valid-answer-after-refusal")
    assert [b["flight"] for b in bookings(server, thread)] == ["PM101"]


def test_keyboard_only_on_a_phone_sized_screen(
    server: ServerProcess, browser: Browser, shots: Shots
) -> None:
    with browser_context(browser, viewport=PHONE, is_mobile=True, has_touch=True) as context:
        page = open_demo(context, server.url("/"))
        shots.take(page, "phone-empty")
        page.keyboard.press("Tab")
        expect(page.get_by_role("link", name="Skip to the message box")).to_be_focused()
        page.keyboard.press("Enter")
        composer = page.get_by_role("textbox", name="Message")
        expect(composer).to_be_focused()
        page.keyboard.type(ASK)
        page.keyboard.press("Enter")

        # The question takes focus; Tab walks its options in order; Enter answers.
        expect(page.get_by_role("heading", name="The assistant needs your answer")).to_be_focused()
        shots.take(page, "phone-question")
        page.keyboard.press("Tab")
        expect(flight(page, "PM101")).to_be_focused()
        page.keyboard.press("Tab")
        expect(flight(page, "PM202")).to_be_focused()
        page.keyboard.press("Enter")

        expect(page.get_by_text(re.compile(r"Booked flight PM202 to Lisbon"))).to_be_visible()
        expect(composer).to_be_focused()
        shots.take(page, "phone-booked")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], "the layout must not scroll sideways on a phone"
        assert [b["flight"] for b in bookings(server, thread_of(page))] == ["PM202"]


def test_an_expired_question_is_closed_by_the_server_and_the_page_says_so(
    server: ServerProcess, context: BrowserContext, shots: Shots
) -> None:
    page = open_demo(context, server.url("/?questionTtl=1"))
    ask(page)
    thread = thread_of(page)
    # The server's expiry run arrives on the page's live tail; no click, no reload.
    expect(
        page.get_by_text(re.compile("The question expired before it was answered"))
    ).to_be_visible()
    expect(page.locator("#question")).to_be_hidden()
    shots.take(page, "expired")
    assert snapshot(server, thread)["pendingInterrupts"] == []
    assert bookings(server, thread) == []


def test_the_dark_color_scheme_passes_the_same_audit(
    server: ServerProcess, browser: Browser, shots: Shots
) -> None:
    with browser_context(browser, color_scheme="dark") as context:
        page = open_demo(context, server.url("/"))
        ask(page)
        shots.take(page, "dark-question")
        flight(page, "PM101").click()
        expect(page.get_by_text(re.compile(r"Booked flight PM101"))).to_be_visible()
        shots.take(page, "dark-booked")


def test_an_answer_sent_while_offline_is_kept_and_goes_through_once_back_online(
    server: ServerProcess, context: BrowserContext, shots: Shots
) -> None:
    page = open_demo(context, server.url("/"))
    ask(page)
    thread = thread_of(page)
    expect_live(page)

    context.set_offline(True)
    expect(page.locator("#connection")).to_have_text(re.compile("You are offline"))
    flight(page, "PM202").click()
    notice = page.locator("#notice")
    expect(notice).to_have_text(re.compile("Could not reach the server"))
    expect(flight(page, "PM202")).to_be_enabled()
    shots.take(page, "offline-answer-kept")
    assert bookings(server, thread) == []

    context.set_offline(False)
    expect(page.locator("#connection")).to_have_text(re.compile("Back online|Reconnected"))
    flight(page, "PM202").click()
    expect(page.get_by_text(re.compile(r"Booked flight PM202 to Lisbon"))).to_be_visible()
    expect(notice).to_be_hidden()
    shots.take(page, "booked-once-online")
    assert [b["flight"] for b in bookings(server, thread)] == ["PM202"]
