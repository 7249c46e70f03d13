"""The agent pump: the host's agent runs in its own task; its output goes out in batches.

Events are folded into the run's transcript and sent (logged first); pause requests and the
agent's thread title are kept for the finish; keep-alives fill the silences (the lease keeper
renews the lease on its own). When the keeper finds the lease lost, the agent's task is
cancelled at once and the run ends with ``LEASE_LOST``.

An interruptible run (one that carries no decisions) stops the same way when an interrupting
input asks (``RunLease.interrupt``), but ends cleanly: ``end_interrupted`` marks (or, for a
rollback, removes) what it wrote and says so in a CUSTOM ``pausemesh.run_interrupted``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator
from typing import Any, Final

import msgspec

from pausemesh.agui.agent import Agent, PauseRequest, RunContext, ThreadTitle
from pausemesh.agui.conversations import check_title
from pausemesh.agui.events import (
    CustomEvent,
    Event,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
)
from pausemesh.agui.run.history import StoredHistory, step
from pausemesh.agui.run.lease import RunLease
from pausemesh.agui.run.state import StoredState
from pausemesh.agui.run_error import AguiRunError
from pausemesh.agui.sse import KEEPALIVE_FRAME
from pausemesh.agui.transcript import Transcript
from pausemesh.core.drain import Drain
from pausemesh.core.errors import PauseMeshError
from pausemesh.core.threads import UNREAD_STATE

__all__ = ("AgentPump",)

_log = logging.getLogger("pausemesh.agui")
_FRAME_EVENTS = (RunStartedEvent, RunFinishedEvent)


class _Done:
    pass


class _Wake:
    """Put on the queue when the drain begins, so the loop looks at its new deadline."""


class _Failed:
    def __init__(self, error: Exception) -> None:
        self.error = error


_DONE: Final = _Done()
_WAKE: Final = _Wake()
_Item = Event | PauseRequest | ThreadTitle | _Done | _Failed | _Wake
_SHUTTING_DOWN = "The server is shutting down; run again to continue"


class AgentPump:
    """One run of the agent: its output goes out through ``lease``; what it asked (``pauses``)
    and the title it gave (``title``) are kept for the finish."""

    def __init__(
        self,
        *,
        agent: Agent,
        lease: RunLease,
        queue_size: int,
        keepalive_seconds: float,
        run_timeout_seconds: float | None,
        drain: Drain | None,
        interruptible: bool = False,
        state: StoredState | None = None,
    ) -> None:
        self._agent = agent
        # The thread's state as the run began, read when first wanted (``run/state.py``).
        self._state = state
        # Whether an interrupting input may stop it (it carries no decisions).
        self._interruptible = interruptible
        # ``interrupt`` or ``rollback`` when it was stopped so (the run then ends cleanly).
        self.interrupted: str | None = None
        self._first_new = 0
        self._state_before: Any = None
        self._lease = lease
        self._queue_size = queue_size
        self._keepalive_seconds = keepalive_seconds
        self._run_timeout_seconds = run_timeout_seconds
        self._drain = drain
        self.pauses: list[PauseRequest] = []
        self.title: str | None = None

    async def frames(
        self, context: RunContext, transcript: Transcript
    ) -> AsyncGenerator[bytes, None]:
        """Run the agent in its own task; send what it yields in batches, keep-alives between."""
        lease, drain = self._lease, self._drain
        queue: asyncio.Queue[_Item] = asyncio.Queue(self._queue_size)
        self._begin(transcript)

        task = asyncio.create_task(
            self._produce(context, queue), name=f"pausemesh-agent-{lease.thread_id}"
        )

        def stop_agent() -> None:
            # The lease is gone: the agent stops now, not at its next output.
            task.cancel()
            _nudge(queue)

        unlost = lease.on_lost(stop_agent)
        uninterrupt = lease.on_interrupt(stop_agent) if self._interruptible else _nothing
        clock = _Deadlines(
            lease.thread_id, self._run_timeout_seconds, drain, self._keepalive_seconds
        )
        unwatch = None if drain is None else drain.watch(lambda: _nudge(queue))
        try:
            while True:
                lease.check()
                if self._stops_for_interrupt():
                    return
                try:
                    async with asyncio.timeout(clock.wait()):
                        item = await queue.get()
                except TimeoutError:
                    if not clock.over():
                        yield KEEPALIVE_FRAME
                    continue  # past a deadline, ``clock.wait`` ends the run
                lease.check()
                if isinstance(item, _Wake):
                    continue  # (an interrupt is looked at on the next turn)
                batch: list[_Item] = [item]
                while not isinstance(batch[-1], (_Done, _Failed)) and not queue.empty():
                    batch.append(queue.get_nowait())
                await self._read_state_for(batch, transcript)
                events, stop = self._fold(batch, transcript)
                # What the agent sent before a failure still goes out, then the RUN_ERROR.
                if events:
                    yield await lease.emit(events)
                if stop is not None:
                    raise stop
                if isinstance(batch[-1], _Done):
                    return
        finally:
            unlost()
            uninterrupt()
            if unwatch is not None:
                unwatch()
            # Not awaited: the agent's own cleanup must not hold up (or swallow) ours.
            task.cancel()

    async def _produce(self, context: RunContext, queue: asyncio.Queue[_Item]) -> None:
        """The agent's task: its outputs onto ``queue``, then ``_DONE`` or its failure."""
        # While the stored history is not all read, each turn of the agent runs where a look
        # at ``ctx.messages`` can wait for the store (``run/history.py``).
        history = context.messages if isinstance(context.messages, StoredHistory) else None
        state = self._state
        try:
            outputs = aiter(self._agent(context))
            while True:
                turn = anext(outputs)
                try:
                    waits = (history is not None and not history.whole) or (
                        state is not None and not state.loaded
                    )
                    output = await (step(turn) if waits else turn)
                except StopAsyncIteration:
                    break
                await queue.put(output)
        except Exception as error:  # noqa: BLE001 - reported to the client as RUN_ERROR
            await queue.put(_Failed(error))
        else:
            await queue.put(_DONE)

    def _begin(self, transcript: Transcript) -> None:
        # What the run writes starts here (a rollback removes it, an interrupt marks it).
        self._first_new = len(transcript.messages)
        if self._interruptible:
            # Not read for this: a state the run never read is restored as unread.
            self._state_before = _copy(transcript.state)

    def _stops_for_interrupt(self) -> bool:
        """Whether an interrupting input stopped the run (then it asks nothing)."""
        if not self._interruptible or self._lease.interrupted is None:
            return False
        self.interrupted = self._lease.interrupted
        self.pauses.clear()
        return True

    def end_interrupted(self, transcript: Transcript, run_id: str) -> CustomEvent:
        """After an interrupt: mark the run's messages (``metadata.pausemesh.interrupted``),
        or for a rollback remove them and restore the state; the event that says so."""
        written = transcript.messages[self._first_new :]
        ids = [m.get("id") for m in written]
        mode = self.interrupted or "interrupt"
        if mode == "rollback":
            del transcript.messages[self._first_new :]
            transcript.removed += [i for i in ids if isinstance(i, str)]
            transcript.state = self._state_before
        else:
            for message in written:
                metadata = message.get("metadata")
                metadata = dict(metadata) if isinstance(metadata, dict) else {}
                metadata["pausemesh"] = {"interrupted": True, "runId": run_id}
                message["metadata"] = metadata
        key = "removedMessageIds" if mode == "rollback" else "messageIds"
        return CustomEvent(
            name="pausemesh.run_interrupted", value={"runId": run_id, "mode": mode, key: ids}
        )

    async def _read_state_for(self, batch: list[_Item], transcript: Transcript) -> None:
        """A delta applies to the stored state: read it now (once), not before."""
        if transcript.state is not UNREAD_STATE or self._state is None:
            return
        if any(isinstance(item, StateDeltaEvent) for item in batch):
            transcript.state = _copy(await self._state.load())

    def _fold(
        self, batch: list[_Item], transcript: Transcript
    ) -> tuple[list[Event], AguiRunError | None]:
        """The events of ``batch`` folded into the run, and the error that ends it (if any)."""
        events: list[Event] = []
        try:
            for output in batch:
                self._take(output, transcript, events)
        except AguiRunError as error:
            return events, error
        return events, None

    def _take(self, output: _Item, transcript: Transcript, events: list[Event]) -> None:
        """Fold one agent output into the run; ``AguiRunError`` ends the run."""
        if isinstance(output, (_Done, _Wake)):
            return
        if isinstance(output, _Failed):
            _log.error("agent failed on thread %s", self._lease.thread_id, exc_info=output.error)
            raise AguiRunError("AGENT_FAILED", "The agent failed")
        if isinstance(output, PauseRequest):
            self.pauses.append(output)
        elif isinstance(output, ThreadTitle):
            try:
                self.title = check_title(output.title)
            except PauseMeshError as error:
                msg = f"invalid title: {error.message}"
                raise AguiRunError("AGENT_PROTOCOL_ERROR", msg) from None
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


