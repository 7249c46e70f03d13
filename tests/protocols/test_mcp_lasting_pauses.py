"""A 2025-11-25 MCP question outlives the session that asked it.

Official ``mcp`` clients against a real ``pausemesh demo`` process: a legacy client is asked
which flight, then goes away without answering. A new legacy session calling the same tool with
the same arguments is asked the same pending question (not a new pause); so is a 2026-07-28
client, which answers by the usual retry. One answer, one booking, whichever path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp_types import CallToolResult, ElicitResult, InputRequiredResult

from tests.protocols.test_mcp_router import TOOL, _continuation_in, _demo, bookings
from tests.support.mcp_state import continuation_of
from tests.support.protocol_clients import continuation_status, flight_answer, tool_round
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow


@pytest.fixture(name="data_dir", scope="module")
def data_dir_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-lasting")


@pytest.fixture(name="server", scope="module")
def server_fixture(data_dir: Path) -> Iterator[ServerProcess]:
    with _demo(data_dir) as server:
        yield server


async def asked_then_gone(server: ServerProcess, destination: str) -> str:
    """A legacy session is asked, then disconnects unanswered; the pause it was asked."""
    asked: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def never_answers(_context: Any, params: Any) -> ElicitResult:
        asked.set_result(_continuation_in(params))
        await asyncio.Event().wait()
        raise AssertionError

    async def call() -> None:
        # The callback's first parameter is unused (named ``_context``, not the protocol's name).
        async with Client(
            server.url("/mcp"),
            mode="legacy",
            elicitation_callback=never_answers,  # type: ignore[arg-type]
        ) as client:
            await client.call_tool(TOOL, {"destination": destination})

    session = asyncio.create_task(call())
    cid = await asyncio.wait_for(asked, timeout=30)
    session.cancel()
    with pytest.raises(asyncio.CancelledError):
        await session
    return cid


def booked(data_dir: Path, cid: str) -> int:
    return [key for key, _ in bookings(data_dir)].count(cid)


async def test_a_new_legacy_session_is_asked_the_same_pending_question_and_books_once(
    server: ServerProcess, data_dir: Path
) -> None:
    cid = await asked_then_gone(server, "Riga")
    assert continuation_status(server, cid) == "pending"
    seen: list[Any] = []

    async def answers(_context: Any, params: Any) -> ElicitResult:
        seen.append(params)
        return ElicitResult(action="accept", content={"flight": "PM202"})

    result = await legacy_call_to(server, "Riga", answers)

    assert [_continuation_in(params) for params in seen] == [cid]
    assert not result.is_error
    assert continuation_status(server, cid) == "resumed"
    assert booked(data_dir, cid) == 1


async def test_a_modern_client_answers_the_abandoned_legacy_question_by_retry_once(
    server: ServerProcess, data_dir: Path
) -> None:
    cid = await asked_then_gone(server, "Tallinn")
    arguments = {"destination": "Tallinn"}

    first = await tool_round(server.url("/mcp"), TOOL, arguments)
    assert isinstance(first, InputRequiredResult)
    assert first.request_state is not None
    assert continuation_of(first.request_state) == cid

    done = await tool_round(
        server.url("/mcp"),
        TOOL,
        arguments,
        state=first.request_state,
        responses=flight_answer("PM303"),
    )
    replay = await tool_round(
        server.url("/mcp"),
        TOOL,
        arguments,
        state=first.request_state,
        responses=flight_answer("PM303"),
    )

    assert isinstance(done, CallToolResult)
    assert done.structured_content is not None
    assert done.structured_content["booked"] is True
    assert isinstance(replay, CallToolResult)
    assert replay.structured_content == done.structured_content
    assert continuation_status(server, cid) == "resumed"
    assert booked(data_dir, cid) == 1


async def test_once_answered_the_same_call_opens_a_new_question(
    server: ServerProcess, data_dir: Path
) -> None:
    cid = await asked_then_gone(server, "Vilnius")
    first = await tool_round(server.url("/mcp"), TOOL, {"destination": "Vilnius"})
    assert isinstance(first, InputRequiredResult)
    assert first.request_state is not None
    await tool_round(
        server.url("/mcp"),
        TOOL,
        {"destination": "Vilnius"},
        state=first.request_state,
        responses=flight_answer("PM101"),
    )

    again = await tool_round(server.url("/mcp"), TOOL, {"destination": "Vilnius"})

    assert isinstance(again, InputRequiredResult)
    assert again.request_state is not None
    assert continuation_of(again.request_state) != cid
    assert booked(data_dir, cid) == 1


async def legacy_call_to(server: ServerProcess, destination: str, callback: Any) -> CallToolResult:
    async with Client(server.url("/mcp"), mode="legacy", elicitation_callback=callback) as client:
        return await client.call_tool(TOOL, {"destination": destination})
