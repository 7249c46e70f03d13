"""``pausemesh ops resolve`` as a command against a real SQLite file: it refuses while a
current worker still waits for the upstream's reply (``OPERATION_IN_FLIGHT``), works once that
worker is fenced or has declared the outcome unknown, and refuses bad input with a clear code."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.gateway import GatewayCase, call, gateway_client, invoice, until_lines

# Each test starts several Python processes (gateway, upstream, CLI); on a loaded machine that is slow.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


def _resolve(case: GatewayCase, op: str, result: Any = None) -> subprocess.CompletedProcess[str]:
    found = case.root / "found.json"
    found.write_text(json.dumps(result or {"invoice": "inv-A-1", "checkedIn": "billing"}))
    return case.cli(
        "ops",
        "resolve",
        op,
        "--result-file",
        str(found),
        "--reason",
        "found in billing",
        "--by",
        "ops-alice",
        check=False,
    )


def _status(case: GatewayCase, op: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(case.cli("ops", "status", op).stdout)
    return body


def _stored_resolutions(case: GatewayCase) -> list[tuple[str, str, str]]:
    with sqlite3.connect(f"file:{case.database}?mode=ro", uri=True) as db:
        rows = db.execute(
            "SELECT operation_id, resolved_by, reason FROM operation_resolutions"
        ).fetchall()
    return [tuple(row) for row in rows]


async def test_ops_resolve_refuses_an_operation_a_current_worker_is_dispatching_until_it_is_retired(
    tmp_path: Path,
) -> None:
    case = GatewayCase(tmp_path)
    case.jobs[0]["timeout_seconds"] = 120  # the worker keeps waiting for the whole test
    await case.pin()
    release = case.root / "release"
    case.set_control(hold=str(release))
    async with gateway_client(case.stdio()) as client:
        in_flight = asyncio.create_task(call(client, "create_invoice", invoice()))
        await until_lines(case, 1)
        listed = json.loads(case.cli("ops", "list").stdout)
        op = listed[0]["operationId"]
        refused = _resolve(case, op)
        before = _status(case, op)
        case.cli("gateway", "retire", "--worker", "gw-1")
        resolved = _resolve(case, op)
        release.touch()  # the upstream answers only now: the retired worker cannot record it
        late = await in_flight
    after = _status(case, op)
    printed = json.loads(resolved.stdout)
    assert refused.returncode == 1
    assert "OPERATION_IN_FLIGHT" in refused.stderr
    assert "still waiting for the upstream's reply" in refused.stderr
    assert before["status"] == "OUTCOME_UNKNOWN"
    assert "resolution" not in before
    assert resolved.returncode == 0, resolved.stderr
    assert printed["status"] == "RESPONSE_RETAINED"
    assert printed["resolution"]["resolvedBy"] == "ops-alice"
    assert after["resolution"]["resolvedAt"] == printed["resolution"]["resolvedAt"]
    assert _stored_resolutions(case) == [(op, "ops-alice", "found in billing")]
    # The worker's own call ends with the recorded outcome: the operator's, not the late reply.
    assert late["status"] == "RECONCILIATION_ONLY"
    assert late["resolvedByOperator"] is True
    assert late["upstreamResult"] == {"invoice": "inv-A-1", "checkedIn": "billing"}
    assert len(case.lines()) == 1


async def test_ops_resolve_works_at_once_after_the_worker_timed_out_and_declared_the_outcome_unknown(
    tmp_path: Path,
) -> None:
    case = GatewayCase(tmp_path)
    case.jobs[0]["timeout_seconds"] = 1
    await case.pin()
    release = case.root / "release"
    case.set_control(hold=str(release))
    async with gateway_client(case.stdio()) as client:
        timed_out = await call(client, "create_invoice", invoice())
        op = timed_out["operationId"]
        declared = _status(case, op)
        resolved = _resolve(case, op)
        release.touch()
        repeat = await call(client, "create_invoice", invoice())
    assert (timed_out["status"], timed_out["reason"]) == ("OUTCOME_UNKNOWN", "UPSTREAM_TIMEOUT")
    # The worker declared it unknown before answering: a late reply can no longer be recorded.
    assert declared["declaredUnknown"]["declaredBy"] == "gw-1"
    assert declared["declaredUnknown"]["reason"] == "UPSTREAM_TIMEOUT"
    assert resolved.returncode == 0, resolved.stderr
    assert json.loads(resolved.stdout)["resolution"]["resolvedBy"] == "ops-alice"
    assert repeat["status"] == "RECONCILIATION_ONLY"
    assert repeat["resolvedByOperator"] is True
    assert len(case.lines()) == 1


async def test_ops_resolve_refuses_an_unknown_operation_and_a_result_file_that_is_not_json(
    tmp_path: Path,
) -> None:
    case = GatewayCase(tmp_path)
    await case.pin()
    case.set_control(exit=True)
    async with gateway_client(case.stdio()) as client:
        lost = await call(client, "create_invoice", invoice())
    op = lost["operationId"]
    unknown = _resolve(case, "op:" + "0" * 64)
    bad = case.root / "bad.json"
    bad.write_text("{not json")
    not_json = case.cli(
        "ops", "resolve", op, "--result-file", str(bad), "--reason", "x", check=False
    )
    missing = case.cli(
        "ops",
        "resolve",
        op,
        "--result-file",
        str(case.root / "nope.json"),
        "--reason",
        "x",
        check=False,
    )
    after = _status(case, op)
    assert (lost["status"], lost["reason"]) == ("OUTCOME_UNKNOWN", "UPSTREAM_FAILED")
    assert unknown.returncode == 1
    assert "OPERATION_NOT_FOUND" in unknown.stderr
    assert not_json.returncode == 1
    assert "INVALID_RESULT_FILE" in not_json.stderr
    assert "must be a readable JSON file" in not_json.stderr
    assert missing.returncode == 1
    assert "INVALID_RESULT_FILE" in missing.stderr
    assert after["status"] == "OUTCOME_UNKNOWN"
    assert _stored_resolutions(case) == []
    assert len(case.lines()) == 1
