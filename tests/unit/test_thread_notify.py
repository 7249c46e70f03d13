"""The per-process tail notifier: one pass wakes a thread's tails, keep-alives come from one
timer wheel, and an idle tail re-reads its head only when something may have changed."""

from __future__ import annotations

import asyncio

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
