"""In-process wake-ups for the thread live tail: one notifier per process and store.

A tail that has nothing to send waits on its thread's current ``Wake`` and on a slot of one
shared timer wheel. Appending to a thread fires its ``Wake``: every tail of that thread (and
only those) wakes in one pass. The wheel is one task per notifier that ticks every
``granularity`` seconds while some tail waits, and ends the waits whose keep-alive is due in
the slots that passed: an idle tail holds a future in two sets, no timer, no task of its own,
and costs no CPU until its keep-alive.

A waiter takes ``current`` *before* it re-checks the log, so an append that commits between the
check and the wait has already fired that ``Wake`` and the wait returns at once.

A tail whose wait is given its response's keep-alive writer (``keep_alive``, from
``core.keepalive``: the route passes it down with the tail) is not woken for its keep-alive:
the wheel's pass writes it and puts the tail back one interval later. Every ``_RECHECK_EVERY``-th time the pass first reads
the thread's head (once per thread and pass, for all its tails) and wakes the tails that are
behind it, or whose head cannot be read: a thread erased by another process notifies nobody.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Awaitable, Callable
from contextvars import ContextVar

from pausemesh.core.keepalive import KeepAlive
from pausemesh.core.shared_result import SharedResult

__all__ = ("ThreadNotifier", "Wake")

# Keep-alives may come up to this much late; nothing else depends on it.
GRANULARITY = 0.5


class Wake:
    """One generation of a thread's wake-up: fired once, then replaced."""

    __slots__ = ("_reading", "fired", "head", "waiters")

    def __init__(self) -> None:
        self.fired = False
        self.head: int | None = None
        """The thread's head the firing append reported, if it did."""
        self.waiters: set[asyncio.Future[bool]] = set()
        self._reading: SharedResult[int] | None = None

    async def read_head(self, head: Callable[[], Awaitable[int]]) -> int:
        """``head()``, shared with every holder of this wake that asks while it is read.

        The thousand tails one append wakes each ask the head at once; on PostgreSQL that was
        a thousand round trips. Any read started after this wake was taken (by a holder of it)
        serves every holder: a commit made later fires this wake, or, if it already fired and
        woke them, they ask again. Only a read in flight is shared, so a later safety read is a
        read. A holder that goes away mid-read does not cut it short (``SharedResult``).
        """
        reading = self._reading
        if reading is None or reading.task.done():
            reading = self._reading = SharedResult(head())
        return await reading.get()

    def fire(self, head: int | None = None) -> None:
        self.fired = True
        self.head = head
        for waiter in self.waiters:
            if not waiter.done():
                waiter.set_result(True)
        self.waiters.clear()

    def past(self, after_sequence: int) -> bool:
        """Whether the append that fired this wake reported a head past ``after_sequence``: a
        woken tail need not read the head to know its next read finds events."""
        return self.head is not None and self.head > after_sequence


class _Sleeper:
    """An idle tail's place on the wheel: its future, and what a keep-alive pass needs."""

    __slots__ = (
        "after_sequence",
        "beats",
        "future",
        "head",
        "keep_alive",
        "slot",
        "slots",
        "thread_id",
    )

    def __init__(
        self,
        future: asyncio.Future[bool],
        *,
        slot: int,
        slots: int,
        keep_alive: KeepAlive | None,
        thread_id: str,
        after_sequence: int,
        head: Callable[[], Awaitable[int]] | None,
    ) -> None:
        self.future = future
        self.slot = slot
        self.slots = slots
        """The keep-alive interval in slots."""
        self.keep_alive = keep_alive
        self.thread_id = thread_id
        self.after_sequence = after_sequence
        self.head = head
        self.beats = 0
        """Keep-alives the wheel wrote since the head was last read."""


