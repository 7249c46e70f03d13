"""What the agent sees of the jobs: one MCP tool each, with the pinned input schema, closed."""

from __future__ import annotations

from typing import Any

from mcp_types import Tool

from pausemesh.gateway.config import GatewayConfig
from pausemesh.gateway.lock import GatewayLock, agent_schema

__all__ = ("input_schema", "job_tools")


def job_tools(config: GatewayConfig, lock: GatewayLock) -> list[Tool]:
    tools = []
    for name, job in config.jobs.items():
        definition = lock.jobs[name].definition
        description = f"Runs {job.tool} on {job.upstream} at most once per business key."
        tools.append(
            Tool.model_validate(
                {
                    "name": name,
                    "description": description,
                    "inputSchema": agent_schema(definition),
                    **(
                        {"annotations": definition["annotations"]}
                        if "annotations" in definition
                        else {}
                    ),
                }
            )
        )
    return tools


def input_schema(config: GatewayConfig, lock: GatewayLock, name: str) -> dict[str, Any] | None:
    if name not in config.jobs:
        return None
    return agent_schema(lock.jobs[name].definition)
