"""A 2025-11-25 MCP question outlives its session across two replicas on PostgreSQL.

Official ``mcp`` clients against two ``pausemesh demo`` replicas sharing one database: a legacy
client is asked on one replica and goes away (or the replica is killed under it); a new legacy
session on the other replica is asked the same pending question, and a 2026-07-28 client there
answers it by the usual retry. Twenty concurrent answers over both replicas book once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, ElicitResult, InputRequiredResult

from tests.protocols.test_mcp_lasting_pauses import asked_then_gone, legacy_call_to
from tests.protocols.test_mcp_router import TOOL, _continuation_in
from tests.reliability.test_postgres_protocols import Replicas, running_replicas
from tests.support.mcp_state import continuation_of
from tests.support.protocol_clients import continuation_status, flight_answer, tool_round

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture(name="replicas", scope="module")
async def replicas_fixture() -> AsyncIterator[Replicas]:
    async with running_replicas("pm_mcp_lasting") as replicas:
        yield replicas


def answering(flight: str, seen: list[Any]) -> Any:
    async def callback(_context: Any, params: Any) -> ElicitResult:
        seen.append(params)
        return ElicitResult(action="accept", content={"flight": flight})

    return callback


async def test_a_question_abandoned_on_one_replica_is_asked_again_on_the_other_and_books_once(
    replicas: Replicas,
) -> None:
    first, second = replicas.servers
    cid = await asked_then_gone(first, "Riga")
    seen: list[Any] = []

    result = await legacy_call_to(second, "Riga", answering("PM202", seen))

    assert [_continuation_in(params) for params in seen] == [cid]
    assert not result.is_error
    assert continuation_status(first, cid) == "resumed"
    assert await replicas.bookings(cid) == 1


async def test_a_modern_client_on_the_other_replica_answers_the_abandoned_question_once(
    replicas: Replicas,
) -> None:
    first, second = replicas.servers
    cid = await asked_then_gone(first, "Tallinn")
    arguments = {"destination": "Tallinn"}

    asked = await tool_round(second.url("/mcp"), TOOL, arguments)
    assert isinstance(asked, InputRequiredResult)
    assert asked.request_state is not None
    state = asked.request_state
    done = await tool_round(
        second.url("/mcp"), TOOL, arguments, state=state, responses=flight_answer("PM303")
    )
    replay = await tool_round(
        first.url("/mcp"), TOOL, arguments, state=state, responses=flight_answer("PM303")
    )

    assert continuation_of(state) == cid
    assert isinstance(done, CallToolResult)
    assert done.structured_content is not None
    assert done.structured_content["booked"] is True
    assert isinstance(replay, CallToolResult)
    assert replay.structured_content == done.structured_content
    assert await replicas.bookings(cid) == 1


async def test_twenty_concurrent_answers_over_both_replicas_book_once(
    replicas: Replicas,
) -> None:
    first, second = replicas.servers
    cid = await asked_then_gone(first, "Riga")
    arguments = {"destination": "Riga"}
    asked = await tool_round(second.url("/mcp"), TOOL, arguments)
    assert isinstance(asked, InputRequiredResult)
    state = asked.request_state

    outcomes = await asyncio.gather(
        *(
            tool_round(
                server.url("/mcp"),
                TOOL,
                arguments,
                state=state,
                responses=flight_answer(flight),
            )
            for server, flight in zip(
                [first, second] * 10, ["PM101", "PM202", "PM303", "PM404"] * 5, strict=True
            )
        ),
        return_exceptions=True,
    )

    booked = [o for o in outcomes if isinstance(o, CallToolResult) and not o.is_error]
    assert booked
    assert all(isinstance(o, CallToolResult | MCPError) for o in outcomes)
    assert len({str(o.structured_content) for o in booked}) == 1
    assert continuation_status(second, cid) == "resumed"
    assert await replicas.bookings(cid) == 1


async def test_a_question_asked_on_a_replica_killed_under_its_session_is_answered_on_the_other(
    replicas: Replicas,
) -> None:
    first, second = replicas.servers
    asked: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def waits(_context: Any, params: Any) -> ElicitResult:
        asked.set_result(_continuation_in(params))
        await asyncio.Event().wait()
        raise AssertionError

    session = asyncio.create_task(legacy_call_to(first, "Vilnius", waits))
    cid = await asyncio.wait_for(asked, timeout=30)
    await asyncio.to_thread(first.kill)  # the replica dies with the question open on its session
    session.cancel()
    await asyncio.gather(session, return_exceptions=True)
    seen: list[Any] = []
    try:
        result = await legacy_call_to(second, "Vilnius", answering("PM101", seen))
    finally:
        await asyncio.to_thread(first.start)

    assert [_continuation_in(params) for params in seen] == [cid]
    assert not result.is_error
    assert continuation_status(second, cid) == "resumed"
    assert await replicas.bookings(cid) == 1