class ThreadNotifier:
    def __init__(self, *, granularity: float = GRANULARITY) -> None:
        self.granularity = granularity
        self._wakes: dict[str, Wake] = {}
        self._wheel: dict[int, set[_Sleeper]] = {}
        self._ticker: asyncio.Task[None] | None = None
        self.stopped = False
        """Set by ``stop`` (the process drains): every wait returns at once."""

    @property
    def watching(self) -> bool:
        """Whether some thread has (or recently had) a waiter."""
        return bool(self._wakes)

    def current(self, thread_id: str) -> Wake:
        wake = self._wakes.get(thread_id)
        if wake is None:
            wake = self._wakes[thread_id] = Wake()
        return wake

    def notify(self, thread_id: str, head: int | None = None) -> None:
        """Wake the tails of ``thread_id``; ``head``: its last sequence after the append that
        notifies, when the notifier knows it (the woken tails then skip reading it)."""
        wake = self._wakes.pop(thread_id, None)
        if wake is not None:
            wake.fire(head)

    def notify_all(self) -> None:
        """Wake every waiting tail (after a lost connection: each re-reads its log)."""
        wakes, self._wakes = self._wakes, {}
        for wake in wakes.values():
            wake.fire()

    def stop(self) -> None:
        """End every wait now and let later ones return at once (the process drains)."""
        self.stopped = True
        self.notify_all()

    async def wait(
        self,
        wake: Wake,
        wait_seconds: float,
        *,
        thread_id: str = "",
        after_sequence: int = 0,
        head: Callable[[], Awaitable[int]] | None = None,
        interval: float | None = None,
        keep_alive: KeepAlive | None = None,
    ) -> bool:
        """True once ``wake`` fires, False when ``wait_seconds`` (rounded up to the wheel's
        granularity) passed first. True at once after ``stop``.

        A tail's wait (``head``: ``thread_id``'s head, past ``after_sequence`` means events)
        given its response's ``keep_alive`` writer (``core.keepalive``): the wheel writes the
        keep-alives itself while they go out at once, the first after ``wait_seconds`` and
        then every ``interval`` (default ``wait_seconds``), returns False only when one does
        not, and True once a safety read of the head is past the mark or fails."""
        if wake.fired or self.stopped:
            return True
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        sleeper = _Sleeper(
            waiter,
            slot=math.ceil((loop.time() + wait_seconds) / self.granularity),
            slots=max(1, math.ceil((interval or wait_seconds) / self.granularity)),
            keep_alive=None if head is None else keep_alive,
            thread_id=thread_id,
            after_sequence=after_sequence,
            head=head,
        )
        self._file(sleeper)
        wake.waiters.add(waiter)
        if self._ticker is None or self._ticker.done():
            self._ticker = loop.create_task(self._tick(), name="pausemesh-tail-wheel")
        try:
            return await waiter
        finally:
            # O(1) either way: a woken tail leaves its slot, a timed-out one its thread.
            due = self._wheel.get(sleeper.slot)
            if due is not None:
                due.discard(sleeper)
            wake.waiters.discard(waiter)

    def _file(self, sleeper: _Sleeper) -> None:
        due = self._wheel.get(sleeper.slot)
        if due is None:
            due = self._wheel[sleeper.slot] = set()
        due.add(sleeper)

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        while self._wheel:
            await asyncio.sleep(self.granularity)
            now = math.floor(loop.time() / self.granularity)
            # Due slots end their waits; emptied ones (their tails woke or left) go too, so
            # the task ends soon after the last tail.
            due = [
                sleeper
                for slot in [slot for slot, due in self._wheel.items() if slot <= now or not due]
                for sleeper in self._wheel.pop(slot)
            ]
            await self._keep_alive(due, now)

    async def _keep_alive(self, due: list[_Sleeper], now: int) -> None:
        """Write the keep-alives of ``due`` where the wheel can; wake the other tails."""
        heads: dict[str, int | None] = {}  # one read per thread and pass
        for sleeper in due:
            if sleeper.head is not None and sleeper.keep_alive is not None:
                if sleeper.beats < _RECHECK_EVERY - 1:
                    sleeper.beats += 1
                else:
                    sleeper.beats = 0
                    if sleeper.thread_id not in heads:
                        heads[sleeper.thread_id] = await _read(sleeper.head)
                    head = heads[sleeper.thread_id]
                    if head is None or head > sleeper.after_sequence:
                        if not sleeper.future.done():
                            sleeper.future.set_result(True)
                        continue
            if sleeper.future.done():
                continue
            if sleeper.keep_alive is None or not sleeper.keep_alive():
                sleeper.future.set_result(False)
                continue
            sleeper.slot = now + sleeper.slots
            self._file(sleeper)

    async def close(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker

    async def wait_past(
        self,
        thread_id: str,
        after_sequence: int,
        wait_seconds: float,
        head: Callable[[], Awaitable[int]],
        keep_alive: KeepAlive | None = None,
    ) -> bool:
        """``wait_for_events`` over ``head`` (the thread's last sequence, read from the log).

        A tail that timed out (and sent a keep-alive) comes back with the same question. If the
        thread's ``Wake`` it waited on has not fired since, nothing was appended since it last
        read the head, so it waits again without reading it; every ``_RECHECK_EVERY``-th time
        it reads anyway (a thread erased by another process notifies nobody). While the wheel
        writes its keep-alives (given ``keep_alive``), the wheel does those reads.
        """
        remembered = _REMEMBERED.get()
        wake = self._wakes.get(thread_id)
        if (
            remembered is not None
            and remembered.notifier is self
            and remembered.thread_id == thread_id
            and remembered.after_sequence == after_sequence
            and remembered.wake is wake
            and remembered.quiet < _RECHECK_EVERY
        ):
            quiet = remembered.quiet + 1
        else:
            quiet = 0
            wake = self.current(thread_id)
            if await wake.read_head(head) > after_sequence:
                _REMEMBERED.set(None)
                return True
        assert wake is not None  # noqa: S101 - set on both branches
        if not await self.wait(
            wake,
            wait_seconds,
            thread_id=thread_id,
            after_sequence=after_sequence,
            head=head,
            keep_alive=keep_alive,
        ):
            _REMEMBERED.set(_Remembered(self, thread_id, after_sequence, wake, quiet))
            return False
        _REMEMBERED.set(None)
        return wake.past(after_sequence) or await wake.read_head(head) > after_sequence


async def _read(head: Callable[[], Awaitable[int]]) -> int | None:
    """The head, or None when it cannot be read soon (the tail reads it again and meets why).

    Bounded: the wheel's pass waits for it, and every idle tail's keep-alive waits for the
    pass; a database that does not answer is the woken tails' own business."""
    try:
        async with asyncio.timeout(_SAFETY_READ_SECONDS):
            return await head()
    except Exception:  # noqa: BLE001 - the woken tail's own read raises it where it belongs
        return None


_SAFETY_READ_SECONDS = 1.0


# Keep-alives between two safety reads of an idle tail's head.
_RECHECK_EVERY = 4


class _Remembered:
    """What a tail's task waited on when its last wait timed out (see ``wait_past``)."""

    __slots__ = ("after_sequence", "notifier", "quiet", "thread_id", "wake")

    def __init__(
        self,
        notifier: ThreadNotifier,
        thread_id: str,
        after_sequence: int,
        wake: Wake,
        quiet: int,
    ) -> None:
        self.notifier = notifier
        self.thread_id = thread_id
        self.after_sequence = after_sequence
        self.wake = wake
        self.quiet = quiet


# Per task (a tail's response runs in one task), so no caller has to carry it.
_REMEMBERED: ContextVar[_Remembered | None] = ContextVar("pausemesh_tail_wait", default=None)
