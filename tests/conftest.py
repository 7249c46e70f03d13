from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pausemesh.core import ContinuationService, ManualClock
from pausemesh.core.ports import EventStore
from pausemesh.observability.observer import CollectingObserver
from tests.support import postgres as _postgres  # noqa: F401 - registers the "postgres" kinds
from tests.support.builds import check_builds
from tests.support.stores import STORE_FACTORIES, open_store
from tests.support.test_order import longest_first


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The parallel workers take whole files in this order: the longest first.
    longest_first(items, config.rootpath.as_posix())


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Before any fixture: a test needing a build waits for `make test`'s builds, then skips
    # (locally) or fails (CI) if it is missing.
    check_builds(item)


@pytest.fixture(name="store_kind", params=sorted(STORE_FACTORIES))
def store_kind_fixture(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


@pytest.fixture(name="event_store")
async def event_store_fixture(store_kind: str, tmp_path: Path) -> AsyncIterator[EventStore]:
    async with open_store(store_kind, tmp_path) as store:
        yield store


@pytest.fixture(name="clock")
def clock_fixture() -> ManualClock:
    return ManualClock()


@pytest.fixture(name="observer")
def observer_fixture() -> CollectingObserver:
    return CollectingObserver()


@pytest.fixture(name="service")
def service_fixture(
    event_store: EventStore, clock: ManualClock, observer: CollectingObserver
) -> ContinuationService:
    return ContinuationService(store=event_store, clock=clock, observer=observer)
