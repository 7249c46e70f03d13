"""``ctx.state`` read from the store when the agent first looks at it, and only then.

The state is a row of its own (issue 42): the lease does not read it, and a run whose agent
never looks at ``ctx.state`` and emits no ``STATE_DELTA`` reads none of it (nor writes any:
the transcript's state stays ``UNREAD_STATE``, which ``save`` leaves as stored). The first
look is a store read made from inside the agent's synchronous attribute access, as
``ctx.messages`` is (``history.py``: the pump runs the agent's turns in ``step`` while the
state is not read). The run's own uses (a ``STATE_DELTA`` to apply, the snapshot at a pause)
await ``load``; all share the one read.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from pausemesh.agui.agent import Deferred
from pausemesh.agui.run.history import wait_in_step
from pausemesh.core.threads import UNREAD_STATE

__all__ = ("StoredState",)


def _copy(value: Any) -> Any:
    # The agent's copy: what it does to it never reaches the transcript (STATE_* events do).
    return msgspec.json.decode(msgspec.json.encode(value))


class StoredState:
    """The thread's state as the run began: ``known`` (a first run's, from its input) or
    ``UNREAD_STATE``, then read by ``read`` when first wanted."""

    def __init__(self, known: Any, read: Callable[[], Awaitable[Any]]) -> None:
        self._value = known
        self._read = read

    @property
    def loaded(self) -> bool:
        return self._value is not UNREAD_STATE

    async def load(self) -> Any:
        """The state (read once); callers copy what they change."""
        if self._value is UNREAD_STATE:
            self._value = await self._read()
        return self._value

    def working_copy(self) -> Any:
        """The transcript's own copy if known, else ``UNREAD_STATE`` (read when needed)."""
        return _copy(self._value) if self.loaded else UNREAD_STATE

    def for_agent(self) -> Any:
        """What ``ctx.state`` is made with: a copy now if read, else a ``Deferred`` read."""
        return _copy(self._value) if self.loaded else _AgentState(self)


class _AgentState(Deferred):
    __slots__ = ("_state",)

    def __init__(self, state: StoredState) -> None:
        self._state = state

    def resolve(self) -> Any:
        if self._state.loaded:
            return _copy(self._state._value)  # noqa: SLF001 - its own module's class
        return _copy(wait_in_step(self._state.load(), what="ctx.state"))
