"""The agent pump: the host's agent runs in its own task; its output goes out in batches.

Events are folded into the run's transcript and sent (logged first); pause requests are kept
for the finish; keep-alives fill the silences (the lease keeper renews the lease on its own).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Final

from pausemesh.agui.agent import PauseRequest, RunContext
from pausemesh.agui.events import Event, RunErrorEvent, RunFinishedEvent, RunStartedEvent
from pausemesh.agui.run_error import AguiRunError
from pausemesh.agui.sse import KEEPALIVE_FRAME
from pausemesh.agui.transcript import Transcript
from pausemesh.core.errors import PauseMeshError

if TYPE_CHECKING:
    from pausemesh.agui.run.leased import LeasedRun

__all__ = ("agent_frames",)

_log = logging.getLogger("pausemesh.agui")
_FRAME_EVENTS = (RunStartedEvent, RunFinishedEvent)


class _Done:
    pass


class _Failed:
    def __init__(self, error: Exception) -> None:
        self.error = error


_DONE: Final = _Done()


async def agent_frames(
    run: LeasedRun, context: RunContext, transcript: Transcript, pauses: list[PauseRequest]
) -> AsyncGenerator[bytes, None]:
    """Run the agent in its own task; send what it yields in batches, keep-alives between."""
    host = run.host
    queue: asyncio.Queue[Event | PauseRequest | _Done | _Failed] = asyncio.Queue(host.queue_size)

    async def produce() -> None:
        try:
            async for output in host.agent(context):
                await queue.put(output)
        except Exception as error:  # noqa: BLE001 - reported to the client as RUN_ERROR
            await queue.put(_Failed(error))
        else:
            await queue.put(_DONE)

    task = asyncio.create_task(produce(), name=f"pausemesh-agent-{run.thread_id}")
    loop = asyncio.get_running_loop()
    limit = host.run_timeout_seconds
    deadline = None if limit is None else loop.time() + limit
    try:
        while True:
            wait = host.keepalive_seconds
            if deadline is not None:
                left = deadline - loop.time()
                if left <= 0:
                    _log.warning("agent run timed out on thread %s after %ss", run.thread_id, limit)
                    raise AguiRunError("RUN_TIMEOUT", "The agent did not finish in time")
                wait = min(wait, left)
            try:
                async with asyncio.timeout(wait):
                    item = await queue.get()
            except TimeoutError:
                if deadline is not None and loop.time() >= deadline:
                    continue  # the check above ends the run
                yield KEEPALIVE_FRAME
                continue
            batch = [item]
            while not isinstance(batch[-1], (_Done, _Failed)) and not queue.empty():
                batch.append(queue.get_nowait())
            events: list[Event] = []
            stop: AguiRunError | None = None
            try:
                for output in batch:
                    _take(run, output, transcript, pauses, events)
            except AguiRunError as error:
                stop = error
            # What the agent sent before a failure still goes out, then the RUN_ERROR.
            if events:
                yield await run.emit(events)
            if stop is not None:
                raise stop
            if isinstance(batch[-1], _Done):
                return
    finally:
        # Not awaited: the agent's own cleanup must not hold up (or swallow) ours.
        task.cancel()


def _take(
    run: LeasedRun,
    output: Event | PauseRequest | _Done | _Failed,
    transcript: Transcript,
    pauses: list[PauseRequest],
    events: list[Event],
) -> None:
    """Fold one agent output into the run; ``AguiRunError`` ends the run."""
    if isinstance(output, _Done):
        return
    if isinstance(output, _Failed):
        _log.error("agent failed on thread %s", run.thread_id, exc_info=output.error)
        raise AguiRunError("AGENT_FAILED", "The agent failed")
    if isinstance(output, PauseRequest):
        pauses.append(output)
    elif isinstance(output, RunErrorEvent):
        # The agent ends the run with its own error.
        code = output.code if isinstance(output.code, str) else "AGENT_ERROR"
        raise AguiRunError(code, output.message)
    elif isinstance(output, _FRAME_EVENTS):
        msg = "The agent must not send RUN_STARTED or RUN_FINISHED"
        raise AguiRunError("AGENT_PROTOCOL_ERROR", msg)
    else:
        try:
            transcript.apply(output)
        except PauseMeshError as error:
            raise AguiRunError.from_error(error) from None
        events.append(output)