class _Deadlines:
    """The run's two deadlines: its own timeout, and the drain's grace once shutdown began."""

    def __init__(
        self,
        thread_id: str,
        run_timeout_seconds: float | None,
        drain: Drain | None,
        keepalive_seconds: float,
    ) -> None:
        self.thread_id = thread_id
        self.limit = run_timeout_seconds
        self.drain = drain
        self.keepalive_seconds = keepalive_seconds
        self.loop = asyncio.get_running_loop()
        self.deadline = None if self.limit is None else self.loop.time() + self.limit

    def _left(self) -> tuple[float | None, float | None]:
        own = None if self.deadline is None else self.deadline - self.loop.time()
        return own, None if self.drain is None else self.drain.seconds_left()

    def over(self) -> bool:
        own, grace = self._left()
        return (own is not None and own <= 0) or (grace is not None and grace <= 0)

    def wait(self) -> float:
        """How long to wait for the agent now; ``AguiRunError`` once a deadline has passed."""
        own, grace = self._left()
        if own is not None and own <= 0:
            _log.warning("agent run timed out on thread %s after %ss", self.thread_id, self.limit)
            raise AguiRunError("RUN_TIMEOUT", "The agent did not finish in time")
        if grace is not None and grace <= 0:
            _log.info("run on thread %s ended by the shutdown", self.thread_id)
            raise AguiRunError("SERVER_SHUTTING_DOWN", _SHUTTING_DOWN)
        return min(x for x in (self.keepalive_seconds, own, grace) if x is not None)


def _nothing() -> None:
    pass


def _nudge(queue: asyncio.Queue[_Item]) -> None:
    # A full queue wakes the loop anyway, and each turn looks at the drain's deadline.
    with contextlib.suppress(asyncio.QueueFull):
        queue.put_nowait(_WAKE)


def _copy(state: Any) -> Any:
    return state if state is UNREAD_STATE else msgspec.json.decode(msgspec.json.encode(state))
