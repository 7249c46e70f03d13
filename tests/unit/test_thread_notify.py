"""The per-process tail notifier: one pass wakes a thread's tails, keep-alives come from one
timer wheel, and an idle tail re-reads its head only when something may have changed."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from pausemesh.stores import thread_notify
from pausemesh.stores.thread_notify import ThreadNotifier

# Liveness bound: only a stuck waiter gets near it (never a timing assertion).
STUCK = 30.0


class Head:
    def __init__(self) -> None:
        self.value = 0
        self.reads = 0

    async def __call__(self) -> int:
        self.reads += 1
        return self.value


async def test_a_notification_wakes_every_tail_of_its_thread_and_no_other() -> None:
    notifier = ThreadNotifier()
    heads = {"t1": Head(), "t2": Head()}
    waits = {
        (thread, i): asyncio.create_task(notifier.wait_past(thread, 0, STUCK, heads[thread]))
        for thread in heads
        for i in range(50)
    }
    await asyncio.sleep(0)
    heads["t1"].value = 1
    notifier.notify("t1")
    async with asyncio.timeout(STUCK):
        woken = await asyncio.gather(*(t for (th, _), t in waits.items() if th == "t1"))
    assert woken == [True] * 50
    assert not any(t.done() for (th, _), t in waits.items() if th == "t2")
    notifier.notify_all()
    async with asyncio.timeout(STUCK):
        # Woken, but nothing past 0 on t2: each reports no event (it sends a keep-alive).
        assert await asyncio.gather(*(t for (th, _), t in waits.items() if th == "t2")) == (
            [False] * 50
        )
    await notifier.close()


async def test_a_wait_ends_by_the_wheel_when_nothing_comes() -> None:
    notifier = ThreadNotifier(granularity=0.01)
    head = Head()
    async with asyncio.timeout(STUCK):
        assert await notifier.wait_past("t", 0, 0.02, head) is False
    await notifier.close()


async def test_an_idle_tail_rereads_its_head_only_after_a_notification_or_every_fifth_wait() -> (
    None
):
    notifier = ThreadNotifier(granularity=0.01)
    head = Head()
    async with asyncio.timeout(STUCK):
        for _ in range(3):
            assert await notifier.wait_past("t", 0, 0.01, head) is False
        assert head.reads == 1  # the first wait only
        # An append lands between two keep-alives: the next wait must see it.
        head.value = 1
        notifier.notify("t")
        assert await notifier.wait_past("t", 0, 0.01, head) is True
        assert head.reads == 2
        # Idle again after the event: four waits without a read, then the safety read.
        for _ in range(6):
            assert await notifier.wait_past("t", 1, 0.01, head) is False
        assert head.reads == 4
    await notifier.close()


class KeepAlives:
    """A response's ``core.keepalive`` writer, given to the tail's wait: counts what the
    wheel wrote."""

    def __init__(self, *, at_once: bool = True) -> None:
        self.at_once = at_once
        self.written = 0
        self._wrote = asyncio.Event()

    def __call__(self) -> bool:
        if self.at_once:
            self.written += 1
            self._wrote.set()
        return self.at_once

    async def until(self, written: int) -> None:
        async with asyncio.timeout(STUCK):
            while self.written < written:
                self._wrote.clear()
                await self._wrote.wait()


def _tail(notifier: ThreadNotifier, writer: KeepAlives, head: Head, thread: str = "t") -> Any:
    """A tail's wait, in a task of its own, given ``writer`` as its response's keep-alive."""
    return asyncio.create_task(notifier.wait_past(thread, 0, 0.02, head, keep_alive=writer))


async def test_the_wheel_writes_an_idle_tails_keep_alives_and_leaves_it_asleep() -> None:
    notifier = ThreadNotifier(granularity=0.01)
    head, writer = Head(), KeepAlives()
    tail = _tail(notifier, writer, head)
    await writer.until(3)
    assert not tail.done()
    head.value = 1
    notifier.notify("t")
    async with asyncio.timeout(STUCK):
        assert await tail is True
    await notifier.close()


async def test_a_keep_alive_the_wheel_cannot_write_at_once_wakes_the_tail_to_send_it() -> None:
    notifier = ThreadNotifier(granularity=0.01)
    head, writer = Head(), KeepAlives(at_once=False)
    async with asyncio.timeout(STUCK):
        assert await _tail(notifier, writer, head) is False
    assert writer.written == 0
    await notifier.close()


async def test_the_wheel_reads_a_threads_head_once_for_all_its_tails_and_wakes_them_past_it() -> (
    None
):
    notifier = ThreadNotifier(granularity=0.05)
    head, writer = Head(), KeepAlives()
    tails = [_tail(notifier, writer, head) for _ in range(50)]
    await writer.until(50)
    before = head.reads
    # Another process appends and nobody is told: the wheel's safety read finds it.
    head.value = 1
    async with asyncio.timeout(STUCK):
        assert await asyncio.gather(*tails) == [True] * 50
    # The wheel read once per pass (its tails may straddle two), and the tails it woke shared
    # their read: not one read per tail.
    assert head.reads - before <= 4
    assert writer.written >= 50 * 2  # the keep-alives before the safety read
    await notifier.close()


async def test_a_tail_whose_head_the_wheel_cannot_read_is_woken_to_meet_the_error() -> None:
    class Erased(Head):
        erased = False

        async def __call__(self) -> int:
            if self.erased:
                raise LookupError("thread erased by another process")
            return await super().__call__()

    notifier = ThreadNotifier(granularity=0.01)
    head, writer = Erased(), KeepAlives()
    tail = _tail(notifier, writer, head)
    await writer.until(1)
    head.erased = True
    async with asyncio.timeout(STUCK):
        with pytest.raises(LookupError):
            await tail
    await notifier.close()


async def test_the_tails_one_append_wakes_read_the_head_once_between_them() -> None:
    notifier = ThreadNotifier()
    head = Head()
    tails = [asyncio.create_task(notifier.wait_past("t", 0, STUCK, head)) for _ in range(50)]
    await asyncio.sleep(0.01)
    assert head.reads == 1  # their first read, shared too
    head.value = 1
    notifier.notify("t")
    async with asyncio.timeout(STUCK):
        assert await asyncio.gather(*tails) == [True] * 50
    assert head.reads == 2
    await notifier.close()


async def test_tails_woken_by_an_append_that_reports_its_head_do_not_read_the_head_again() -> None:
    notifier = ThreadNotifier()
    head = Head()
    tails = [asyncio.create_task(notifier.wait_past("t", 0, STUCK, head)) for _ in range(50)]
    await asyncio.sleep(0.01)
    assert head.reads == 1  # their first read, shared
    head.value = 3
    notifier.notify("t", 3)
    async with asyncio.timeout(STUCK):
        assert await asyncio.gather(*tails) == [True] * 50
    assert head.reads == 1  # the append said how far the thread goes
    await notifier.close()


async def test_a_reported_head_not_past_a_tails_mark_is_checked_against_the_log() -> None:
    notifier = ThreadNotifier()
    head = Head()
    head.value = 2
    # The tail has sent up to 2; a late word reports 2 (the append it already read), while
    # a later append (3) committed without a word of its own: the tail must read and see it.
    tail = asyncio.create_task(notifier.wait_past("t", 2, STUCK, head))
    await asyncio.sleep(0.01)
    head.value = 3
    notifier.notify("t", 2)
    async with asyncio.timeout(STUCK):
        assert await tail is True
    assert head.reads == 2
    await notifier.close()


async def test_a_head_read_that_failed_is_not_handed_to_the_next_ask() -> None:
    class Flaky(Head):
        failures = 1

        async def __call__(self) -> int:
            if self.failures:
                self.failures -= 1
                raise OSError("database restarting")
            return await super().__call__()

    notifier = ThreadNotifier()
    wake = notifier.current("t")
    head = Flaky()
    with pytest.raises(OSError, match="restarting"):
        await wake.read_head(head)
    assert await wake.read_head(head) == 0
    assert head.reads == 1
    await notifier.close()


async def test_a_head_the_wheel_cannot_read_in_time_does_not_hold_up_other_tails_keep_alives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(thread_notify, "_SAFETY_READ_SECONDS", 0.05)

    class Hanging(Head):
        hang = False

        def __init__(self) -> None:
            super().__init__()
            self.answered = asyncio.Event()

        async def __call__(self) -> int:
            if self.hang:
                await self.answered.wait()  # a database that does not answer (until the end)
            return await super().__call__()

    notifier = ThreadNotifier(granularity=0.01)
    stuck_head, stuck_writer = Hanging(), KeepAlives()
    other_head, other_writer = Head(), KeepAlives()
    stuck = _tail(notifier, stuck_writer, stuck_head, thread="t1")
    other = _tail(notifier, other_writer, other_head, thread="t2")
    await stuck_writer.until(1)
    stuck_head.hang = True
    # Several of the stuck thread's safety reads fall in this stretch; the wheel gives each
    # up and goes on writing the other thread's keep-alives.
    await other_writer.until(other_writer.written + 3 * thread_notify._RECHECK_EVERY)
    assert not other.done()
    for tail in (stuck, other):
        tail.cancel()
    # The database answers at last: the read a woken tail left behind ends, no task pending.
    stuck_head.answered.set()
    await asyncio.gather(stuck, other, return_exceptions=True)
    await asyncio.sleep(0)
    await notifier.close()


async def test_after_a_short_first_wait_the_wheel_keeps_the_tails_own_interval() -> None:
    # A PostgreSQL tail woken without news waits out the rest of its interval; the keep-alives
    # after that one come at the full interval, not at that remainder.
    notifier = ThreadNotifier(granularity=0.01)
    head, writer = Head(), KeepAlives()
    wake = notifier.current("t")
    tail = asyncio.create_task(
        notifier.wait(wake, 0.02, thread_id="t", head=head, interval=10.0, keep_alive=writer)
    )
    await writer.until(1)
    now = math.floor(asyncio.get_running_loop().time() / notifier.granularity)
    [filed] = [slot for slot, due in notifier._wheel.items() if due]
    assert filed - now > 500  # about 1,000 slots of 0.01 s ahead, not 2
    tail.cancel()
    await notifier.close()
