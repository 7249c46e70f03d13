"""Stream slots, the drain and the limit settings (framework-free parts of the limits)."""

from __future__ import annotations

import asyncio
import os

import pytest

from pausemesh.core.drain import Drain
from pausemesh.core.errors import SettingsError, TooManyStreamsError
from pausemesh.core.limits import RateLimit, StreamSlots
from pausemesh.settings import load_settings
from pausemesh.web.limits import limit_key


def test_stream_slots_trip_at_the_limit_and_a_release_frees_one() -> None:
    slots = StreamSlots(2)
    first, _ = slots.acquire("alice"), slots.acquire("alice")
    with pytest.raises(TooManyStreamsError) as refused:
        slots.acquire("alice")
    assert refused.value.code == "TOO_MANY_STREAMS"
    slots.acquire("bob")  # another principal's slots are its own
    first.release()
    first.release()  # a stream ends once, however many paths notice
    assert slots.held("alice") == 1
    slots.acquire("alice")
    assert slots.held("alice") == 2


def test_without_a_resolver_the_client_address_is_the_key() -> None:
    assert limit_key("alice", {"client": ("10.0.0.1", 5)}) == "principal:alice"
    assert limit_key(None, {"client": ("10.0.0.1", 5)}) == "client:10.0.0.1"
    assert limit_key(None, {}) == "client:unknown"


async def test_the_drain_wakes_its_watchers_once_and_keeps_its_first_deadline() -> None:
    drain = Drain()
    woken: list[str] = []
    stop = drain.watch(lambda: woken.append("run"))
    assert not drain.draining
    assert drain.seconds_left() is None
    drain.begin(5.0)
    first = drain.deadline
    drain.begin(0.0)
    assert drain.deadline == first
    assert woken == ["run"]
    left = drain.seconds_left()
    assert left is not None
    assert 0 < left <= 5.0
    stop()
    await asyncio.wait_for(drain.wait(), timeout=5)


def test_a_malformed_rate_limit_stops_the_start_with_its_name() -> None:
    environ = {"PAUSEMESH_RATE_LIMIT": "lots"}
    with pytest.raises(SettingsError, match="PAUSEMESH_RATE_LIMIT must be a count per"):
        load_settings(environ=environ, env_file=os.devnull)


def test_the_limit_settings_are_read_from_the_environment() -> None:
    settings = load_settings(
        environ={
            "PAUSEMESH_RATE_LIMIT": "120/minute",
            "PAUSEMESH_MAX_STREAMS_PER_PRINCIPAL": "4",
            "PAUSEMESH_SEND_TIMEOUT_SECONDS": "2.5",
            "PAUSEMESH_SHUTDOWN_GRACE_SECONDS": "0",
        },
        env_file=os.devnull,
    )
    assert settings.rate_limit_rule == RateLimit(120, 60)
    assert settings.max_streams_per_principal == 4
    assert settings.send_timeout_seconds == 2.5
    assert settings.shutdown_grace_seconds == 0.0
    assert load_settings(environ={}, env_file=os.devnull).rate_limit_rule is None
