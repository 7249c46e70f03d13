"""The continuity gateway in tests: a config over the real upstream script, pinned, served by
real ``pausemesh gateway`` processes, called with the official ``mcp`` client."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import CallToolResult

from pausemesh.core.errors import GatewayError
from pausemesh.gateway.config_load import load_gateway_config
from pausemesh.gateway.lock import default_lock_path, pin, write_lock
from pausemesh.stores.postgres.migrate import migrate
from tests.support.forkserver import launch_command
from tests.support.listeners import holds_listener
from tests.support.server import REPO_ROOT, ServerProcess, free_port

__all__ = ("GatewayCase", "call", "gateway_client", "structured")

UPSTREAM = REPO_ROOT / "tests" / "support" / "upstream_mcp.py"


# Replicas on PostgreSQL must share one server key (the gateway's approvals are keyed).
SERVER_KEY = "gateway-tests-" + "k" * 32


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAUSEMESH_")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    env["PAUSEMESH_SECRET_KEY"] = SERVER_KEY
    return env


@dataclass
class GatewayCase:
    """One gateway deployment in a temporary directory: config, lock, database, upstream files."""

    root: Path
    database_url: str | None = None
    database_schema: str | None = None
    jobs: list[dict[str, Any]] = field(
        default_factory=lambda: [
            {
                "name": "create_invoice",
                "upstream": "invoices",
                "tool": "create_invoice",
                "business_key": "invoice:{order_id}",
                "timeout_seconds": 5,
            }
        ]
    )
    access: str = ""
    upstream_url: str | None = None
    _migrated: bool = field(default=False, init=False, repr=False)

    @property
    def config(self) -> Path:
        return self.root / "gateway.toml"

    @property
    def calls(self) -> Path:
        return self.root / "calls.jsonl"

    @property
    def control(self) -> Path:
        return self.root / "control.json"

    @property
    def database(self) -> Path:
        return self.root / "pausemesh.db"

    def lines(self) -> list[dict[str, Any]]:
        if not self.calls.exists():
            return []
        return [json.loads(line) for line in self.calls.read_text().splitlines() if line]

    def set_control(self, **control: Any) -> None:
        self.control.write_text(json.dumps(control))

    def upstream_env(self) -> dict[str, str]:
        return {"UPSTREAM_CALLS": str(self.calls), "UPSTREAM_CONTROL": str(self.control)}

    def write(self) -> Path:
        if self.upstream_url is not None:
            upstream = f'[[upstreams]]\nid = "invoices"\nurl = "{self.upstream_url}"\n'
        else:
            env = ", ".join(f'{k} = "{v}"' for k, v in self.upstream_env().items())
            # Forked from the test's fork server (the gateway starts it once per process).
            command, *args = launch_command([sys.executable, str(UPSTREAM)])
            upstream = (
                f'[[upstreams]]\nid = "invoices"\ncommand = "{command}"\n'
                f"args = {json.dumps(args)}\nenv = {{ {env} }}\n"
            )
        jobs = ""
        for job in self.jobs:
            jobs += "[[jobs]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in job.items())
        self.config.write_text(
            f'domain = "billing"\nworker = "gw-1"\n{upstream}{jobs}{self.access}'
        )
        return self.config

    def store_args(self) -> list[str]:
        if self.database_url is not None:
            args = ["--database-url", self.database_url]
            if self.database_schema is not None:
                args += ["--database-schema", self.database_schema]
            return args
        return ["--database-path", str(self.database)]

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``pausemesh <args> --config ... <store flags>`` in a subprocess."""
        command = [sys.executable, "-m", "pausemesh", *args, "--config", str(self.config)]
        return subprocess.run(
            launch_command([*command, *self.store_args()]),
            env=_env(),
            cwd=self.root,
            capture_output=True,
            text=True,
            check=check,
            timeout=120,
        )

    async def pin(self) -> None:
        """Write the config, migrate PostgreSQL (the app never does) and pin the lock, as
        ``pausemesh migrate`` and ``pausemesh gateway pin`` do, in this process: the same code
        on the same upstream process, without starting a Python process for the command
        (``tests/gateway/test_gateway_cli.py`` runs the command itself)."""
        self.write()
        if self.database_url is not None and not self._migrated:
            await migrate(self.database_url, schema=self.database_schema or "pausemesh")
            self._migrated = True
        config = load_gateway_config(str(self.config))
        write_lock(await pin(config), default_lock_path(config))

    def stdio(self, *extra: str, module: str = "pausemesh") -> StdioServerParameters:
        """``python -m pausemesh gateway --stdio ...``; ``module`` another entry taking the
        same arguments (``tests.support.loaded_frameworks``)."""
        args = ["-m", module, "gateway", "--stdio", "--config", str(self.config)]
        command, *forked = launch_command([sys.executable, *args, *self.store_args(), *extra])
        return StdioServerParameters(
            command=command,
            args=forked,
            env=_env(),
            cwd=str(self.root),
        )

    def http(self, *extra: str, env: dict[str, str] | None = None) -> ServerProcess:
        args = ["gateway", "--config", str(self.config), *self.store_args(), *extra]
        base = {"PYTHONPATH": str(REPO_ROOT), "PAUSEMESH_SECRET_KEY": SERVER_KEY}
        return ServerProcess(args, env={**base, **(env or {})}, cwd=self.root)


