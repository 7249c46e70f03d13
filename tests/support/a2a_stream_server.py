"""A ``pausemesh serve`` whose ``/a2a`` agent streams on request, for the mount stream tests.

``python -m tests.support.a2a_stream_server`` serves it through the CLI's own ``serve_app``
(its uvicorn settings, its SIGTERM drain), settings from ``PAUSEMESH_*``. The text of the
message decides what the A2A agent does:

* ``flood``: streams ten 1 MiB working updates, then completes (more than a socket's
  buffers hold: a reader that stops reading is left behind by its writes);
* ``wait``: says it is working, then waits (an open stream that outlasts any grace period);
* anything else: answers and completes.

``A2AStreamServer`` is the ``ServerProcess`` that runs it.
"""

from __future__ import annotations

import asyncio
import sys

from a2a.helpers import new_task
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentSkill, Part, TaskState

from pausemesh import Settings
from pausemesh.cli.serve import serve_app
from pausemesh.observability.log_format import configure_logging
from pausemesh.web.a2a_mount import A2APlugin
from pausemesh.web.plugin import PauseMeshPlugin
from tests.support.server import ServerProcess

__all__ = ("A2AStreamServer", "StreamingExecutor")

_CHUNK = "x" * 1_048_576
_FLOOD_CHUNKS = 10


class StreamingExecutor(AgentExecutor):
    def __init__(self, pausemesh: PauseMeshPlugin) -> None:
        self._pausemesh = pausemesh

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = str(context.task_id), str(context.context_id)
        history = [] if context.message is None else [context.message]
        await event_queue.enqueue_event(
            new_task(task_id, context_id, TaskState.TASK_STATE_SUBMITTED, history=history)
        )
        updater = TaskUpdater(event_queue, task_id, context_id)
        text = context.get_user_input().strip()
        if text == "flood":
            for _ in range(_FLOOD_CHUNKS):
                message = updater.new_agent_message([Part(text=_CHUNK)])
                await updater.update_status(TaskState.TASK_STATE_WORKING, message=message)
        if text == "wait":
            working = updater.new_agent_message([Part(text="Working on it.")])
            await updater.update_status(TaskState.TASK_STATE_WORKING, message=working)
            await asyncio.Event().wait()
        await updater.complete(updater.new_agent_message([Part(text="Hello.")]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, str(context.task_id), str(context.context_id))
        await updater.cancel()


def _card() -> AgentCard:
    return AgentCard(
        name="Streaming test agent",
        description="Streams on request.",
        version="0.1.0",
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="stream", name="Stream", description="Streams.", tags=["test"])],
    )


class A2AStreamServer(ServerProcess):
    """This module as a real server process (settings through ``env``)."""

    def __init__(self, *, env: dict[str, str]) -> None:
        super().__init__([], env=env)
        self.env.update(PAUSEMESH_HOST=self.host, PAUSEMESH_PORT=str(self.port))

    def command(self) -> list[str]:
        return [sys.executable, "-m", "tests.support.a2a_stream_server"]


def main() -> None:
    settings = Settings.load(env_file=None)
    configure_logging(settings.log_level, settings.log_format)
    serve_app(settings, plugins=[A2APlugin(StreamingExecutor, _card())])


if __name__ == "__main__":
    main()
