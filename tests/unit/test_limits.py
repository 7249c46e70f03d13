"""Stream slots, the drain and the limit settings (framework-free parts of the limits)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from pausemesh.core.drain import Drain
from pausemesh.core.errors import SettingsError, TooManyStreamsError
from pausemesh.core.limits import RateLimit, StreamSlots
from pausemesh.settings import load_settings
from pausemesh.web.limits import SendTimeoutGuard, limit_key


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


def test_a_refusal_names_what_is_full() -> None:
    tails = StreamSlots(1, what="tails")
    tails.acquire("alice")
    with pytest.raises(TooManyStreamsError) as refused:
        tails.acquire("alice")
    assert refused.value.message == "Too many open tails (at most 1); close one and retry"


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
            "PAUSEMESH_MAX_TAILS_PER_PRINCIPAL": "7",
            "PAUSEMESH_SEND_TIMEOUT_SECONDS": "2.5",
            "PAUSEMESH_SHUTDOWN_GRACE_SECONDS": "0",
        },
        env_file=os.devnull,
    )
    assert settings.rate_limit_rule == RateLimit(120, 60)
    assert settings.max_streams_per_principal == 4
    assert settings.max_tails_per_principal == 7
    assert settings.send_timeout_seconds == 2.5
    assert settings.shutdown_grace_seconds == 0.0
    assert load_settings(environ={}, env_file=os.devnull).rate_limit_rule is None


async def _sse_app_that_stops_on_disconnect(scope: Any, receive: Any, send: Any) -> None:
    """An SDK-like SSE app: one event, then it waits for its client to leave and returns
    without ending the body (as sse-starlette does when it is cancelled)."""
    headers = [(b"content-type", b"text/event-stream")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
    while (await receive())["type"] != "http.disconnect":
        pass


async def _serve(
    guard: SendTimeoutGuard, client_gone: asyncio.Event | None = None
) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []
    gone = client_gone or asyncio.Event()  # unless the test says so, the client stays

    async def receive() -> dict[str, Any]:
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "path": "/a2a/jsonrpc"}
    await asyncio.wait_for(guard(scope, receive, send), timeout=10)  # type: ignore[arg-type]
    return sent


async def test_a_mount_stream_is_told_its_client_left_on_drain_and_its_body_is_ended() -> None:
    drain = Drain()
    guard = SendTimeoutGuard(_sse_app_that_stops_on_disconnect, timeout=30, drain=lambda: drain)
    served = asyncio.ensure_future(_serve(guard))
    await asyncio.sleep(0)
    assert not served.done()
    drain.begin(10)
    sent = await served
    assert [m.get("body") for m in sent[1:]] == [b"data: 1\n\n", b""]
    assert [m.get("more_body") for m in sent[1:]] == [True, False]


async def test_a_stream_that_starts_during_the_drain_ends_after_its_first_write() -> None:
    drain = Drain()
    drain.begin(10)
    guard = SendTimeoutGuard(_sse_app_that_stops_on_disconnect, timeout=30, drain=lambda: drain)
    sent = await _serve(guard)
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}


async def test_without_a_drain_the_guard_leaves_the_stream_to_its_route() -> None:
    # The AG-UI routes end their own runs and tails: the guard neither tells them their
    # client left nor ends a body they did not end (the client really left here).
    client_gone = asyncio.Event()
    client_gone.set()
    guard = SendTimeoutGuard(_sse_app_that_stops_on_disconnect, timeout=30)
    sent = await _serve(guard, client_gone)
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert sent[-1]["more_body"] is True
