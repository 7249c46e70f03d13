"""``pausemesh gateway --stdio`` serves an agent without the web layer: a real gateway process
(started through ``tests.support.loaded_frameworks``, which runs the same command and reports
the modules it loaded when the command returns), an MCP client speaking JSON-RPC on its pipes.

The client is written here rather than taken from the SDK: the SDK's stdio client stops the
server with a signal two seconds after closing its input, which would skip the report.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.gateway import GatewayCase
from tests.support.loaded_frameworks import MARKER

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


async def _send(process: asyncio.subprocess.Process, message: dict[str, Any]) -> None:
    assert process.stdin is not None
    process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
    await process.stdin.drain()


async def _request(
    process: asyncio.subprocess.Process, request_id: int, method: str, params: dict[str, Any]
) -> dict[str, Any]:
    """Send one request and read lines until its answer (skipping notifications)."""
    await _send(process, {"id": request_id, "method": method, "params": params})
    assert process.stdout is not None
    while line := await process.stdout.readline():
        message: dict[str, Any] = json.loads(line)
        if message.get("id") == request_id:
            return message
    raise AssertionError(f"the gateway closed its output before answering {method}")


async def test_the_stdio_gateway_answers_an_agent_without_loading_litestar_or_the_web_layer(
    tmp_path: Path,
) -> None:
    case = GatewayCase(tmp_path)
    await case.pin()
    params = case.stdio(module="tests.support.loaded_frameworks")
    stderr_path = tmp_path / "gateway.stderr"
    with stderr_path.open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            params.command,
            *params.args,
            env=params.env,
            cwd=params.cwd,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
        )
        try:
            initialized = await _request(
                process,
                1,
                "initialize",
                {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "imports-test", "version": "1"},
                },
            )
            await _send(process, {"method": "notifications/initialized"})
            listed = await _request(process, 2, "tools/list", {})
            assert process.stdin is not None
            process.stdin.close()
            returncode = await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    output = stderr_path.read_text()
    reports = [line.removeprefix(MARKER) for line in output.splitlines() if line.startswith(MARKER)]
    assert initialized["result"]["protocolVersion"] == "2025-11-25", output
    assert "create_invoice" in {tool["name"] for tool in listed["result"]["tools"]}
    assert returncode == 0, output
    assert len(reports) == 1, output
    assert json.loads(reports[0]) == []
