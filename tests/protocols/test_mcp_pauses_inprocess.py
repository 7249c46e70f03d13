"""MCP pauses in process (``mcp.Client(server)``) on a real SQLite runtime with a manual clock.

What a real-time server process cannot show quickly: a pause that expired between the two
rounds, and a pause settled elsewhere (cancelled over REST) before the retry.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from litestar.config.app import AppConfig
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, ElicitResult, InputRequiredResult

from pausemesh.bootstrap import open_runtime
from pausemesh.core.clock import ManualClock
from pausemesh.core.service import ContinuationService
from pausemesh.demo.mcp_tools import register_book_flight
from pausemesh.mcp.router import McpPlugin
from pausemesh.settings import Settings
from pausemesh.web.config import PauseMeshConfig
from pausemesh.web.plugin import PauseMeshPlugin
from tests.support.mcp_state import continuation_of


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


async def _never(_context: Any, _params: Any) -> ElicitResult:
    raise AssertionError


async def call(
    harness: Harness, state: str | None = None, flight: str | None = None
) -> CallToolResult | InputRequiredResult:
    responses = (
        None
        if flight is None
        else {"flight": ElicitResult(action="accept", content={"flight": flight})}
    )
    error: MCPError | None = None
    async with Client(
        harness.plugin.server,
        mode="2026-07-28",
        elicitation_callback=_never,  # type: ignore[arg-type]
    ) as client:
        try:
            return await client.session.call_tool(
                "book_flight",
                {"destination": "Rome"},
                allow_input_required=True,
                input_responses=responses,  # type: ignore[arg-type]
                request_state=state,
            )
        except MCPError as refused:
            error = refused
    raise error


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
