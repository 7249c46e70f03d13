"""The push dispatcher over every store kind: no delivery can jam the others.

Real parts: the store of each kind, httpx, a webhook receiver serving HTTP on loopback and a
loopback port nobody listens on (a refused connection). The clock is a ``ManualClock`` moved
a little each round, so rounds and attempts are counted, never seconds. A round is run as
``PushDispatcher.run`` runs it: a round that raises is logged and the next one follows.

Bad deliveries of every kind the registration check cannot see (a refused connection, a
token that is no header value) and rows stored before registration refused CR/LF: each
fails alone and is settled, and the good webhook queued after 800 of them is delivered at
its first attempt, before any bad one is tried twice. A delivery that keeps failing warns
twice (its first failure, its giving up), is counted, and is never tried past its attempts.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from pausemesh.a2a.push_delivery import PushDispatcher, PushOptions
from pausemesh.a2a.push_policy import PushUrlPolicy
from pausemesh.a2a.push_signing import PushSigner
from pausemesh.a2a.store import task_thread_id
from pausemesh.core.clock import ManualClock
from pausemesh.core.push import (
    PushConfigRecord,
    PushDeliveryState,
    PushNotice,
    PushStore,
    delivery_id,
)
from pausemesh.core.threads import ThreadStore
from pausemesh.observability.telemetry import current_metrics, set_metrics
from pausemesh.web.metrics import PrometheusMetrics
from tests.support.push_receiver import Receiver
from tests.support.push_stores import PUSH_STORE_FACTORIES, open_push_store
from tests.support.server import free_port

T0 = datetime(2026, 1, 1, tzinfo=UTC)
BATCH = 20  # the dispatcher's round
OPTIONS = PushOptions(
    max_attempts=12,
    backoff_seconds=10.0,
    backoff_max_seconds=60.0,
    lease_seconds=3.0,
    timeout_seconds=2.0,
)
STEP = 0.1  # seconds the clock moves per round: well inside a backoff, past a lease in 31


@pytest.fixture(name="stores", params=sorted(PUSH_STORE_FACTORIES))
async def stores_fixture(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[ThreadStore, PushStore]]:
    async with open_push_store(request.param, tmp_path) as stores:
        yield stores


@pytest.fixture(name="receiver")
def receiver_fixture() -> Iterator[Receiver]:
    with Receiver() as receiver:
        yield receiver


@pytest.fixture(name="metrics")
def metrics_fixture() -> Iterator[PrometheusMetrics]:
    before = current_metrics()
    metrics = PrometheusMetrics()
    set_metrics(metrics)
    yield metrics
    set_metrics(before)


def dispatcher(push: PushStore, clock: ManualClock, options: PushOptions) -> PushDispatcher:
    signer = PushSigner(b"k" * 32, issuer="http://127.0.0.1/a2a")
    return PushDispatcher(
        lambda: push, signer, PushUrlPolicy("loopback"), holder="h", options=options, clock=clock
    )


async def queue(
    threads: ThreadStore,
    push: PushStore,
    task_id: str,
    configs: list[dict[str, str]],
    *,
    at: datetime,
) -> list[str]:
    """Register ``configs`` on the task straight in the store (as rows written before the
    registration check existed), queue one notice; the delivery ids."""
    for n, config in enumerate(configs):
        webhook = PushConfigRecord(
            task_id=task_id, config_id=f"c{n}", owner="mallory", config={"id": f"c{n}", **config}
        )
        await push.set_config(webhook, now=at)
    thread = await threads.create_or_load(task_thread_id(task_id), owner="mallory", now=at)
    notice = PushNotice(event_id=f"{task_id}-e", task_id=task_id, payload={"id": task_id})
    await push.save_task(thread, now=at, notice=notice)
    return [delivery_id(notice.event_id, f"c{n}") for n in range(len(configs))]


class Rounds:
    """Runs rounds as ``PushDispatcher.run`` does, moving the clock ``STEP`` per round."""

    def __init__(self, sender: PushDispatcher, clock: ManualClock) -> None:
        self.sender = sender
        self.clock = clock
        self.count = 0
        self.aborted: list[str] = []

    async def run(self, client: httpx.AsyncClient) -> int:
        self.count += 1
        try:
            return await self.sender.deliver_due(client)
        except Exception as error:  # noqa: BLE001 - run() logs a round that raises and goes on
            self.aborted.append(type(error).__name__)
            return 0
        finally:
            self.clock.advance(STEP)


async def test_the_good_webhook_queued_after_800_bad_deliveries_gets_its_first_attempt_before_any_retry(
    stores: tuple[ThreadStore, PushStore], receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    threads, push = stores
    closed = f"http://127.0.0.1:{free_port()}"
    bad: list[str] = []
    for task in range(8):  # eight of mallory's tasks, a hundred webhooks each
        configs = [{"url": f"{closed}/hook/{task}/{n}"} for n in range(50)]
        configs += [{"url": f"http://127.0.0.1/\r\nX-Injected: {task}-{n}"} for n in range(30)]
        configs += [{"url": f"{closed}/t/{task}/{n}", "token": "\u2603"} for n in range(20)]
        bad += await queue(threads, push, f"bad{task}", configs, at=T0)
    [good] = await queue(
        threads, push, "good", [{"url": receiver.url}], at=T0.replace(microsecond=1)
    )
    clock = ManualClock(T0.replace(second=1))
    rounds = Rounds(dispatcher(push, clock, OPTIONS), clock)

    caplog.set_level(logging.WARNING, logger="pausemesh.a2a.push")
    async with httpx.AsyncClient(timeout=OPTIONS.timeout_seconds) as client:
        while not receiver.accepted() and rounds.count < 4 * len(bad) // BATCH:
            await rounds.run(client)
    states = [await push.delivery_state(each) for each in bad]

    assert rounds.aborted == []
    assert [d.delivery_id for d in receiver.accepted()] == [good]
    # Every round before the good one's was full (it is due in each): at most one pass.
    assert rounds.count <= -(-(len(bad) + 1) // BATCH)
    assert await push.delivery_state(good) == PushDeliveryState(
        attempts=1, status="delivered", last_error=None
    )
    attempts = [s.attempts for s in states if s is not None]
    assert max(attempts) == 1  # none was tried again before the good one was delivered
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == sum(attempts)  # one line per bad delivery tried


async def test_a_delivery_that_keeps_failing_warns_at_its_first_failure_and_when_given_up(
    stores: tuple[ThreadStore, PushStore],
    metrics: PrometheusMetrics,
    caplog: pytest.LogCaptureFixture,
) -> None:
    threads, push = stores
    [failing] = await queue(
        threads, push, "t1", [{"url": f"http://127.0.0.1:{free_port()}/hook"}], at=T0
    )
    clock = ManualClock(T0)
    options = PushOptions(
        max_attempts=4, backoff_seconds=1.0, backoff_max_seconds=2.0, lease_seconds=3.0
    )
    sender = dispatcher(push, clock, options)
    taken: list[int] = []

    caplog.set_level(logging.DEBUG, logger="pausemesh.a2a.push")
    async with httpx.AsyncClient(timeout=options.timeout_seconds) as client:
        for _ in range(10):
            taken.append(await sender.deliver_due(client))
            clock.advance(options.backoff_max_seconds)  # past any backoff

    def sample(outcome: str) -> float | None:
        return metrics.registry.get_sample_value(
            "pausemesh_a2a_push_deliveries_total", {"outcome": outcome}
        )

    assert taken == [1, 1, 1, 1, 0, 0, 0, 0, 0, 0]
    assert await push.delivery_state(failing) == PushDeliveryState(
        attempts=4, status="failed", last_error="ConnectError"
    )
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert "attempt 1 of 4" in warnings[0]
    assert "given up after 4 attempts: ConnectError" in warnings[1]
    assert all(failing in line for line in warnings)
    assert (sample("retry"), sample("failed"), sample("delivered")) == (3.0, 1.0, 0.0)


async def test_a_failed_attempt_moves_the_next_one_back_by_at_least_half_the_backoff(
    stores: tuple[ThreadStore, PushStore],
) -> None:
    threads, push = stores
    await queue(threads, push, "t1", [{"url": f"http://127.0.0.1:{free_port()}/hook"}], at=T0)
    clock = ManualClock(T0)
    options = PushOptions(backoff_seconds=4.0, backoff_max_seconds=60.0)
    sender = dispatcher(push, clock, options)

    async with httpx.AsyncClient(timeout=options.timeout_seconds) as client:
        first = await sender.deliver_due(client)
        clock.advance(1.99)
        too_early = await sender.deliver_due(client)
        clock.advance(2.01)
        second = await sender.deliver_due(client)
        clock.advance(3.99)  # the second failure's step is 8 s: not before 4 s
        third_too_early = await sender.deliver_due(client)

    assert (first, too_early, second, third_too_early) == (1, 0, 1, 0)


async def test_a_gone_receiver_and_a_url_that_can_never_be_called_are_given_up_at_once(
    stores: tuple[ThreadStore, PushStore], receiver: Receiver
) -> None:
    threads, push = stores
    receiver.plan = [410]
    gone, never = await queue(
        threads,
        push,
        "t1",
        [{"url": receiver.url}, {"url": receiver.url + "\nX-Injected: 1"}],
        at=T0,
    )
    clock = ManualClock(T0)
    sender = dispatcher(push, clock, OPTIONS)

    async with httpx.AsyncClient(timeout=OPTIONS.timeout_seconds) as client:
        first = await sender.deliver_due(client)
        clock.advance(OPTIONS.backoff_max_seconds)
        later = await sender.deliver_due(client)

    assert (first, later) == (2, 0)
    assert await push.delivery_state(gone) == PushDeliveryState(
        attempts=1, status="failed", last_error="gone"
    )
    state = await push.delivery_state(never)
    assert state is not None
    assert (state.attempts, state.status) == (1, "failed")
    assert state.last_error == (
        "The push notification URL must not contain whitespace or control characters"
    )
    assert len(receiver.requests) == 1
