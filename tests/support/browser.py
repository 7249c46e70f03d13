"""Helpers for the browser tests: Debian's Chromium, contexts, screenshots, axe audits.

Browser tests drive headless Chromium from the Debian package (never a downloaded build)
through the Python Playwright client, against real ``pausemesh demo`` processes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

from tests.support.server import REPO_ROOT, ServerProcess

__all__ = (
    "ASK",
    "PHONE",
    "Shots",
    "ask",
    "assert_accessible",
    "bookings",
    "browser_context",
    "chromium",
    "flight",
    "open_demo",
    "overflowing",
    "snapshot",
    "thread_of",
)

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-quic",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = REPO_ROOT / "test-artifacts" / "browser"
ASK = "Book me a flight to Lisbon, please"
PHONE = {"width": 390, "height": 844}


@contextmanager
def browser_context(browser: Browser, **options: Any) -> Iterator[BrowserContext]:
    """A fresh context; on exit, no page may have logged an AG-UI client warning.

    The official client warns (``[ag-ui]...``) when a stream carries anything it had to
    strip, coerce or drop, i.e. when the server or the connect override broke the protocol.
    """
    context = browser.new_context(**options)
    context.set_default_timeout(15_000)
    warnings: list[str] = []
    context.on(
        "console",
        lambda message: warnings.append(message.text) if "[ag-ui]" in message.text else None,
    )
    try:
        yield context
    finally:
        context.close()
    assert warnings == [], warnings


AXE = Axe()


def assert_accessible(page: Page) -> None:
    """No axe-core violation (any impact) on the page as it is now."""
    results = AXE.run(page)
    assert results.violations_count == 0, results.generate_report()


class Shots:
    """Numbered screenshots of one test's steps, each audited for accessibility unless the
    page is mostly a third party's UI (``audit=False``)."""

    def __init__(self, name: str, *, audit: bool = True) -> None:
        self.dir = ARTIFACTS / re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
        self.dir.mkdir(parents=True, exist_ok=True)
        for old in self.dir.glob("*.png"):
            old.unlink()
        self.count = 0
        self.audit = audit

    def take(self, page: Page, step: str) -> None:
        self.count += 1
        page.screenshot(path=self.dir / f"{self.count:02d}-{step}.png", full_page=True)
        if self.audit:
            assert_accessible(page)


def open_demo(context: BrowserContext, url: str) -> Page:
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(url)
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    assert errors == [], errors
    return page


def overflowing(page: Page) -> list[str]:
    """What is drawn past the screen's sides: the page itself wider than the screen, or any
    visible element or run of text (clipped inside a scroller or not, spilling out of its box
    or not) beyond its left or right edge."""
    found: list[str] = page.evaluate(
        """() => {
          const out = [];
          const root = document.documentElement;
          if (root.scrollWidth > innerWidth) out.push(`page ${root.scrollWidth} > ${innerWidth}`);
          const outside = (box) =>
            box.width > 1 && box.height > 1 && (box.left < -0.5 || box.right > innerWidth + 0.5);
          for (const el of document.querySelectorAll("body *")) {
            const box = el.getBoundingClientRect();
            if (outside(box)) out.push(`${el.tagName}#${el.id}.${el.className} ${box.right}`);
          }
          const texts = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
          const range = document.createRange();
          for (let node = texts.nextNode(); node !== null; node = texts.nextNode()) {
            range.selectNodeContents(node);
            if (outside(range.getBoundingClientRect())) {
              out.push(`text "${node.textContent.trim().slice(0, 40)}"`);
            }
          }
          return out;
        }"""
    )
    return found


def thread_of(page: Page) -> str:
    (thread,) = parse_qs(urlsplit(page.url).query)["thread"]
    return thread


def snapshot(server: ServerProcess, thread: str) -> dict[str, Any]:
    response = httpx.get(server.url(f"/agui/threads/{thread}"), timeout=10)
    response.raise_for_status()
    body: dict[str, Any] = response.json()
    return body


def bookings(server: ServerProcess, thread: str) -> list[dict[str, Any]]:
    state = snapshot(server, thread)["state"]
    found: list[dict[str, Any]] = state.get("bookings", []) if isinstance(state, dict) else []
    return found


def flight(page: Page, number: str) -> Any:
    """The option button for flight ``number`` (its name may go on: times, price)."""
    return page.get_by_role("button", name=re.compile(rf"^{re.escape(number)}\b"))


def ask(page: Page) -> None:
    page.get_by_role("textbox", name="Message").fill(ASK)
    page.get_by_role("button", name="Send", exact=True).click()
    expect(page.get_by_text("Which flight should I book?")).to_be_visible()
    expect(flight(page, "PM202")).to_be_enabled()


def expect_live(page: Page) -> None:
    """Waits until the page's tail is connected, so a cut that follows is a cut of a live tail."""
    connection = page.locator("#connection")
    expect(connection).to_have_attribute("data-state", "live")
    expect(connection).to_have_text(re.compile("Connected|Reconnected"))


@contextmanager
def chromium() -> Iterator[Browser]:
    """Headless Chromium from /usr/bin/chromium (``make browser`` installs it)."""
    assert CHROMIUM.exists(), "install Debian's chromium (make browser)"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
