"""MCP authorization pauses end to end: URL mode only, completed by the trusted callback.

The demo's ``connect_airline_account`` sends the user to ``/demo/airline/connect``; opening
that page is the out-of-band callback that resumes the pause. Official ``mcp`` client against
a real ``pausemesh demo`` process, both eras.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest
from mcp import Client
from mcp_types import (
    CallToolResult,
    ElicitCompleteNotification,
    ElicitRequestURLParams,
    ElicitResult,
    InputRequiredResult,
)

from tests.support.mcp_state import continuation_of
from tests.support.protocol_clients import continuation_status, tool_round
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

TOOL = "connect_airline_account"


@pytest.fixture(name="server", scope="module")
def server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("mcp-authorization")
    server = ServerProcess(
        ["demo", "--no-browser", "--database-path", str(data / "pausemesh.db")],
        env={"PAUSEMESH_DATA_DIR": str(data)},
    )
    with server:
        yield server


def pause_of(url: str) -> str:
    return dict(parse_qsl(urlsplit(url).query))["state"]


async def open_link(url: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=10) as http:
        return await http.get(url)


async def legacy_call(
    server: ServerProcess, action: str, *, visit: bool
) -> tuple[CallToolResult, list[Any], list[Any]]:
    seen: list[Any] = []
    notes: list[Any] = []
    visits: list[asyncio.Task[httpx.Response]] = []

    async def on_elicit(_context: Any, params: Any) -> ElicitResult:
        seen.append(params)
        if visit:
            # The user opens the link in a browser while the client answers "accept".
            visits.append(asyncio.create_task(open_link(params.url)))
        return ElicitResult(action=action)  # type: ignore[arg-type]

    async def on_message(message: Any) -> None:
        notes.append(message)

    async with Client(
        server.url("/mcp"),
        mode="legacy",
        elicitation_callback=on_elicit,  # type: ignore[arg-type]
        message_handler=on_message,
    ) as client:
        result = await client.call_tool(TOOL, {})
    for task in visits:
        assert (await task).status_code == 200
    return result, seen, notes


async def test_legacy_url_elicitation_completes_through_the_callback(server: ServerProcess) -> None:
    result, seen, notes = await legacy_call(server, "accept", visit=True)

    assert result.structured_content == {"connected": True, "airline": "PauseMesh Air"}
    (params,) = seen
    assert isinstance(params, ElicitRequestURLParams)
    assert params.mode == "url"
    assert urlsplit(params.url).path == "/demo/airline/connect"
    cid = pause_of(params.url)
    assert params.elicitation_id == cid
    assert continuation_status(server, cid) == "resumed"
    completions = [n for n in notes if isinstance(n, ElicitCompleteNotification)]
    assert [n.params.elicitation_id for n in completions] == [cid]


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_legacy_refusal_cancels_the_pause(server: ServerProcess, action: str) -> None:
    result, seen, _ = await legacy_call(server, action, visit=False)

    assert result.structured_content == {"connected": False, "action": action}
    assert continuation_status(server, pause_of(seen[0].url)) == "cancelled"


async def _modern(
    server: ServerProcess, state: str | None = None, action: str | None = None
) -> CallToolResult | InputRequiredResult:
    responses = None if action is None else {"authorization": ElicitResult(action=action)}  # type: ignore[arg-type]
    return await tool_round(server.url("/mcp"), TOOL, {}, state=state, responses=responses)


async def test_modern_retry_asks_again_until_the_callback_resumed_the_pause(
    server: ServerProcess,
) -> None:
    first = await _modern(server)
    assert isinstance(first, InputRequiredResult)
    assert first.input_requests is not None
    params = first.input_requests["authorization"].params
    assert isinstance(params, ElicitRequestURLParams)
    cid = pause_of(params.url)

    early = await _modern(server, first.request_state, "accept")
    assert isinstance(early, InputRequiredResult)  # consent is not completion
    assert continuation_status(server, cid) == "pending"

    assert (await open_link(params.url)).status_code == 200
    assert (await open_link(params.url)).status_code == 200  # the same callback again: idempotent
    done = await _modern(server, first.request_state, "accept")

    assert isinstance(done, CallToolResult)
    assert done.structured_content == {"connected": True, "airline": "PauseMesh Air"}
    assert continuation_status(server, cid) == "resumed"


async def test_the_callback_refuses_a_pause_that_is_not_an_authorization(
    server: ServerProcess,
) -> None:
    async def never(_context: Any, _params: Any) -> ElicitResult:
        raise AssertionError

    async with Client(server.url("/mcp"), mode="2026-07-28", elicitation_callback=never) as client:  # type: ignore[arg-type]
        question = await client.session.call_tool(
            "book_flight", {"destination": "Rome"}, allow_input_required=True
        )
    assert isinstance(question, InputRequiredResult)
    assert question.request_state is not None
    flight_pause = continuation_of(question.request_state)

    for pause in (flight_pause, "no-such-pause"):
        refused = await open_link(server.url(f"/demo/airline/connect?state={pause}"))
        assert refused.status_code == 409
    assert continuation_status(server, flight_pause) == "pending"
