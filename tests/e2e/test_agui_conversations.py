"""A principal's conversations over HTTP, against real ``pausemesh demo`` processes on SQLite
and PostgreSQL: the thread list, titles, erasure (checked in the database itself) and scoping."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from pausemesh.stores.postgres.migrate import migrate
from tests.e2e.agui_helpers import ask, new_thread, resolved, resume_body
from tests.support.agui import post_run
from tests.support.postgres import DATABASE_URL, drop_schema, fresh_schema, require_postgres
from tests.support.rest import assert_problem
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

ALICE = {"X-Principal": "alice"}
BOB = {"X-Principal": "bob"}
_RESOLVER = "tests.support.agui:header_principal"
_KEY = "conversations-test-key-0123456789abcdef"


class Deployment:
    """A running demo server and a way to count a thread's rows in its database (and to read
    the continuation log of its questions, with their erasure marks)."""

    def __init__(
        self,
        server: ServerProcess,
        count_rows: object,
        questions: Callable[[str], list[tuple[dict[str, Any], bool]]],
    ) -> None:
        self.server = server
        self.count_rows = count_rows
        # thread id -> every event of its continuations, each with whether the id is erased
        self.questions = questions

    def rows(self, thread_id: str) -> dict[str, int]:
        assert callable(self.count_rows)
        counted: dict[str, int] = self.count_rows(thread_id)
        return counted


def _sqlite_deployment(tmp: Path) -> Iterator[Deployment]:
    database = tmp / "demo.db"
    args = ["demo", "--no-browser", "--database-path", str(database)]

    def count(thread_id: str) -> dict[str, int]:
        with sqlite3.connect(database) as conn:
            return {
                table: conn.execute(
                    f"SELECT count(*) FROM {table} WHERE thread_id = ?",  # noqa: S608 - fixed names
                    (thread_id,),
                ).fetchone()[0]
                for table in ("agui_threads", "agui_thread_events", "agui_thread_erasures")
            }

    def questions(thread_id: str) -> list[tuple[dict[str, Any], bool]]:
        with sqlite3.connect(database) as conn:
            rows = conn.execute(
                "SELECT e.event_json, x.continuation_id IS NOT NULL FROM continuation_events e"
                " LEFT JOIN continuation_erasures x USING (continuation_id)"
                " WHERE e.continuation_id IN (SELECT continuation_id FROM continuation_events"
                " WHERE version = 1 AND json_extract(event_json, '$.correlationId') = ?)",
                (thread_id,),
            ).fetchall()
        return [(json.loads(text), bool(erased)) for text, erased in rows]

    with ServerProcess([*args, "--principal-resolver", _RESOLVER]) as server:
        yield Deployment(server, count, questions)


def _postgres_deployment() -> Iterator[Deployment]:
    asyncio.run(require_postgres())
    schema = fresh_schema("pm_conv")
    asyncio.run(migrate(DATABASE_URL, schema=schema))
    args = ["demo", "--no-browser", "--database-url", DATABASE_URL, "--database-schema", schema]

    async def count_async(thread_id: str) -> dict[str, int]:
        conn = await asyncpg.connect(DATABASE_URL)
        try:
            return {
                table: await conn.fetchval(
                    f'SELECT count(*) FROM "{schema}".{table} WHERE thread_id = $1',  # noqa: S608
                    thread_id,
                )
                for table in ("agui_threads", "agui_thread_events", "agui_thread_erasures")
            }
        finally:
            await conn.close()

    def count(thread_id: str) -> dict[str, int]:
        return asyncio.run(count_async(thread_id))

    async def questions_async(thread_id: str) -> list[tuple[dict[str, Any], bool]]:
        conn = await asyncpg.connect(DATABASE_URL)
        try:
            rows = await conn.fetch(
                f"""
                SELECT e.event_json, x.continuation_id IS NOT NULL
                FROM "{schema}".continuation_events e
                LEFT JOIN "{schema}".continuation_erasures x USING (continuation_id)
                WHERE e.continuation_id IN (
                    SELECT continuation_id FROM "{schema}".continuation_events
                    WHERE version = 1 AND (event_json::jsonb ->> 'correlationId') = $1)
                """,  # noqa: S608 - the test's own schema
                thread_id,
            )
        finally:
            await conn.close()
        return [(json.loads(r[0]), bool(r[1])) for r in rows]

    def questions(thread_id: str) -> list[tuple[dict[str, Any], bool]]:
        return asyncio.run(questions_async(thread_id))

    try:
        with ServerProcess(
            [*args, "--principal-resolver", _RESOLVER], env={"PAUSEMESH_SECRET_KEY": _KEY}
        ) as server:
            yield Deployment(server, count, questions)
    finally:
        asyncio.run(drop_schema(schema))


@pytest.fixture(name="deployment", scope="module", params=["sqlite", "postgres"])
def deployment_fixture(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    if request.param == "sqlite":
        yield from _sqlite_deployment(tmp_path_factory.mktemp("conversations"))
    else:
        yield from _postgres_deployment()


@pytest.fixture(name="alice")
def alice_fixture(deployment: Deployment) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=deployment.server.base_url, timeout=30, headers=ALICE) as client:
        yield client


@pytest.fixture(name="bob")
def bob_fixture(deployment: Deployment) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=deployment.server.base_url, timeout=30, headers=BOB) as client:
        yield client


def _listed(client: httpx.Client, **params: str | int) -> dict[str, object]:
    response = client.get("/agui/threads", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, object] = response.json()
    return body


def test_the_thread_list_shows_my_threads_newest_first_with_title_and_pending_count(
    alice: httpx.Client, bob: httpx.Client
) -> None:
    older, newer = new_thread(), new_thread()
    ask(alice, older)
    asked = ask(alice, newer)
    ask(bob, new_thread())

    threads = _listed(alice, limit=100)["threads"]
    assert isinstance(threads, list)
    mine = [t for t in threads if t["threadId"] in {older, newer}]
    assert [t["threadId"] for t in mine] == [newer, older]
    top = mine[0]
    assert top["title"] == "Flight to Lisbon"  # the demo agent names the trip
    assert top["pendingInterrupts"] == 1
    assert top["lastSequence"] == asked.frames[-1].sequence
    assert set(top) == {
        "threadId",
        "title",
        "createdAt",
        "updatedAt",
        "pendingInterrupts",
        "lastSequence",
    }
    # Bob sees none of alice's threads, and alice none of his.
    bobs = _listed(bob, limit=100)["threads"]
    assert isinstance(bobs, list)
    assert not {t["threadId"] for t in bobs} & {older, newer}

    [interrupt] = asked.interrupts
    post_run(alice, resume_body(newer, [resolved(interrupt["id"])]))
    after = _listed(alice, limit=1)["threads"]
    assert isinstance(after, list)
    assert (after[0]["threadId"], after[0]["pendingInterrupts"]) == (newer, 0)


def test_the_cursor_walks_every_thread_once(alice: httpx.Client) -> None:
    created = {new_thread() for _ in range(5)}
    for thread_id in created:
        ask(alice, thread_id)
    seen: list[str] = []
    cursor: str | None = None
    while True:
        params: dict[str, str | int] = {"limit": 2}
        if cursor is not None:
            params["cursor"] = cursor
        page = _listed(alice, **params)
        threads = page["threads"]
        assert isinstance(threads, list)
        seen += [t["threadId"] for t in threads]
        cursor = page["nextCursor"]  # type: ignore[assignment]
        if cursor is None:
            break
    assert len(seen) == len(set(seen))
    assert created <= set(seen)


def test_bad_list_parameters_are_problems(alice: httpx.Client) -> None:
    assert_problem(
        alice.get("/agui/threads", params={"cursor": "not-a-cursor"}), 400, "INVALID_CURSOR"
    )
    assert alice.get("/agui/threads", params={"limit": 0}).status_code == 400
    assert alice.get("/agui/threads", params={"limit": 101}).status_code == 400


def test_rename_sets_a_title_that_later_runs_keep(alice: httpx.Client, bob: httpx.Client) -> None:
    thread_id = new_thread()
    asked = ask(alice, thread_id)
    renamed = alice.patch(f"/agui/threads/{thread_id}", json={"title": "  Lisbon   trip "})
    assert renamed.status_code == 200, renamed.text
    assert renamed.json() == {"threadId": thread_id, "title": "Lisbon trip"}
    [interrupt] = asked.interrupts
    post_run(alice, resume_body(thread_id, [resolved(interrupt["id"])]))
    threads = _listed(alice, limit=1)["threads"]
    assert isinstance(threads, list)
    assert threads[0]["title"] == "Lisbon trip"

    assert_problem(
        bob.patch(f"/agui/threads/{thread_id}", json={"title": "mine now"}), 404, "THREAD_NOT_FOUND"
    )
    assert_problem(
        alice.patch(f"/agui/threads/{thread_id}", json={"title": ""}), 400, "INVALID_REQUEST"
    )
    assert_problem(
        alice.patch(f"/agui/threads/{thread_id}", json={"title": "x", "extra": 1}),
        400,
        "INVALID_REQUEST",
    )


def test_delete_cancels_the_question_erases_the_data_and_the_thread_is_gone_everywhere(
    deployment: Deployment, alice: httpx.Client, bob: httpx.Client
) -> None:
    thread_id = new_thread()
    # A question answered (a booking), then another one left open.
    [answered] = ask(alice, thread_id).interrupts
    booked = post_run(alice, resume_body(thread_id, [resolved(answered["id"])]))
    assert booked.last["type"] == "RUN_FINISHED", booked.events
    asked = ask(alice, thread_id)
    [interrupt] = asked.interrupts
    before = deployment.rows(thread_id)
    assert before["agui_threads"] == 1
    questions = deployment.questions(thread_id)
    assert {e["type"] for e, _ in questions} == {"continuation.created", "continuation.resumed"}
    assert "Which flight" in json.dumps([e for e, _ in questions])

    assert_problem(bob.delete(f"/agui/threads/{thread_id}"), 404, "THREAD_NOT_FOUND")
    assert alice.delete(f"/agui/threads/{thread_id}").status_code == 204

    # The database itself holds nothing of the thread but the erasure record.
    assert deployment.rows(thread_id) == {
        "agui_threads": 0,
        "agui_thread_events": 0,
        "agui_thread_erasures": 1,
    }
    # Nor of what its questions asked and were answered: the continuation log keeps only
    # what each was (ids, kinds, times), every one of them in the erasure ledger.
    erased = deployment.questions(thread_id)
    assert len(erased) == len(questions) + 1  # the open question's cancellation
    assert all(in_ledger for _, in_ledger in erased)
    for event, _ in erased:
        if event["type"] == "continuation.created":
            assert (event["payload"], event["metadata"]) == (None, {})
        if event["type"] == "continuation.resumed":
            assert event["resumePayload"] is None
    assert "Which flight" not in json.dumps([e for e, _ in erased])
    assert '"PM202"' not in json.dumps([e for e, _ in erased])
    assert_problem(alice.get(f"/agui/threads/{thread_id}"), 404, "THREAD_NOT_FOUND")
    assert_problem(alice.get(f"/agui/threads/{thread_id}/events"), 404, "THREAD_NOT_FOUND")
    assert_problem(alice.delete(f"/agui/threads/{thread_id}"), 404, "THREAD_NOT_FOUND")
    threads = _listed(alice, limit=100)["threads"]
    assert isinstance(threads, list)
    assert thread_id not in {t["threadId"] for t in threads}
    # The question was cancelled: it can no longer be answered, by any route.
    continuation = alice.get(f"/v1/continuations/{interrupt['id']}")
    assert continuation.json()["continuation"]["status"] == "cancelled"
    again = post_run(alice, resume_body(thread_id, [resolved(interrupt["id"])]))
    assert again.error_code == "THREAD_NOT_FOUND"
    assert deployment.rows(thread_id)["agui_threads"] == 0
