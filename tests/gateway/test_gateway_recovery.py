"""Crashes, retirement and the operator's resolution, with real processes: a gateway served
over streamable HTTP (uvicorn) killed with SIGKILL mid-call, ``pausemesh gateway retire`` and
``pausemesh ops`` run as commands, upstreams over stdio and over streamable HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import subprocess
import sys
from typing import Any

import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client

from tests.support.gateway import (
    GatewayCase,
    call,
    gateway_client,
    http_upstream,
    invoice,
    until_lines,
)

# Each test starts several Python processes (gateway, upstream); on a loaded machine that is slow.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

KEY = {"job": "create_invoice", "order_id": "A-1"}


async def test_a_gateway_killed_mid_call_leaves_a_sticky_unknown_that_status_and_why_explain(
    case: GatewayCase,
) -> None:
    await case.pin()
    case.set_control(delay=20)
    with case.http() as server:

        async def doomed_call() -> None:
            async with gateway_client(server.url("/mcp")) as client:
                await call(client, "create_invoice", invoice())

        in_flight = asyncio.create_task(doomed_call())
        await until_lines(case, 1)
        server.kill()
        # The client sees its connection drop (an ExceptionGroup from its task group).
        with contextlib.suppress(Exception):
            await asyncio.wait_for(in_flight, 30)
        case.set_control()
        server.start()
        async with gateway_client(server.url("/mcp")) as client:
            status = await call(client, "continuity_status", KEY)
            why = await call(client, "continuity_why", KEY)
            repeats = [await call(client, "create_invoice", invoice()) for _ in range(10)]
    assert status["status"] == "OUTCOME_UNKNOWN"
    assert status["dispatchedBy"]["worker"] == "gw-1"
    assert "completedAt" not in status
    assert "never send this operation again" in why["explanation"]
    assert {r["status"] for r in repeats} == {"OUTCOME_UNKNOWN"}
    assert len(case.lines()) == 1


async def test_a_retired_worker_cannot_record_its_late_reply_and_the_replacement_only_inspects(
    case: GatewayCase,
) -> None:
    # The upstream holds the call until the release, after the retire command (a process
    # start): the job's timeout must not end the attempt first.
    case.jobs[0]["timeout_seconds"] = 300
    await case.pin()
    release = case.root / "release"
    case.set_control(hold=str(release))
    async with gateway_client(case.stdio()) as retired:
        in_flight = asyncio.create_task(call(retired, "create_invoice", invoice()))
        await until_lines(case, 1)
        retire = case.cli("gateway", "retire", "--worker", "gw-1")
        release.touch()  # the upstream answers only now, after the retirement
        late = await in_flight
        case.set_control()
        after = await call(retired, "create_invoice", invoice("B-2"))
        inspect_after = await call(retired, "continuity_status", KEY)
    async with gateway_client(case.stdio("--worker", "gw-2")) as replacement:
        status = await call(replacement, "continuity_status", KEY)
        rerun = await call(replacement, "create_invoice", invoice())
    assert "epoch is now 2" in retire.stdout
    assert late["status"] == "OUTCOME_UNKNOWN"
    assert late["reason"] == "RUNTIME_NOT_CURRENT"
    assert after["status"] == "REFUSED"
    assert after["reason"] == "RUNTIME_NOT_CURRENT"
    assert inspect_after["reason"] == "RUNTIME_NOT_CURRENT"
    assert status["status"] == "OUTCOME_UNKNOWN"
    assert status["dispatchedBy"] == {**status["dispatchedBy"], "worker": "gw-1", "epoch": 1}
    assert status["dispatchedBy"]["workerCurrent"] is False
    assert rerun["status"] == "OUTCOME_UNKNOWN"
    assert [line["order_id"] for line in case.lines()] == ["A-1"]


def _ops(case: GatewayCase, *args: str, check: bool = True) -> Any:
    done = case.cli("ops", *args, check=check)
    return json.loads(done.stdout) if check else done


async def test_ops_resolve_records_an_audited_resolution_and_later_calls_reconcile_to_it(
    case: GatewayCase,
) -> None:
    await case.pin()
    case.set_control(exit=True)
    async with gateway_client(case.stdio()) as client:
        lost = await call(client, "create_invoice", invoice())
    case.set_control()
    op = lost["operationId"]
    listed = _ops(case, "list")
    result_file = case.root / "found.json"
    result_file.write_text(json.dumps({"invoice": "inv-A-1", "checkedIn": "billing system"}))
    resolved = _ops(
        case,
        "resolve",
        op,
        "--result-file",
        str(result_file),
        "--reason",
        "found in billing",
        "--by",
        "ops-alice",
        check=False,
    )
    status = _ops(case, "status", op)
    why = _ops(case, "why", op)
    again = _ops(
        case, "resolve", op, "--result-file", str(result_file), "--reason", "twice", check=False
    )
    async with gateway_client(case.stdio()) as client:
        reconciled = await call(client, "create_invoice", invoice())
    assert lost["status"] == "OUTCOME_UNKNOWN"
    assert [(o["operationId"], o["status"]) for o in listed] == [(op, "OUTCOME_UNKNOWN")]
    assert resolved.returncode == 0, resolved.stderr
    # What resolve printed is what was stored (read back by a separate ops status process).
    printed = json.loads(resolved.stdout)
    assert printed["resolution"]["resolvedAt"] == status["resolution"]["resolvedAt"]
    assert printed["resolution"]["resolvedBy"] == "ops-alice"
    assert status["status"] == "RESPONSE_RETAINED"
    assert status["resolvedByOperator"] is True
    assert status["resolution"]["resolvedBy"] == "ops-alice"
    assert status["resolution"]["reason"] == "found in billing"
    assert "ops-alice resolved it" in why["explanation"]
    assert again.returncode == 1
    assert "OPERATION_NOT_UNKNOWN" in again.stderr
    assert reconciled["status"] == "RECONCILIATION_ONLY"
    assert reconciled["resolvedByOperator"] is True
    assert reconciled["upstreamResult"] == {"invoice": "inv-A-1", "checkedIn": "billing system"}
    assert len(case.lines()) == 1


async def test_an_upstream_over_streamable_http_is_called_once(case: GatewayCase) -> None:
    async with http_upstream(case), gateway_client(case.stdio()) as client:
        first = await call(client, "create_invoice", invoice())
        second = await call(client, "create_invoice", invoice())
    assert (first["status"], second["status"]) == ("RESPONSE_RETAINED", "RECONCILIATION_ONLY")
    assert len(case.lines()) == 1


async def _as(url: str, user: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return await _with_headers(url, {"x-user": user}, tool, arguments)


async def _with_headers(
    url: str, headers: dict[str, str], tool: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    http = httpx2.AsyncClient(headers=headers, timeout=60)
    try:
        async with gateway_client(streamable_http_client(url, http_client=http)) as client:
            return await call(client, tool, arguments)
    finally:
        await http.aclose()


async def test_over_http_each_principal_gets_its_roles_and_an_anonymous_caller_a_401(
    case: GatewayCase,
) -> None:
    case.access = (
        '[access]\n[access.roles]\noperator = ["execute", "inspect"]\nauditor = ["inspect"]\n'
        '[access.principals]\nalice = ["operator"]\nbob = ["auditor"]\n'
    )
    await case.pin()
    resolver = "tests.support.principals:header_principal"
    with case.http("--principal-resolver", resolver) as server:
        url = server.url("/mcp")
        async with httpx2.AsyncClient() as http:
            anonymous = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        ran = await _as(url, "alice", "create_invoice", invoice())
        refused = await _as(url, "bob", "create_invoice", invoice("B-2"))
        status = await _as(url, "bob", "continuity_status", KEY)
    assert anonymous.status_code == 401
    assert anonymous.json()["code"] == "UNAUTHENTICATED"
    assert ran["status"] == "RESPONSE_RETAINED"
    assert refused["status"] == "DENIED"
    assert status["status"] == "RESPONSE_RETAINED"
    assert status["permission"] == ["inspect"]
    assert [line["order_id"] for line in case.lines()] == ["A-1"]


def _api_key(case: GatewayCase, keys: str, principal: str, *roles: str) -> str:
    role_args = [arg for role in roles for arg in ("--role", role)]
    created = subprocess.run(
        [
            sys.executable,
            "-m",
            "pausemesh",
            "keys",
            "create",
            "--principal",
            principal,
            *role_args,
            "--file",
            keys,
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=case.root,
        timeout=60,
    )
    made: list[str] = re.findall(r"pmk_\S+", created.stdout)
    return made[-1]


async def test_roles_from_the_identity_provider_grant_the_permissions_the_config_defines(
    case: GatewayCase,
) -> None:
    # No [access.principals]: what carol and dave may do comes from their keys' roles alone.
    case.access = (
        '[access]\n[access.roles]\noperator = ["execute", "inspect"]\nauditor = ["inspect"]\n'
    )
    await case.pin()
    keys = str(case.root / "api-keys.json")
    operator = _api_key(case, keys, "carol", "operator")
    auditor = _api_key(case, keys, "dave", "auditor")
    stranger = _api_key(case, keys, "erin", "unknown-role")
    with case.http(env={"PAUSEMESH_AUTH_API_KEYS_FILE": keys}) as server:
        url = server.url("/mcp")
        ran = await _with_headers(
            url, {"authorization": f"Bearer {operator}"}, "create_invoice", invoice()
        )
        refused = await _with_headers(
            url, {"authorization": f"Bearer {auditor}"}, "create_invoice", invoice("B-2")
        )
        status = await _with_headers(
            url, {"authorization": f"Bearer {auditor}"}, "continuity_status", KEY
        )
        nothing = await _with_headers(
            url, {"authorization": f"Bearer {stranger}"}, "continuity_status", KEY
        )
    assert ran["status"] == "RESPONSE_RETAINED"
    assert (refused["status"], refused["reason"]) == ("DENIED", "EXECUTE_NOT_PERMITTED")
    assert status["status"] == "RESPONSE_RETAINED"
    assert status["permission"] == ["inspect"]
    assert (nothing["status"], nothing["reason"]) == ("DENIED", "INSPECT_NOT_PERMITTED")
    assert [line["order_id"] for line in case.lines()] == ["A-1"]


async def test_the_gateways_http_mount_has_the_body_limit_and_json_checks_of_mcp(
    case: GatewayCase,
) -> None:
    await case.pin()
    with case.http() as server:
        url = server.url("/mcp")
        headers = {"accept": "application/json, text/event-stream"}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            huge = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "y" * 200_000}}
            too_large = await http.post(url, json=huge)
            not_json = await http.post(
                url, content=b"{not json", headers={"content-type": "application/json"}
            )
            not_rpc = await http.post(url, json={"hello": "world"})
        # Nothing reached the SDK or the upstream, and the gateway still works.
        ran = await _as_anonymous(url)
    assert too_large.status_code == 413
    assert too_large.json()["code"] == "PAYLOAD_TOO_LARGE"
    assert not_json.status_code == 400
    assert not_json.json()["error"]["code"] == -32700
    assert not_rpc.status_code == 400
    assert not_rpc.json()["error"]["code"] == -32600
    assert ran["status"] == "RESPONSE_RETAINED"
    assert len(case.lines()) == 1


async def _as_anonymous(url: str) -> dict[str, Any]:
    return await _with_headers(url, {}, "create_invoice", invoice())
