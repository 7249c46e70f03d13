"""MCP pauses in process (``mcp.Client(server)``) on a real SQLite runtime with a manual clock.

What a real-time server process cannot show quickly: a pause that expired between the two
rounds, and a pause settled elsewhere (cancelled over REST) before the retry.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from litestar.config.app import AppConfig
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, ElicitRequestURLParams, ElicitResult, InputRequiredResult

from pausemesh.bootstrap import open_runtime
from pausemesh.core.clock import ManualClock
from pausemesh.core.service import ContinuationService
from pausemesh.demo.mcp_tools import register_book_flight
from pausemesh.mcp.elicitation import McpProjectionPolicy
from pausemesh.mcp.pauses import McpPauses
from pausemesh.settings import Settings
from pausemesh.web.config import PauseMeshConfig
from pausemesh.web.mcp_mount import McpPlugin
from pausemesh.web.plugin import PauseMeshPlugin
from tests.support.mcp_state import continuation_of
from tests.support.protocol_clients import flight_answer, tool_round


@dataclass
class Harness:
    plugin: McpPlugin
    clock: ManualClock
    service: ContinuationService


@pytest.fixture(name="harness")
async def harness_fixture(tmp_path: Path) -> AsyncIterator[Harness]:
    settings = Settings(database_path=str(tmp_path / "pausemesh.db"), data_dir=str(tmp_path))
    pausemesh = PauseMeshPlugin(PauseMeshConfig(settings=settings))
    mcp = McpPlugin(register_book_flight)
    mcp.on_app_init(AppConfig(plugins=[pausemesh]))
    clock = ManualClock()
    async with open_runtime(settings, clock=clock, sweeper=False) as runtime:
        pausemesh._runtime = runtime
        yield Harness(plugin=mcp, clock=clock, service=runtime.service)


async def call(
    harness: Harness, state: str | None = None, flight: str | None = None
) -> CallToolResult | InputRequiredResult:
    return await tool_round(
        harness.plugin.server,
        "book_flight",
        {"destination": "Rome"},
        state=state,
        responses=flight_answer(flight),
    )


async def test_an_expired_pause_makes_its_state_invalid(harness: Harness) -> None:
    first = await call(harness)
    assert isinstance(first, InputRequiredResult)
    assert first.request_state is not None

    harness.clock.advance(3600)

    with pytest.raises(MCPError) as refused:
        await call(harness, first.request_state, "PM101")
    assert refused.value.error.code == -32602
    assert refused.value.error.message == "Invalid or expired requestState"
    expired = await harness.service.get(continuation_of(first.request_state))
    assert expired.status == "expired"


async def test_a_pause_cancelled_elsewhere_books_nothing_on_retry(harness: Harness) -> None:
    first = await call(harness)
    assert isinstance(first, InputRequiredResult)
    assert first.request_state is not None
    await harness.service.cancel(
        continuation_id=continuation_of(first.request_state), reason="changed my mind"
    )

    done = await call(harness, first.request_state, "PM101")

    assert isinstance(done, CallToolResult)
    assert done.structured_content == {"booked": False, "action": "cancel"}


async def test_in_process_round_trip_books_once(harness: Harness) -> None:
    first = await call(harness)
    assert isinstance(first, InputRequiredResult)

    one = await call(harness, first.request_state, "PM202")
    two = await call(harness, first.request_state, "PM202")

    assert isinstance(one, CallToolResult)
    assert isinstance(two, CallToolResult)
    assert one.structured_content == two.structured_content
    ledger = harness.plugin.pausemesh.runtime.storage.operations
    assert ledger is not None
    assert len(await ledger.list("demo.flight-bookings")) == 1


def _register_sign_in(server: MCPServer, pauses: McpPauses, _pausemesh: PauseMeshPlugin) -> None:
    @server.tool(name="sign_in")
    async def sign_in(ctx: Context[Any, Any]) -> CallToolResult | InputRequiredResult:
        answer = await pauses.authorize(
            ctx,
            tool="sign_in",
            arguments={},
            message="Sign in to the airline",
            url_for=lambda c: f"https://auth.example.com/connect?state={c.continuation_id}",
        )
        if isinstance(answer, InputRequiredResult):
            return answer
        return CallToolResult(content=[], structured_content={"action": answer.action})


@asynccontextmanager
async def sign_in_plugin(
    tmp_path: Path, policy: McpProjectionPolicy | None
) -> AsyncIterator[tuple[McpPlugin, ContinuationService]]:
    settings = Settings(database_path=str(tmp_path / "auth.db"), data_dir=str(tmp_path))
    pausemesh = PauseMeshPlugin(PauseMeshConfig(settings=settings))
    mcp = McpPlugin(_register_sign_in, policy=policy)
    mcp.on_app_init(AppConfig(plugins=[pausemesh]))
    async with open_runtime(settings, sweeper=False) as runtime:
        pausemesh._runtime = runtime
        yield mcp, runtime.service


async def _sign_in(mcp: McpPlugin) -> CallToolResult | InputRequiredResult:
    return await tool_round(mcp.server, "sign_in", {})


async def test_url_mode_fails_closed_without_a_host_policy(tmp_path: Path) -> None:
    async with sign_in_plugin(tmp_path, None) as (mcp, _):
        with pytest.raises(MCPError) as refused:
            await _sign_in(mcp)
        assert refused.value.error.code == -32600
    # The pause that could not be sent is not left dangling: it was cancelled.
    with sqlite3.connect(tmp_path / "auth.db") as db:
        streams = db.execute("SELECT pending_expires_at_us, version FROM continuation_streams")
        assert streams.fetchall() == [(None, 2)]
        (event,) = db.execute("SELECT event_json FROM continuation_events WHERE version = 2")
    assert json.loads(event[0])["reason"] == "mcp:elicitation_failed"


async def test_url_mode_is_sent_when_the_host_policy_vouches_for_the_link(tmp_path: Path) -> None:
    seen: list[str] = []

    def vouch(url: str) -> bool:
        seen.append(url)
        return url.startswith("https://auth.example.com/connect?")

    async with sign_in_plugin(tmp_path, McpProjectionPolicy(validate_authorization_url=vouch)) as (
        mcp,
        _,
    ):
        first = await _sign_in(mcp)

    assert isinstance(first, InputRequiredResult)
    assert first.input_requests is not None
    params = first.input_requests["authorization"].params
    assert isinstance(params, ElicitRequestURLParams)
    assert seen == [params.url]


async def test_declining_after_accepting_is_refused_and_the_booking_stands(
    harness: Harness,
) -> None:
    first = await call(harness)
    assert isinstance(first, InputRequiredResult)
    assert first.request_state is not None
    await call(harness, first.request_state, "PM303")

    with pytest.raises(MCPError) as refused:
        await tool_round(
            harness.plugin.server,
            "book_flight",
            {"destination": "Rome"},
            state=first.request_state,
            responses={"flight": ElicitResult(action="decline")},
        )
    assert refused.value.error.code == -32602
    settled = await harness.service.get(continuation_of(first.request_state))
    assert settled.status == "resumed"
