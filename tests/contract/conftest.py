"""Fixtures of the store contract suites: each test runs once per store kind."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pausemesh.core.threads import ThreadStore
from tests.support.thread_stores import THREAD_STORE_FACTORIES, open_thread_store


@pytest.fixture(name="threads", params=sorted(THREAD_STORE_FACTORIES))
async def threads_fixture(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[ThreadStore]:
    """A fresh thread store of each kind (memory, SQLite file, PostgreSQL schema)."""
    async with open_thread_store(request.param, tmp_path) as store:
        yield store
