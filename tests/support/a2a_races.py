"""Racing A2A follow-ups with the official ``a2a-sdk`` client over JSON-RPC, REST and streaming.

Each racer answers the same input-required task with its own valid flight, on its own client;
what every racer saw is kept so the tests can check that all of them agree with the stored
final task.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
from a2a.client import ClientConfig, create_client
from a2a.types import GetTaskRequest, SendMessageRequest, Task, TaskState
from a2a.utils.errors import A2AError, UnsupportedOperationError
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]

from tests.support.protocol_clients import user_message
from tests.support.server import ServerProcess

__all__ = (
    "FLIGHTS",
    "RACER_MODES",
    "Racer",
    "answers_in_history",
    "assert_one_outcome",
    "final_task",
    "race_follow_ups",
)

FLIGHTS = ("PM101", "PM202", "PM303")
RACER_MODES = (("JSONRPC", False), ("HTTP+JSON", False), ("JSONRPC", True), ("HTTP+JSON", True))
"""(binding, streaming) for racer i is RACER_MODES[i % 4]: every binding, blocking and streamed."""
COMPLETED = int(TaskState.TASK_STATE_COMPLETED)


@dataclass
class Racer:
    binding: str
    streaming: bool
    flight: str
    refused: A2AError | None = None
    # The last task the racer was sent (blocking: the response; streaming: the last Task event).
    task: Task | None = None
    # Streaming: the last status state and every artifact (as JSON) the stream carried.
    last_state: int | None = None
    artifacts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def final_state(self) -> int | None:
        return self.last_state if self.last_state is not None else self._task_state()

    def _task_state(self) -> int | None:
        return None if self.task is None else int(self.task.status.state)


async def _run(server: ServerProcess, task_id: str, racer: Racer) -> None:
    async with httpx.AsyncClient(timeout=60) as http:
        config = ClientConfig(
            httpx_client=http,
            streaming=racer.streaming,
            supported_protocol_bindings=[racer.binding],
        )
        client = await create_client(server.url("/a2a"), client_config=config)
        message = user_message(data={"flight": racer.flight}, task_id=task_id)
        try:
            async for response in client.send_message(SendMessageRequest(message=message)):
                if response.HasField("task"):
                    racer.task = response.task
                    racer.last_state = int(response.task.status.state)
                elif response.HasField("status_update"):
                    racer.last_state = int(response.status_update.status.state)
                elif response.HasField("artifact_update"):
                    racer.artifacts.append(MessageToDict(response.artifact_update.artifact))
        except A2AError as refused:
            racer.refused = refused
        finally:
            await client.close()


async def race_follow_ups(
    servers: Sequence[ServerProcess], task_id: str, count: int = 20
) -> list[Racer]:
    """``count`` concurrent follow-ups, spread over ``servers`` and every binding and mode."""
    racers = [
        Racer(*RACER_MODES[i % len(RACER_MODES)], flight=FLIGHTS[i % len(FLIGHTS)])
        for i in range(count)
    ]
    await asyncio.gather(
        *(_run(servers[i % len(servers)], task_id, racer) for i, racer in enumerate(racers))
    )
    return racers


async def final_task(server: ServerProcess, task_id: str) -> Task:
    async with httpx.AsyncClient(timeout=60) as http:
        client = await create_client(
            server.url("/a2a"), client_config=ClientConfig(httpx_client=http, streaming=False)
        )
        try:
            return await client.get_task(GetTaskRequest(id=task_id))
        finally:
            await client.close()


def answers_in_history(task: Task) -> list[object]:
    """The user answers (data parts) the task's history holds."""
    document = MessageToDict(task)
    return [
        part["data"]
        for message in document.get("history", [])
        if message.get("role") == "ROLE_USER"
        for part in message.get("parts", [])
        if "data" in part
    ]


def assert_one_outcome(final: Task, racers: list[Racer]) -> dict[str, object]:
    """The final task holds one booking artifact and one answer; every racer agrees with it."""
    assert final.status.state == TaskState.TASK_STATE_COMPLETED
    assert len(final.artifacts) == 1
    artifact = MessageToDict(final.artifacts[0])
    booking: dict[str, object] = artifact["parts"][0]["data"]
    assert answers_in_history(final) == [{"flight": booking["flight"]}]
    for racer in racers:
        if racer.refused is not None:
            assert isinstance(racer.refused, UnsupportedOperationError), racer
            continue
        assert racer.final_state == COMPLETED, racer
        if racer.task is not None:
            assert MessageToDict(racer.task.artifacts[0]) == artifact
            assert racer.task.status.state == final.status.state
        assert all(seen == artifact for seen in racer.artifacts), racer
    return booking
