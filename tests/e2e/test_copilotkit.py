"""CopilotKit in front of PauseMesh, durable end to end (examples/copilotkit).

Real processes: ``pausemesh demo`` on a temporary SQLite file, the example's CopilotKit runtime
in Node (``HttpAgent`` to ``/agui``, the durable runner restoring from ``/agui/connect``) and
its React page in Debian's headless Chromium. The page shows the demo's question through
CopilotKit's ``useInterrupt``; PauseMesh's thread record (``GET /agui/threads/{id}``) is the
judge of what was booked. Screenshots of each step go to ``test-artifacts/browser/<test>/``.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Locator, Page, Route, expect

from tests.e2e.agui_helpers import ask as ask_over_http
from tests.e2e.agui_helpers import new_thread, pending_ids
from tests.support.agui import post_run, run_body
from tests.support.browser import Shots, bookings, browser_context, snapshot, thread_of
from tests.support.copilotkit import (
    EXAMPLE,
    NODE,
    NODE_TESTS,
    CopilotKitRuntime,
    needs_copilotkit_build,
    require_build,
)
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

ASK = "Book me a flight to Lisbon, please"
FOUND = "I found 4 flights to Lisbon"
QUESTION = "Which flight should I book?"


@pytest.fixture(name="pausemesh", scope="module")
def pausemesh_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    database = tmp_path_factory.mktemp("copilotkit") / "demo.db"
    server = ServerProcess(
        ["demo", "--no-browser", "--database-path", str(database)],
        env={"PAUSEMESH_LOG_LEVEL": "warning"},
    )
    with server:
        yield server


@pytest.fixture(name="runtime", scope="module")
def runtime_fixture(pausemesh: ServerProcess) -> Iterator[CopilotKitRuntime]:
    require_build()
    runtime = CopilotKitRuntime(pausemesh.base_url)
    with runtime:
        yield runtime


@pytest.fixture(name="context")
def context_fixture(browser: Browser) -> Iterator[BrowserContext]:
    with browser_context(browser) as context:
        yield context


@pytest.fixture(autouse=True, scope="module")
def _patient_expectations() -> Iterator[None]:
    # Each step waits on two servers and a browser on a shared machine: 15 s, not 5 s.
    expect.set_options(timeout=15_000)
    yield
    expect.set_options(timeout=5_000)


@pytest.fixture(name="steps")
def steps_fixture(request: pytest.FixtureRequest) -> Shots:
    # Screenshots only: the page is mostly CopilotKit's chat, not ours to audit with axe.
    return Shots(request.node.name, audit=False)


# -- the page, the way a person uses it ---------------------------------------------------------


def open_chat(context: BrowserContext, url: str) -> Page:
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(url)
    expect(message_box(page)).to_be_visible()
    settle(page)
    assert errors == [], errors
    return page


def settle(page: Page) -> None:
    """Wait until CopilotChat's connects are done (it may connect twice while it loads); an
    answer sent during a connect is dropped by CopilotKit before it reaches the runtime."""
    page.wait_for_load_state("networkidle")


def message_box(page: Page) -> Locator:
    return page.get_by_role("textbox", name="Type a message...")


def question(page: Page) -> Locator:
    return page.get_by_role("region", name="Question")


def choice(page: Page, label: str) -> Locator:
    """The option for ``label`` (a flight's button goes on: times, price, "needs approval")."""
    return question(page).get_by_role("button", name=re.compile(rf"^{re.escape(label)}\b"))


def send(page: Page, text: str) -> None:
    """Type ``text`` and press Enter, as a person would again if nothing happened: on a loaded
    machine CopilotChat may not handle the first Enter yet (the text stays in the box and
    nothing is sent). A sent message empties the box, so this never sends twice."""
    box = message_box(page)
    box.fill(text)
    for _ in range(3):
        box.press("Enter")
        try:
            expect(box).to_have_value("", timeout=5_000)
        except AssertionError:
            continue
        return
    expect(box).to_have_value("")


def ask(page: Page) -> str:
    """Send the request; the question appears through ``useInterrupt``. Returns the thread."""
    send(page, ASK)
    expect(question(page)).to_contain_text(QUESTION)
    expect(choice(page, "PM202")).to_be_enabled()
    # The options read with their times and price, a dear one marked before it is chosen.
    expect(choice(page, "PM202")).to_have_text("PM202 \u00b7 12:40\u201314:45 \u00b7 129 EUR")
    expect(choice(page, "PM404")).to_contain_text("needs approval")
    return thread_of(page)


def expect_restored_question(page: Page) -> None:
    """The conversation so far and the open question, as PauseMesh holds them."""
    settle(page)
    expect(page.get_by_text(ASK)).to_be_visible()
    expect(page.get_by_text(re.compile(FOUND))).to_be_visible()
    expect(question(page)).to_contain_text(QUESTION)
    for flight in ("PM101", "PM202", "PM303"):
        expect(choice(page, flight)).to_be_enabled()


def expect_booked(page: Page, flight: str) -> None:
    expect(page.get_by_text(re.compile(rf"Booked flight {flight} to Lisbon"))).to_be_visible()
    expect(page.get_by_role("complementary", name="Bookings")).to_contain_text(flight)
    expect(question(page)).to_have_count(0)


# -- the browser tests -------------------------------------------------------------------------


@needs_copilotkit_build
def test_the_question_shows_through_use_interrupt_and_a_reload_shows_it_again(
    pausemesh: ServerProcess, runtime: CopilotKitRuntime, context: BrowserContext, steps: Shots
) -> None:
    page = open_chat(context, runtime.url("/"))
    thread = ask(page)
    steps.take(page, "question")
    assert len(pending_ids_of(pausemesh, thread)) == 1

    page.reload()
    expect_restored_question(page)
    assert thread_of(page) == thread
    steps.take(page, "question-after-reload")

    choice(page, "PM202").click()
    expect_booked(page, "PM202")
    steps.take(page, "booked")
    assert [b["flight"] for b in bookings(pausemesh, thread)] == ["PM202"]
    assert snapshot(pausemesh, thread)["pendingInterrupts"] == []


@needs_copilotkit_build
def test_a_restarted_copilotkit_runtime_restores_messages_and_question_from_pausemesh(
    pausemesh: ServerProcess, runtime: CopilotKitRuntime, context: BrowserContext, steps: Shots
) -> None:
    page = open_chat(context, runtime.url("/"))
    thread = ask(page)

    runtime.kill()  # a crash: the runtime's in-memory runner forgets every thread
    runtime.start()
    page.reload()
    expect_restored_question(page)
    steps.take(page, "question-after-runtime-restart")

    choice(page, "PM303").click()
    expect_booked(page, "PM303")
    assert [b["flight"] for b in bookings(pausemesh, thread)] == ["PM303"]


@needs_copilotkit_build
def test_a_restarted_pausemesh_still_holds_the_question_behind_copilotkit(
    pausemesh: ServerProcess, runtime: CopilotKitRuntime, context: BrowserContext, steps: Shots
) -> None:
    page = open_chat(context, runtime.url("/"))
    thread = ask(page)

    pausemesh.kill()
    pausemesh.start()
    page.reload()
    expect_restored_question(page)
    steps.take(page, "question-after-pausemesh-restart")

    choice(page, "PM101").click()
    expect_booked(page, "PM101")
    assert [b["flight"] for b in bookings(pausemesh, thread)] == ["PM101"]


@needs_copilotkit_build
def test_a_second_runtime_instance_restores_the_thread_and_the_first_then_shows_its_booking(
    pausemesh: ServerProcess, runtime: CopilotKitRuntime, context: BrowserContext, steps: Shots
) -> None:
    page = open_chat(context, runtime.url("/"))
    thread = ask(page)

    # Behind a load balancer the next request may reach another instance, which never saw it.
    other = CopilotKitRuntime(pausemesh.base_url)
    with other:
        elsewhere = open_chat(context, other.url(f"/?thread={thread}"))
        expect_restored_question(elsewhere)
        choice(elsewhere, "PM202").click()
        expect_booked(elsewhere, "PM202")
        steps.take(elsewhere, "answered-on-the-second-instance")

    # The first instance still remembers the open question; the thread comes from PauseMesh.
    page.reload()
    settle(page)
    expect_booked(page, "PM202")
    steps.take(page, "first-instance-after-reload")
    assert [b["flight"] for b in bookings(pausemesh, thread)] == ["PM202"]


@needs_copilotkit_build
def test_two_tabs_answering_at_once_book_once_and_both_tabs_show_the_booking(
    pausemesh: ServerProcess, runtime: CopilotKitRuntime, context: BrowserContext, steps: Shots
) -> None:
    first = open_chat(context, runtime.url("/"))
    thread = ask(first)
    second = open_chat(context, first.url)
    expect_restored_question(second)

    # Both answer at (nearly) the same moment, differently.
    choice(first, "PM101").click(no_wait_after=True)
    choice(second, "PM303").click(no_wait_after=True)

    expect(first.get_by_text(re.compile(r"Booked flight PM\d+ to Lisbon"))).to_be_visible()
    (booking,) = _eventually_one_booking(pausemesh, thread)
    for page in (first, second):
        expect_booked(page, booking["flight"])
        other = {"PM101", "PM303"} - {booking["flight"]}
        expect(page.get_by_text(re.compile(rf"Booked flight {other.pop()}"))).to_have_count(0)
    steps.take(first, "first-tab")
    steps.take(second, "second-tab")
    assert len(bookings(pausemesh, thread)) == 1
    assert snapshot(pausemesh, thread)["pendingInterrupts"] == []


@needs_copilotkit_build
def test_an_answer_breaking_the_schema_shows_pausemesh_error_and_keeps_the_question(
    pausemesh: ServerProcess, runtime: CopilotKitRuntime, context: BrowserContext, steps: Shots
) -> None:
    page = open_chat(context, runtime.url("/"))
    thread = ask(page)

    def off_the_list(route: Route) -> None:
        # What a stale or tampered client sends: a flight the question never offered.
        body = json.loads(route.request.post_data or "{}")
        for entry in body.get("resume", []):
            entry["payload"] = {"flight": "PM999"}
        route.continue_(post_data=json.dumps(body))

    page.route("**/api/copilotkit/agent/default/run", off_the_list)
    choice(page, "PM202").click()
    expect(page.get_by_role("alert")).to_contain_text("PAUSEMESH_AGUI_INVALID_PAYLOAD")
    expect(question(page)).to_contain_text(QUESTION)
    expect(choice(page, "PM202")).to_be_enabled()
    steps.take(page, "refused")
    assert bookings(pausemesh, thread) == []
    assert len(pending_ids_of(pausemesh, thread)) == 1

    page.unroute("**/api/copilotkit/agent/default/run")
    choice(page, "PM202").click()
    expect_booked(page, "PM202")
    expect(page.get_by_role("alert")).to_be_hidden()
    assert [b["flight"] for b in bookings(pausemesh, thread)] == ["PM202"]


@needs_copilotkit_build
def test_cancelling_the_question_books_nothing(
    pausemesh: ServerProcess, runtime: CopilotKitRuntime, context: BrowserContext, steps: Shots
) -> None:
    page = open_chat(context, runtime.url("/"))
    thread = ask(page)

    choice(page, "Cancel").click()
    expect(page.get_by_text("All right, I will not book a flight.")).to_be_visible()
    expect(question(page)).to_have_count(0)
    steps.take(page, "cancelled")
    assert bookings(pausemesh, thread) == []
    assert snapshot(pausemesh, thread)["pendingInterrupts"] == []

    page.reload()
    expect(page.get_by_text("All right, I will not book a flight.")).to_be_visible()
    expect(question(page)).to_have_count(0)


@needs_copilotkit_build
def test_the_durable_runner_and_the_form_pass_their_node_tests() -> None:
    """The example's node:test suites (durable runner, schema form), as built by make install."""
    require_build()
    assert NODE is not None
    result = subprocess.run(
        [NODE, "--test", str(NODE_TESTS)],
        cwd=EXAMPLE,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "# fail 0" in result.stdout


# -- what CopilotKit relies on from PauseMesh (no Node needed) ---------------------------------


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        ({"flight": "PM999"}, "PAUSEMESH_AGUI_INVALID_PAYLOAD"),
        ({}, "PAUSEMESH_AGUI_INVALID_PAYLOAD"),
    ],
)
def test_a_refused_resume_is_a_lone_run_error_without_run_started(
    pausemesh: ServerProcess, payload: dict[str, Any], code: str
) -> None:
    """CopilotKit's ``useInterrupt`` drops its question on every ``RUN_STARTED``: a refusal must
    come before one (today: HTTP 200 and a single ``RUN_ERROR``), so the question stays."""
    with httpx.Client(base_url=pausemesh.base_url, timeout=30) as client:
        thread = new_thread()
        asked = ask_over_http(client, thread)
        (interrupt,) = asked.interrupts
        # As CopilotKit sends it: the interrupted run's runId again, and the messages it holds.
        body = run_body(
            thread,
            asked.last["runId"],
            messages=snapshot_messages(client, thread),
            resume=[{"interruptId": interrupt["id"], "status": "resolved", "payload": payload}],
        )
        refused = post_run(client, body)

        assert refused.types == ["RUN_ERROR"], refused.events
        assert refused.error_code == code
        assert pending_ids(client, thread) == [interrupt["id"]]
        restored = post_run(
            client, run_body(thread, f"connect-{uuid.uuid4()}"), path="/agui/connect"
        )
        assert restored.interrupts == [interrupt]


