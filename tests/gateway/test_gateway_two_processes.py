"""Two gateway processes on one database (SQLite file or PostgreSQL schema): the ledger's
durable attempt decides which one dispatches, not either process's memory."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from tests.support.gateway import GatewayCase, call, gateway_client, invoice, until_lines

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


async def test_twenty_identical_calls_split_across_two_gateway_processes_dispatch_once(
    case: GatewayCase,
) -> None:
    await case.pin()
    case.set_control(delay=1)
    async with (
        gateway_client(case.stdio("--worker", "gw-a")) as first,
        gateway_client(case.stdio("--worker", "gw-b")) as second,
    ):
        # Both processes are up (their upstream sessions too) before the burst.
        await call(first, "create_invoice", invoice("warm-a"))
        await call(second, "create_invoice", invoice("warm-b"))
        results = await asyncio.gather(
            *(call(client, "create_invoice", invoice()) for client in [first, second] * 10)
        )
        after = [await call(client, "create_invoice", invoice()) for client in (first, second)]
    statuses = Counter(result["status"] for result in results)
    assert statuses["RESPONSE_RETAINED"] == 1
    assert set(statuses) <= {"RESPONSE_RETAINED", "BUSY", "RECONCILIATION_ONLY"}
    assert len({result["operationId"] for result in results}) == 1
    assert [result["status"] for result in after] == ["RECONCILIATION_ONLY"] * 2
    assert [line["order_id"] for line in case.lines()].count("A-1") == 1


async def test_an_attempt_of_a_retired_worker_is_unknown_not_busy_for_another_process(
    case: GatewayCase,
) -> None:
    release = case.root / "release"
    case.set_control(hold=str(release))
    # gw-a's upstream call is held until the release, however slowly gw-b starts: the job's
    # timeout must not end the attempt first (that would make it OUTCOME_UNKNOWN, not BUSY).
    case.jobs[0]["timeout_seconds"] = 300
    await case.pin()
    async with gateway_client(case.stdio("--worker", "gw-a")) as first:
        in_flight = asyncio.create_task(call(first, "create_invoice", invoice()))
        await until_lines(case, 1)
        async with gateway_client(case.stdio("--worker", "gw-b")) as second:
            busy = await call(second, "create_invoice", invoice())
            case.cli("gateway", "retire", "--worker", "gw-a")
            unknown = await call(second, "create_invoice", invoice())
        release.touch()
        late = await in_flight
    assert busy["status"] == "BUSY"
    assert unknown["status"] == "OUTCOME_UNKNOWN"
    assert late["status"] == "OUTCOME_UNKNOWN"
    assert len(case.lines()) == 1
