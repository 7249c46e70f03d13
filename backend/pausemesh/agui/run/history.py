"""``ctx.messages`` read from the store when the agent reads it, and only what it reads.

An agent takes ``ctx.messages`` as a plain sequence (``ctx.messages[-1]``, ``len``, a loop),
so the read it triggers must happen inside a synchronous access. ``StoredHistory`` is that
sequence: its length is known from the record (no read), an index or a slice reads the
messages from there to the newest ones it does not hold yet (at least twice what it held, so a
walk backwards reads each message once), and a loop reads the rest at once. Each message is
read once per run; a run whose agent never looks reads none.

The read is a store call (a coroutine) made from inside the agent's synchronous access: the
pump runs each step of the agent in a greenlet (``step``) while the history is not whole, and
the access hands the read to the step's driver, which awaits it on the event loop and hands
the messages back (``greenlet``, as SQLAlchemy's asyncio layer does). Outside a step (a task
the agent started itself) nothing can wait: the access raises ``HistoryOutsideRunError``, and
``await ctx.history()`` is the way there.
"""

from __future__ import annotations

import types
from collections.abc import Awaitable, Callable, Generator, Iterator, Sequence
from typing import Any, Final, TypeVar, overload

import greenlet  # type: ignore[import-untyped]  # ships no type information

from pausemesh.agui.events import Message

__all__ = ("HistoryOutsideRunError", "StoredHistory", "step", "wait_in_step")

T = TypeVar("T")

ReadStored = Callable[[int, int], Awaitable[list[Message]]]
"""Reads the stored messages at positions ``[start, end)``, oldest first."""

_PORTAL: Final = "pausemesh_history_portal"


class HistoryOutsideRunError(RuntimeError):
    """``ctx.messages`` (or ``ctx.state``) was first read where the run cannot wait for the
    store."""


class _Await:
    """A read handed from inside a step to its driver."""

    __slots__ = ("awaitable",)

    def __init__(self, awaitable: Awaitable[Any]) -> None:
        self.awaitable = awaitable


def wait_in_step(awaitable: Awaitable[T], *, what: str = "ctx.messages") -> T:
    """``awaitable``'s result, from synchronous code inside ``step`` (``what``: the value
    being read, for the error outside one)."""
    current = greenlet.getcurrent()
    if not getattr(current, _PORTAL, False):
        close = getattr(awaitable, "close", None)
        if close is not None:
            close()  # never awaited: no warning about it
        hint = ", or use 'await ctx.history()'" if what == "ctx.messages" else ""
        msg = (
            f"{what} was first read outside the agent's own steps (in a task of its own?):"
            f" read it in the agent first{hint}"
        )
        raise HistoryOutsideRunError(msg)
    result: T = current.parent.switch(_Await(awaitable))
    return result


def _send(turn: Generator[Any, Any, Any], value: Any, error: BaseException | None) -> Any:
    """One step of ``turn`` (in the step's greenlet): what it yields to the event loop, its
    result or its exception, as a pair."""
    try:
        yielded = turn.send(value) if error is None else turn.throw(error)
    except StopIteration as stop:
        return ("return", stop.value)
    except BaseException as raised:  # noqa: BLE001 - handed to the driver, which raises it
        return ("raise", raised)
    return ("yield", yielded)


@types.coroutine
def _pass_on(yielded: Any) -> Generator[Any, Any, Any]:
    """Give the event loop what the stepped coroutine gave (a future, or None for a bare
    yield) and return what the loop sends back."""
    return (yield yielded)


async def step(awaitable: Awaitable[T]) -> T:
    """``await awaitable``, with ``StoredHistory``'s reads inside it awaited here.

    Each turn of it runs in a greenlet of its own; a read asked for inside it is awaited
    by this coroutine (the run's task: cancelling it cancels the read, and the error goes back
    into the agent where it read), then the turn goes on where it stopped.
    """
    turn = awaitable.__await__()
    value: Any = None
    error: BaseException | None = None
    while True:
        child = greenlet.greenlet(_send)
        setattr(child, _PORTAL, True)
        # The turn runs in the task's context (its contextvars: spans, the current run).
        child.gr_context = greenlet.getcurrent().gr_context
        outcome = child.switch(turn, value, error)
        while isinstance(outcome, _Await):
            try:
                result = await outcome.awaitable
            except BaseException as raised:  # noqa: BLE001 - raised where the agent read
                outcome = child.throw(raised)
            else:
                outcome = child.switch(result)
        kind, payload = outcome
        if kind == "return":
            returned: T = payload
            return returned
        if kind == "raise":
            raise payload
        try:
            value, error = await _pass_on(payload), None
        except BaseException as raised:  # noqa: BLE001 - the loop's cancel goes into the turn
            value, error = None, raised


class StoredHistory(Sequence[Message]):
    """The thread's messages as the run began (``stored`` of them in the store), then what the
    run's request added; the stored ones read when first looked at (see the module)."""

    def __init__(self, stored: int, added: Sequence[Message], read: ReadStored) -> None:
        self._stored = stored
        self._added = list(added)
        self._read = read
        # The stored messages held, from position ``_from`` to the newest.
        self._from = stored
        self._held: list[Message] = []

    @property
    def whole(self) -> bool:
        """Whether every message is held (nothing more will be read)."""
        return self._from == 0

    def held_tail(self, limit: int) -> list[Message] | None:
        """The newest ``limit`` messages if held already (None: they would need a read)."""
        if limit > len(self._added) + self._stored - self._from:
            return None
        return [*self._held, *self._added][-limit:] if limit else []

    def __len__(self) -> int:
        return self._stored + len(self._added)

    def _reach(self, position: int) -> None:
        """Hold the stored messages from ``position`` on (a read of those not held yet)."""
        if position >= self._from:
            return
        # At least double what is held: a walk backwards reads each message once.
        start = max(0, min(position, self._stored - 2 * (self._stored - self._from)))
        older = wait_in_step(self._read(start, self._from))
        self._held[:0] = older
        self._from = start

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        size = len(self)
        if isinstance(index, slice):
            positions = range(*index.indices(size))
            if not positions:
                return []
            self._reach(min(positions[0], positions[-1]))
            held = [*self._held, *self._added]
            return [held[p - self._from] for p in positions]
        position = index + size if index < 0 else index
        if not 0 <= position < size:
            msg = "history index out of range"
            raise IndexError(msg)
        if position >= self._stored:
            return self._added[position - self._stored]
        self._reach(position)
        return self._held[position - self._from]

    def __iter__(self) -> Iterator[Message]:
        self._reach(0)
        return iter([*self._held, *self._added])

    def __reversed__(self) -> Iterator[Message]:
        self._reach(0)
        return reversed([*self._held, *self._added])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StoredHistory | list | tuple):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable view: unhashable, like a list

    def __repr__(self) -> str:
        return f"StoredHistory({len(self)} messages, {len(self._held)} of the stored held)"