def test_a_late_different_answer_from_a_second_tab_is_a_lone_run_error(
    pausemesh: ServerProcess,
) -> None:
    """The losing tab's resume after the question closed: refused before any ``RUN_STARTED``."""
    with httpx.Client(base_url=pausemesh.base_url, timeout=30) as client:
        thread = new_thread()
        (interrupt,) = ask_over_http(client, thread).interrupts
        resume = {"interruptId": interrupt["id"], "status": "resolved"}
        won = post_run(
            client, run_body(thread, "tab-1", resume=[{**resume, "payload": {"flight": "PM101"}}])
        )
        assert won.types[0] == "RUN_STARTED"

        lost = post_run(
            client, run_body(thread, "tab-2", resume=[{**resume, "payload": {"flight": "PM303"}}])
        )

        assert lost.types == ["RUN_ERROR"], lost.events
        assert lost.error_code == "PAUSEMESH_AGUI_REPLAY_CONFLICT"
        assert [b["flight"] for b in _bookings_over_http(client, thread)] == ["PM101"]


# -- helpers -----------------------------------------------------------------------------------


def pending_ids_of(server: ServerProcess, thread: str) -> list[str]:
    return [i["id"] for i in snapshot(server, thread)["pendingInterrupts"]]


def snapshot_messages(client: httpx.Client, thread: str) -> list[dict[str, Any]]:
    response = client.get(f"/agui/threads/{thread}")
    response.raise_for_status()
    messages: list[dict[str, Any]] = response.json()["messages"]
    return messages


def _bookings_over_http(client: httpx.Client, thread: str) -> list[dict[str, Any]]:
    response = client.get(f"/agui/threads/{thread}")
    response.raise_for_status()
    found: list[dict[str, Any]] = response.json()["state"].get("bookings", [])
    return found


def _eventually_one_booking(server: ServerProcess, thread: str) -> list[dict[str, Any]]:
    """The thread's bookings once the winning run has saved them (its text streams first)."""
    found: list[dict[str, Any]] = []
    for _ in range(200):
        found = bookings(server, thread)
        if found and snapshot(server, thread)["pendingInterrupts"] == []:
            break
        time.sleep(0.05)
    return found