def structured(result: CallToolResult) -> dict[str, Any]:
    assert result.structured_content is not None
    text = result.content[0]
    assert json.loads(text.text) == result.structured_content  # type: ignore[union-attr]
    content: dict[str, Any] = result.structured_content
    return content


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return structured(await client.call_tool(tool, arguments))


@asynccontextmanager
async def gateway_client(target: Any, **options: Any) -> AsyncIterator[Client]:
    async with Client(target, **options) as client:
        yield client


async def _start_upstream(case: GatewayCase) -> subprocess.Popen[bytes]:
    """The upstream on a free port, pinned once it answers. The port can be taken by a
    parallel test's server before the upstream binds it: then the upstream exits and starts
    again on another port (and a pin answered by that other server does not count)."""
    for _ in range(3):
        port = free_port()
        upstream = subprocess.Popen(  # noqa: ASYNC220 - a server for the whole block
            [sys.executable, str(UPSTREAM), "--http", str(port)],
            env={**case.upstream_env(), "PATH": "/usr/bin:/bin"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        case.upstream_url = f"http://127.0.0.1:{port}/mcp"
        for _ in range(300):
            if upstream.poll() is not None:
                break
            try:
                await case.pin()
            except GatewayError:
                await asyncio.sleep(0.2)
                continue
            if holds_listener(upstream.pid, port):
                return upstream
            await asyncio.sleep(0.2)
        else:
            upstream.kill()
            upstream.wait()
            raise AssertionError(f"the upstream on port {port} never answered a pin")
    raise AssertionError("the upstream could not bind any of three free ports")


@asynccontextmanager
async def http_upstream(case: GatewayCase) -> AsyncIterator[None]:
    """The case's upstream served over streamable HTTP for the block, the case pointed at it and
    pinned once it answers (set the jobs first: the pin records them)."""
    upstream = await _start_upstream(case)
    try:
        yield
    finally:
        upstream.kill()
        upstream.wait()


async def until_lines(case: GatewayCase, count: int) -> None:
    """Wait until the upstream has recorded ``count`` real calls (a minute at most)."""
    for _ in range(600):
        if len(case.lines()) >= count:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the upstream never got call {count}")


def invoice(order_id: str = "A-1", amount: int = 100) -> dict[str, Any]:
    return {"order_id": order_id, "amount": amount}


def lines_for(case: GatewayCase, order_ids: Sequence[str]) -> list[dict[str, Any]]:
    return [line for line in case.lines() if line["order_id"] in order_ids]
