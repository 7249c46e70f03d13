"""The demo's approvals inbox in headless Chromium: its filters, reminders and escalation.

One ``pausemesh demo`` process (sweeping every 0.2 s, so a due timer fires promptly) and one
browser serve the module; each test runs at a desktop (1280 px) and a phone (390 px) width.
The traveller's requests are asked over AG-UI (``POST /agui``), as the page would; the manager
and the director use the page, switched to them by the demo's cookie. Every check made on the
page is also made on the server's inbox (``GET /v1/approvals``). Screenshots go to
``test-artifacts/browser/<test>/`` and each is audited with axe-core.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Locator, Page, expect

from tests.support.agui import post_run, run_body
from tests.support.browser import (
    PHONE,
    Shots,
    bookings,
    browser_context,
    open_demo,
    overflowing,
)
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

DESKTOP = {"width": 1280, "height": 900}
SCREENS = [pytest.param(DESKTOP, id="desktop"), pytest.param(PHONE, id="phone")]


@pytest.fixture(name="server", scope="module")
def server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    database = tmp_path_factory.mktemp("approvals") / "demo.db"
    server = ServerProcess(
        ["demo", "--no-browser", "--database-path", str(database)],
        env={"PAUSEMESH_LOG_LEVEL": "warning", "PAUSEMESH_SWEEP_INTERVAL_SECONDS": "0.2"},
    )
    with server:
        yield server


@pytest.fixture(name="shots")
def shots_fixture(request: pytest.FixtureRequest) -> Shots:
    return Shots(request.node.name)


def ask_approval(server: ServerProcess, city: str, flight: str, **props: Any) -> str:
    """The traveller asks for a flight to ``city`` and picks the dear ``flight``: the agent
    asks a manager. Returns the thread."""
    thread = f"thread-{uuid.uuid4()}"
    message = {"id": f"user-{uuid.uuid4()}", "role": "user", "content": f"A flight to {city}"}
    with httpx.Client(base_url=server.url(""), timeout=30) as client:
        run = post_run(client, run_body(thread, f"run-{uuid.uuid4()}", messages=[message]))
        [question] = run.interrupts
        answer = {
            "interruptId": question["id"],
            "status": "resolved",
            "payload": {"flight": flight},
        }
        run = post_run(
            client,
            run_body(thread, f"run-{uuid.uuid4()}", resume=[answer], forwardedProps=props),
        )
    assert "asked a manager to approve it" in run.text(), run.events
    return thread


def inbox(server: ServerProcess, person: str, **params: str) -> list[dict[str, Any]]:
    response = httpx.get(
        server.url("/v1/approvals"),
        params={"limit": "200", **params},
        cookies={"pausemesh_demo_user": person},
        timeout=10,
    )
    response.raise_for_status()
    items: list[dict[str, Any]] = response.json()["approvals"]
    return items


def approval_of(server: ServerProcess, person: str, thread: str) -> dict[str, Any]:
    [item] = [a for a in inbox(server, person) if a["threadId"] == thread]
    return item


def booked_flights(server: ServerProcess, thread: str) -> list[str]:
    """The thread's bookings once it has one (the decision's run books it after the answer)."""
    deadline = time.monotonic() + 60
    while not (found := bookings(server, thread)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [b["flight"] for b in found]


def open_inbox(context: BrowserContext, server: ServerProcess, person: str) -> Page:
    context.add_cookies([{"name": "pausemesh_demo_user", "value": person, "url": server.url("/")}])
    page = open_demo(context, server.url("/?view=approvals"))
    expect(page.get_by_role("heading", name="Approvals waiting for you")).to_be_visible()
    return page


def card(page: Page, item: dict[str, Any]) -> Locator:
    return page.locator(f"#approval-{item['continuationId']}")


@pytest.mark.parametrize("screen", SCREENS)
def test_filtering_by_tag_and_agent_narrows_the_inbox(
    server: ServerProcess, browser: Browser, shots: Shots, screen: dict[str, int]
) -> None:
    lisbon = approval_of(server, "manager", ask_approval(server, "Lisbon", "PM404"))
    porto = approval_of(server, "manager", ask_approval(server, "Porto", "PM411"))
    assert lisbon["tags"] == ["booking", "lisbon"]
    assert porto["agent"] == "travel-assistant"

    with browser_context(browser, viewport=screen) as context:
        page = open_inbox(context, server, "manager")
        expect(card(page, lisbon)).to_contain_text("Approve booking flight PM404")
        expect(card(page, porto)).to_contain_text("Approve booking flight PM411")
        expect(card(page, porto)).to_contain_text("Agent: travel-assistant")
        expect(card(page, porto).locator(".tag")).to_have_text(["booking", "porto"])
        shots.take(page, "all")

        filters = page.get_by_role("search", name="Filter approval requests")
        filters.get_by_label("Tag").fill("porto")
        filters.get_by_role("button", name="Filter", exact=True).click()
        expect(card(page, lisbon)).to_have_count(0)
        expect(card(page, porto)).to_be_visible()
        expect(page.locator("#approvals-status")).to_have_text(
            re.compile("match these filters|matches")
        )
        assert re.search(r"[?&]tag=porto", page.url)
        porto_ids = {a["continuationId"] for a in inbox(server, "manager", tag="porto")}
        shown = {
            i.removeprefix("approval-")
            for i in page.locator("#approvals-list > li").evaluate_all("els => els.map(e => e.id)")
        }
        assert shown == porto_ids
        shots.take(page, "tag-porto")

        # A reload keeps the filter (it is in the address).
        page.reload()
        expect(page.locator("body")).to_have_attribute("data-ready", "true")
        expect(page.get_by_label("Tag")).to_have_value("porto")
        expect(card(page, lisbon)).to_have_count(0)
        expect(card(page, porto)).to_be_visible()

        filters = page.get_by_role("search", name="Filter approval requests")
        filters.get_by_role("button", name="Clear filters").click()
        expect(card(page, lisbon)).to_be_visible()
        filters.get_by_label("Agent").fill("it-desk")
        filters.get_by_label("Agent").press("Enter")
        expect(page.locator("#approvals-status")).to_have_text(
            "No approval request matches these filters."
        )
        expect(page.locator("#approvals-list > li")).to_have_count(0)
        assert inbox(server, "manager", agent="it-desk") == []
        shots.take(page, "agent-none")

        filters.get_by_label("Agent").fill("travel-assistant")
        filters.get_by_label("Tag").fill("lisbon")
        filters.get_by_role("button", name="Filter", exact=True).click()
        expect(card(page, lisbon)).to_be_visible()
        expect(card(page, porto)).to_have_count(0)
        shots.take(page, "agent-and-tag")


@pytest.mark.parametrize("screen", SCREENS)
def test_a_reminder_and_an_escalation_show_and_the_director_decides(
    server: ServerProcess, browser: Browser, shots: Shots, screen: dict[str, int]
) -> None:
    thread = ask_approval(
        server, "Madrid", "PM421", approvalRemindSeconds=2, approvalEscalateSeconds=5
    )
    item = approval_of(server, "manager", thread)
    assert item["escalation"]["to"] == ["role:director"]

    with browser_context(browser, viewport=screen) as managing:
        desk = open_inbox(managing, server, "manager")
        request = card(desk, item)
        expect(request).to_contain_text("Approve booking flight PM421")
        expect(request.get_by_role("list", name="Reminders and escalation")).to_contain_text(
            re.compile("Reminder (due|sent) at")
        )
        expect(request).to_contain_text(re.compile("Reminder sent at"), timeout=30_000)
        shots.take(desk, "reminded")
        expect(request).to_contain_text(re.compile("Escalated to any director at"), timeout=30_000)
        shots.take(desk, "escalated")

    fired = approval_of(server, "manager", thread)
    assert "firedAt" in fired["reminder"]
    assert "firedAt" in fired["escalation"]
    assert fired["approvers"] == ["role:manager", "role:director"]

    with browser_context(browser, viewport=screen) as directing:
        director = open_inbox(directing, server, "director")
        expect(director.get_by_label("You are")).to_have_value("director")
        request = card(director, item)
        expect(request).to_contain_text("Approve booking flight PM421")
        expect(request).to_contain_text(re.compile("Escalated to any director at"))
        shots.take(director, "director-inbox")
        request.get_by_role("button", name="Approve").click()
        expect(request.get_by_role("status")).to_have_text(re.compile("^Approved"))
        shots.take(director, "director-approved")

    assert booked_flights(server, thread) == ["PM421"]
    assert all(a["threadId"] != thread for a in inbox(server, "manager"))


def test_on_a_phone_the_approvals_page_opens_the_sidebar_to_switch_person_and_back(
    server: ServerProcess, browser: Browser, shots: Shots
) -> None:
    thread = ask_approval(server, "Reykjavík", "PM461")
    # A title with no place to break must wrap inside its card, not widen the page.
    title = "Reykjavík-" + "x" * 120
    renamed = httpx.patch(server.url(f"/agui/threads/{thread}"), json={"title": title}, timeout=10)
    renamed.raise_for_status()
    item = approval_of(server, "manager", thread)
    assert item["threadTitle"] == title

    with browser_context(browser, viewport=PHONE, has_touch=True, is_mobile=True) as context:
        page = open_inbox(context, server, "manager")
        sidebar = page.get_by_role("navigation", name="Conversations")
        toggle = page.get_by_role("button", name="Conversations")
        request = card(page, item)
        expect(request).to_contain_text("Approve booking flight PM461")
        expect(request).to_contain_text(title)
        expect(sidebar).to_be_hidden()
        expect(toggle).to_be_in_viewport()
        expect(toggle).to_have_attribute("aria-expanded", "false")
        filters = page.get_by_role("search", name="Filter approval requests")
        for name in ("Tag", "Agent", "Asked by", "Waiting"):
            expect(filters.get_by_label(name)).to_be_in_viewport()
        expect(filters.get_by_role("button", name="Clear filters")).to_be_in_viewport()
        assert overflowing(page) == []
        shots.take(page, "inbox")

        # The card's buttons are reached by scrolling down, never sideways.
        approve = request.get_by_role("button", name="Approve")
        approve.scroll_into_view_if_needed()
        expect(approve).to_be_in_viewport()
        expect(request.get_by_role("button", name="Reject")).to_be_visible()
        # The header (and its "Conversations" button) stays on top while the cards scroll.
        expect(toggle).to_be_in_viewport()
        assert overflowing(page) == []
        shots.take(page, "card")

        toggle.tap()
        expect(sidebar).to_be_visible()
        expect(toggle).to_have_attribute("aria-expanded", "true")
        expect(sidebar.get_by_role("button", name="Close")).to_be_focused()
        expect(sidebar.get_by_role("link", name=re.compile("^Approvals"))).to_have_attribute(
            "aria-current", "page"
        )
        expect(page.get_by_label("You are")).to_be_in_viewport()
        expect(page.get_by_label("You are")).to_have_value("manager")
        shots.take(page, "sidebar-open")
        sidebar.get_by_role("button", name="Close").tap()
        expect(sidebar).to_be_hidden()
        expect(toggle).to_have_attribute("aria-expanded", "false")
        expect(toggle).to_be_focused()
        # Escape closes it as well.
        toggle.tap()
        expect(sidebar).to_be_visible()
        page.keyboard.press("Escape")
        expect(sidebar).to_be_hidden()

        # Switching to the traveller leads to their chat; from there, back to the manager's inbox.
        toggle.tap()
        page.get_by_label("You are").select_option("traveller")
        page.wait_for_url(re.compile(r"/(\?)?$"))
        expect(page.locator("body")).to_have_attribute("data-ready", "true")
        expect(page.get_by_role("textbox", name="Message")).to_be_visible()
        expect(sidebar).to_be_hidden()
        page.get_by_role("button", name="Conversations").tap()
        expect(page.get_by_label("You are")).to_have_value("traveller")
        expect(sidebar.get_by_text(title)).to_be_visible()
        shots.take(page, "traveller-sidebar")
        page.get_by_label("You are").select_option("manager")
        page.wait_for_url(re.compile(r"[?&]view=approvals"))
        expect(page.locator("body")).to_have_attribute("data-ready", "true")
        expect(page.get_by_role("heading", name="Approvals waiting for you")).to_be_visible()
        expect(sidebar).to_be_hidden()
        toggle = page.get_by_role("button", name="Conversations")
        expect(toggle).to_have_attribute("aria-expanded", "false")
        request = card(page, item)
        expect(request).to_contain_text("Approve booking flight PM461")
        assert overflowing(page) == []
        toggle.tap()
        expect(page.get_by_label("You are")).to_have_value("manager")
        page.keyboard.press("Escape")
        expect(sidebar).to_be_hidden()

        request.get_by_role("button", name="Approve").tap()
        expect(request.get_by_role("status")).to_have_text(re.compile("^Approved"))
        assert overflowing(page) == []
        shots.take(page, "approved")

    assert booked_flights(server, thread) == ["PM461"]
