"""The rate limiter contract, for the per-process limiter and the PostgreSQL one.

Times are passed in (epoch seconds), so windows are exact: nothing here waits on a clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from pausemesh.core.errors import SettingsError
from pausemesh.core.limits import LocalRateLimiter, RateLimit, RateLimiter
from pausemesh.stores.postgres import PostgresDatabase
from pausemesh.stores.postgres.rate_limits import PostgresRateLimiter
from tests.support.postgres import DATABASE_URL, migrated_database

_PER_MINUTE = RateLimit(count=3, period_seconds=60)
_T0 = 1_800_000_000.0  # the start of a minute (divisible by 60)


@asynccontextmanager
async def _limiters(kind: str) -> AsyncIterator[tuple[RateLimiter, RateLimiter]]:
    """Two limiters that must share one budget: the same object locally, two replicas' pools
    on one schema on PostgreSQL."""
    if kind == "local":
        local = LocalRateLimiter()
        yield local, local
        return
    async with migrated_database() as database:
        other = await PostgresDatabase.connect(DATABASE_URL, schema=database.schema, min_size=1)
        try:
            yield PostgresRateLimiter(database), PostgresRateLimiter(other)
        finally:
            await other.close()


@pytest.fixture(name="kind", params=["local", "postgres"])
def kind_fixture(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


async def test_hits_within_the_limit_pass_and_the_next_gets_the_seconds_left(kind: str) -> None:
    async with _limiters(kind) as (limiter, _):
        assert [await limiter.hit("alice", _PER_MINUTE, _T0 + i) for i in range(3)] == [None] * 3
        assert await limiter.hit("alice", _PER_MINUTE, _T0 + 20.5) == 40
        assert await limiter.hit("alice", _PER_MINUTE, _T0 + 59.9) == 1


async def test_the_next_window_starts_afresh(kind: str) -> None:
    async with _limiters(kind) as (limiter, _):
        for i in range(5):
            await limiter.hit("alice", _PER_MINUTE, _T0 + i)
        assert await limiter.hit("alice", _PER_MINUTE, _T0 + 60) is None


async def test_keys_have_budgets_of_their_own(kind: str) -> None:
    async with _limiters(kind) as (limiter, _):
        for i in range(3):
            await limiter.hit("alice", _PER_MINUTE, _T0 + i)
        assert await limiter.hit("bob", _PER_MINUTE, _T0 + 3) is None
        assert await limiter.hit("alice", _PER_MINUTE, _T0 + 3) is not None


async def test_replicas_share_one_budget(kind: str) -> None:
    async with _limiters(kind) as (first, second):
        assert await first.hit("alice", _PER_MINUTE, _T0) is None
        assert await second.hit("alice", _PER_MINUTE, _T0 + 1) is None
        assert await first.hit("alice", _PER_MINUTE, _T0 + 2) is None
        assert await second.hit("alice", _PER_MINUTE, _T0 + 3) == 57


async def test_many_concurrent_hits_admit_exactly_the_limit(kind: str) -> None:
    async with _limiters(kind) as (first, second):
        hits = [(first if i % 2 else second).hit("alice", _PER_MINUTE, _T0 + 1) for i in range(40)]
        results = await asyncio.gather(*hits)
        assert results.count(None) == 3
        assert all(r == 59 for r in results if r is not None)


async def test_a_replica_whose_clock_lags_does_not_reopen_the_window() -> None:
    async with _limiters("postgres") as (ahead, behind):
        for i in range(3):
            await ahead.hit("alice", _PER_MINUTE, _T0 + 60 + i)
        # 59 s behind: its window index is the previous one, the row's is kept.
        assert await behind.hit("alice", _PER_MINUTE, _T0 + 10) == 110


@pytest.mark.parametrize("text", ["120/minute", "1/second", "5 / hour"])
def test_a_rate_is_a_count_per_second_minute_or_hour(text: str) -> None:
    parsed = RateLimit.parse(text)
    assert parsed.count >= 1
    assert parsed.period_seconds in {1, 60, 3600}


@pytest.mark.parametrize("text", ["0/minute", "120/day", "120", "-1/second", "ten/minute"])
def test_a_malformed_rate_is_a_settings_error(text: str) -> None:
    with pytest.raises(SettingsError, match="PAUSEMESH_RATE_LIMIT"):
        RateLimit.parse(text)
