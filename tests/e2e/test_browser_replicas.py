"""The browser demo across two ``pausemesh demo`` replicas on one PostgreSQL schema.

A tab on one replica asks; a tab on the other restores the same thread from the shared store
and answers; the first tab sees the booking through its live tail (LISTEN/NOTIFY carries the
event across replicas). Then the replica the first tab talks to is killed: the page
reconnects when it is back, and the thread still holds exactly one booking.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest
from playwright.sync_api import Browser, expect

from pausemesh.stores.postgres.migrate import migrate
from tests.support.browser import (
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
from tests.support.postgres import DATABASE_URL, drop_schema, fresh_schema, require_postgres
from tests.support.server import ServerProcess

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

_KEY = "demo-replicas-share-this-key-0123456789"
T = TypeVar("T")


def _in_thread(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on its own loop in a worker thread.

    The sync Playwright client keeps an event loop running in the test's thread, so the
    PostgreSQL helpers (async) cannot run there.
    """
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


@pytest.fixture(name="replicas")
def replicas_fixture(browser: Browser) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    _in_thread(require_postgres())
    schema = fresh_schema("pm_demo")
    _in_thread(migrate(DATABASE_URL, schema=schema))
    args = ["demo", "--no-browser", "--database-url", DATABASE_URL, "--database-schema", schema]
    env = {"PAUSEMESH_SECRET_KEY": _KEY, "PAUSEMESH_LOG_LEVEL": "warning"}
    first, second = ServerProcess(args, env=env), ServerProcess(args, env=env)
    try:
        first.start()
        second.start()
        yield first, second
    finally:
        for server in (first, second):
            server.close()
        _in_thread(drop_schema(schema))


def test_a_question_asked_on_one_replica_is_answered_on_the_other_and_seen_live(
    replicas: tuple[ServerProcess, ServerProcess], browser: Browser, request: pytest.FixtureRequest
) -> None:
    first, second = replicas
    shots = Shots(request.node.name)
    with browser_context(browser) as context:
        asking = open_demo(context, first.url("/"))
        ask(asking)
        thread = thread_of(asking)
        expect(asking.locator("#connection")).to_have_text(re.compile("Connected"))

        answering = open_demo(context, second.url(f"/?thread={thread}"))
        expect(answering.get_by_text("Which flight should I book?")).to_be_visible()
        shots.take(answering, "other-replica-restored-question")
        flight(answering, "PM303").click()
        expect(answering.get_by_text(re.compile(r"Booked flight PM303 to Lisbon"))).to_be_visible()

        # The first tab follows its own replica, which learns of the answer from PostgreSQL.
        expect(asking.get_by_text(re.compile(r"Booked flight PM303 to Lisbon"))).to_be_visible()
        expect(asking.locator("#question")).to_be_hidden()
        shots.take(asking, "first-replica-saw-answer-live")

        expect_live(asking)
        first.kill()
        expect(asking.locator("#connection")).to_have_text("Connection lost. Reconnecting…")
        first.start()
        expect(asking.locator("#connection")).to_have_text(re.compile("Reconnected"))
        shots.take(asking, "reconnected-after-replica-restart")

    for server in (first, second):
        assert [b["flight"] for b in bookings(server, thread)] == ["PM303"]
        assert snapshot(server, thread)["pendingInterrupts"] == []
