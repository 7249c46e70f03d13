"""The /mcp router end to end: the official ``mcp`` client against real ``pausemesh demo`` processes.

2026-07-28 clients drive the multi-round-trip by hand (``allow_input_required=True``) so the
tests can restart servers, switch replicas, replay and tamper between the rounds; 2025-11-25
clients answer a live ``elicitation/create`` through the client's elicitation callback.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sqlite3
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CallToolResult,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    TextContent,
)

from pausemesh.demo.flights import BOOKING_DOMAIN, flight_choice_schema
from tests.support.mcp_state import continuation_of
from tests.support.protocol_clients import continuation_status, flight_answer, tool_round
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

TOOL = "book_flight"


@pytest.fixture(name="data_dir", scope="module")
def data_dir_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-demo")


def _demo(data_dir: Path) -> ServerProcess:
    return ServerProcess(
        ["demo", "--no-browser", "--database-path", str(data_dir / "pausemesh.db")],
        env={"PAUSEMESH_DATA_DIR": str(data_dir)},
    )


@pytest.fixture(name="server", scope="module")
def server_fixture(data_dir: Path) -> Iterator[ServerProcess]:
    with _demo(data_dir) as server:
        yield server


def bookings(data_dir: Path) -> list[tuple[str, str]]:
    """(business key, result) of every recorded booking, read straight from the database."""
    with sqlite3.connect(f"file:{data_dir / 'pausemesh.db'}?mode=ro", uri=True) as db:
        rows = db.execute(
            "SELECT business_key, result_json FROM operations WHERE domain = ?", (BOOKING_DOMAIN,)
        ).fetchall()
    return [(str(key), str(result)) for key, result in rows]


def text_of(result: CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def _call(
    server: ServerProcess,
    destination: str,
    state: str | None = None,
    responses: dict[str, ElicitResult] | None = None,
    *,
    elicit: bool = True,
) -> CallToolResult | InputRequiredResult:
    return await tool_round(
        server.url("/mcp"),
        TOOL,
        {"destination": destination},
        state=state,
        responses=responses,
        elicit=elicit,
    )


async def first_round(server: ServerProcess, destination: str = "Lisbon") -> InputRequiredResult:
    result = await _call(server, destination)
    assert isinstance(result, InputRequiredResult)
    return result


async def retry(
    server: ServerProcess,
    state: str | None,
    responses: dict[str, ElicitResult] | None,
    destination: str = "Lisbon",
) -> CallToolResult | InputRequiredResult:
    return await _call(server, destination, state, responses)


# -- 2026-07-28: input_required + requestState -------------------------------------------


async def test_modern_call_asks_with_the_flight_form_and_a_sealed_state(
    server: ServerProcess,
) -> None:
    first = await first_round(server)

    assert first.input_requests is not None
    request = first.input_requests["flight"]
    assert request.method == "elicitation/create"
    assert isinstance(request.params, ElicitRequestFormParams)
    assert request.params.requested_schema == flight_choice_schema()
    assert first.request_state is not None
    assert continuation_status(server, continuation_of(first.request_state)) == "pending"


async def test_modern_answer_books_once_and_confirms(server: ServerProcess, data_dir: Path) -> None:
    first = await first_round(server)

    done = await retry(server, first.request_state, flight_answer("PM202"))

    assert isinstance(done, CallToolResult)
    assert not done.is_error
    assert done.structured_content is not None
    assert done.structured_content["flight"] == "PM202"
    assert done.structured_content["booked"] is True
    assert "Booked flight PM202 to Lisbon" in text_of(done)
    assert first.request_state is not None
    cid = continuation_of(first.request_state)
    assert continuation_status(server, cid) == "resumed"
    assert [key for key, _ in bookings(data_dir)].count(cid) == 1


async def test_the_same_retry_twice_books_once(server: ServerProcess, data_dir: Path) -> None:
    first = await first_round(server)

    one = await retry(server, first.request_state, flight_answer("PM303"))
    two = await retry(server, first.request_state, flight_answer("PM303"))

    assert isinstance(one, CallToolResult)
    assert isinstance(two, CallToolResult)
    assert one.structured_content == two.structured_content
    assert first.request_state is not None
    cid = continuation_of(first.request_state)
    assert [key for key, _ in bookings(data_dir)].count(cid) == 1


async def test_twenty_concurrent_retries_book_once(server: ServerProcess, data_dir: Path) -> None:
    first = await first_round(server)

    results = await asyncio.gather(
        *(retry(server, first.request_state, flight_answer("PM202")) for _ in range(20))
    )

    contents = [r.structured_content for r in results if isinstance(r, CallToolResult)]
    assert len(contents) == 20
    assert all(content == contents[0] for content in contents)
    assert first.request_state is not None
    cid = continuation_of(first.request_state)
    assert [key for key, _ in bookings(data_dir)].count(cid) == 1


async def test_a_different_answer_after_the_fact_is_refused(server: ServerProcess) -> None:
    first = await first_round(server)
    await retry(server, first.request_state, flight_answer("PM101"))

    with pytest.raises(MCPError) as refused:
        await retry(server, first.request_state, flight_answer("PM202"))
    assert refused.value.error.code == -32602


@pytest.mark.parametrize(
    "answer",
    [
        {"flight": "PM999"},
        {"flight": 101},
        {},
        {"flight": "PM101", "seat": "12A"},
    ],
    ids=["not-offered", "wrong-type", "missing", "extra-field"],
)
async def test_an_answer_outside_the_schema_is_refused_and_the_pause_stays_pending(
    server: ServerProcess, answer: dict[str, Any]
) -> None:
    first = await first_round(server)
    assert first.request_state is not None
    cid = continuation_of(first.request_state)

    with pytest.raises(MCPError) as refused:
        await retry(
            server, first.request_state, {"flight": ElicitResult(action="accept", content=answer)}
        )

    assert refused.value.error.code == -32602
    assert continuation_status(server, cid) == "pending"
    # Still answerable: the same state with a good answer completes.
    done = await retry(server, first.request_state, flight_answer("PM101"))
    assert isinstance(done, CallToolResult)
    assert not done.is_error


def _tampered(state: str) -> list[str]:
    prefix, key_id, body, signature = state.split(".")
    envelope = json.loads(base64.urlsafe_b64decode(body + "=="))
    inner = json.loads(envelope["s"])
    inner["continuation_id"] = "someone-elses"
    envelope["s"] = json.dumps(inner)
    forged = base64.urlsafe_b64encode(json.dumps(envelope).encode()).rstrip(b"=").decode()
    flipped = signature[:-2] + ("AA" if signature[-2:] != "AA" else "BB")
    return [
        f"{prefix}.{key_id}.{forged}.{signature}",
        f"{prefix}.{key_id}.{body}.{flipped}",
        f"{prefix}.other-key.{body}.{signature}",
        "v1.not-ours",
        "",
    ]


async def test_a_tampered_request_state_gets_the_invalid_state_error(
    server: ServerProcess,
) -> None:
    first = await first_round(server)
    assert first.request_state is not None

    for forged in _tampered(first.request_state):
        with pytest.raises(MCPError) as refused:
            await retry(server, forged, flight_answer("PM101"))
        assert refused.value.error.code == -32602
        assert refused.value.error.message == "Invalid or expired requestState"
    assert continuation_status(server, continuation_of(first.request_state)) == "pending"


async def test_a_state_is_bound_to_the_tool_arguments(server: ServerProcess) -> None:
    first = await first_round(server, destination="Lisbon")

    with pytest.raises(MCPError) as refused:
        await retry(server, first.request_state, flight_answer("PM101"), destination="Porto")

    assert refused.value.error.message == "Invalid or expired requestState"


async def test_a_retry_without_the_answer_asks_again(server: ServerProcess) -> None:
    first = await first_round(server)

    again = await retry(server, first.request_state, None)

    assert isinstance(again, InputRequiredResult)
    assert again.request_state is not None
    assert first.request_state is not None
    assert continuation_of(again.request_state) == continuation_of(first.request_state)


async def test_decline_over_the_round_trip_books_nothing(
    server: ServerProcess, data_dir: Path
) -> None:
    first = await first_round(server)
    assert first.request_state is not None

    done = await retry(server, first.request_state, {"flight": ElicitResult(action="decline")})

    assert isinstance(done, CallToolResult)
    assert done.structured_content == {"booked": False, "action": "decline"}
    cid = continuation_of(first.request_state)
    assert continuation_status(server, cid) == "cancelled"
    assert cid not in [key for key, _ in bookings(data_dir)]


async def test_the_retry_completes_after_a_restart_and_on_another_replica(
    data_dir: Path, tmp_path: Path
) -> None:
    # A private pair of servers on one database: restart one, then answer on the other.
    own = tmp_path / "replicas"
    own.mkdir()
    with _demo(own) as primary:
        first = await first_round(primary)
        primary.restart()
        assert first.request_state is not None
        assert continuation_status(primary, continuation_of(first.request_state)) == "pending"
        with _demo(own) as replica:
            done = await retry(replica, first.request_state, flight_answer("PM202"))
            replay = await retry(primary, first.request_state, flight_answer("PM202"))

    assert isinstance(done, CallToolResult)
    assert isinstance(replay, CallToolResult)
    assert done.structured_content is not None
    assert done.structured_content["flight"] == "PM202"
    assert replay.structured_content == done.structured_content
    assert len(bookings(own)) == 1


# -- 2025-11-25: live elicitation -------------------------------------------------------

Answerer = Callable[[Any, Any], Awaitable[ElicitResult]]


def answering(result: ElicitResult, seen: list[Any]) -> Answerer:
    async def callback(_context: Any, params: Any) -> ElicitResult:
        seen.append(params)
        return result

    return callback


async def legacy_call(server: ServerProcess, callback: Answerer | None) -> CallToolResult:
    error: MCPError | None = None
    async with Client(server.url("/mcp"), mode="legacy", elicitation_callback=callback) as client:  # type: ignore[arg-type]
        try:
            return await client.call_tool(TOOL, {"destination": "Oslo"})
        except MCPError as refused:
            error = refused
    raise error


def _continuation_in(params: Any) -> str:
    meta = params.meta["io.pausemesh/continuation"]
    cid: str = meta["continuationId"]
    return cid


async def test_legacy_live_elicitation_books_once(server: ServerProcess, data_dir: Path) -> None:
    seen: list[Any] = []

    result = await legacy_call(
        server, answering(ElicitResult(action="accept", content={"flight": "PM101"}), seen)
    )

    assert not result.is_error
    assert "Booked flight PM101 to Oslo" in text_of(result)
    (params,) = seen
    assert isinstance(params, ElicitRequestFormParams)
    assert params.requested_schema == flight_choice_schema()
    cid = _continuation_in(params)
    assert continuation_status(server, cid) == "resumed"
    assert [key for key, _ in bookings(data_dir)].count(cid) == 1


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_legacy_decline_and_cancel_book_nothing(
    server: ServerProcess, data_dir: Path, action: str
) -> None:
    seen: list[Any] = []

    result = await legacy_call(server, answering(ElicitResult(action=action), seen))  # type: ignore[arg-type]

    assert result.structured_content == {"booked": False, "action": action}
    cid = _continuation_in(seen[0])
    assert continuation_status(server, cid) == "cancelled"
    assert cid not in [key for key, _ in bookings(data_dir)]


async def test_legacy_answer_outside_the_schema_is_refused(server: ServerProcess) -> None:
    seen: list[Any] = []
    callback = answering(ElicitResult(action="accept", content={"flight": "PM999"}), seen)

    with pytest.raises(MCPError) as refused:
        await legacy_call(server, callback)

    assert refused.value.error.code == -32602
    assert continuation_status(server, _continuation_in(seen[0])) == "pending"


async def test_a_client_that_cannot_elicit_is_told_which_capability_is_missing(
    server: ServerProcess,
) -> None:
    with pytest.raises(MCPError) as legacy_refused:
        await legacy_call(server, None)
    assert legacy_refused.value.error.code == -32021

    with pytest.raises(MCPError) as refused:
        await _call(server, "Lisbon", elicit=False)  # no callback: no capability declared
    assert refused.value.error.code == -32021
